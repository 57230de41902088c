"""`attngraph validate` and `attngraph schema` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_valid_spec_prints_summary_with_shapes(cli) -> None:
    """A correct spec prints nodes with inferred shapes, outputs and the parameter count."""
    r = cli("validate", ROOT / "specs/global_attention.yaml", code=0)
    out = r.output
    assert "ok — global_attention" in out
    assert "inputs:" in out and "outputs:" in out and "parameters:" in out
    assert "softmax" in out and "[N]" in out


def test_bad_spec_prints_every_error_and_exits_1(spec_file, cli) -> None:
    """Each problem is one located line with the caret; two problems, two errors; exit 1."""
    path = spec_file(
        "attngraph: 1\nname: t\ninputs:\n  v: {type: vectors, dim: 8}\nnodes:\n"
        "  a: {kind: linear, from: v, out: 2, bais: 1}\n"
        "  b: {kind: sofmax, scores: a}\noutputs: {a: a}\n"
    )
    r = cli("validate", path, code=1)
    text = r.output
    assert f"{path}:6:38: error: node 'a': unknown field 'bais'" in text
    assert f"{path}:7:13: error: node 'b': unknown kind 'sofmax'" in text
    assert "hint: did you mean 'softmax'?" in text
    assert "2 errors" in text
    assert "Traceback" not in text


def test_validate_never_imports_torch_and_never_tracebacks(tmp_path: Path) -> None:
    """The real command runs without importing torch, and a broken file gives no traceback."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("attngraph: 1\nname: [\n", encoding="utf-8")
    code = (
        "import sys\n"
        "from attngraph.cli import main\n"
        "try:\n"
        f"    main(['validate', {str(ROOT / 'specs/multihead_attention.yaml')!r}, "
        f"{str(bad)!r}])\n"
        "except SystemExit as e:\n"
        "    print('exit', e.code)\n"
        "print('torch' in sys.modules, 'networkx' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.stdout.strip().splitlines()[-2:] == ["exit 1", "False False"]
    assert "Traceback" not in r.stderr
    assert f"{bad}:3:1: error: YAML syntax:" in r.stderr


def test_schema_lists_and_describes_the_training_tasks(cli) -> None:
    """train.task enumerates the registered tasks, and its description names each with
    what it is (hover text in an editor)."""
    from attngraph.train.tasks.lookup import TASKS

    r = cli("schema", code=0)
    task = json.loads(r.output)["$defs"]["TrainSpec"]["properties"]["task"]
    assert task["enum"] == TASKS.names() and "reversal" in task["enum"]
    for name in TASKS.names():
        assert f"- {name}: " in task["description"], name


def test_schema_is_json_schema_of_every_kind(tmp_path: Path, cli) -> None:
    """`attngraph schema -o` writes a JSON Schema whose node union covers every kind."""
    from attngraph.kinds import spec_kinds

    out = tmp_path / "s.json"
    cli("schema", "-o", out, code=0)
    schema = json.loads(out.read_text())
    kinds = {d["properties"]["kind"]["const"] for d in schema["$defs"].values()
             if "kind" in d.get("properties", {}) and "const" in d["properties"]["kind"]}
    assert kinds == set(spec_kinds())
