"""The command boundary: exit codes as documented (0, 1, 2, 130), plugins that raise
a BaseException at import or later reported naming the plugin, and Python warnings
printed once as ``attngraph: warning: ...``, never raw with a library's file path."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from attngraph.cli import EXIT_CODES, PLUGIN_GROUP, PLUGIN_MODULES
from attngraph.kinds import KINDS, SCORERS

ROOT = Path(__file__).resolve().parent.parent

GOOD = """attngraph: 1
name: t
inputs:
  src: {type: vectors, dim: 8}
nodes:
  x: {kind: items, from: src}
  s: {kind: scorer, fn: FN, query: x, key: x}
  p: {kind: softmax, scores: s}
outputs: {p: p}
"""

PLUGIN = '''
import sys, warnings
import numpy as np
from attngraph.kinds import ScorerInfo, register_scorer

class Boom(BaseException):
    pass

def _ok(ctx, q, k):
    return {"": ctx.t("query").with_dims(q.dims[0], k.dims[0])}

def warn_shape(ctx, q, k):
    np.array([1e39]).astype(np.float32)          # numpy: overflow encountered in cast
    warnings.warn("this plugin is experimental")  # UserWarning, twice: shown once
    warnings.warn("this plugin is experimental")
    return _ok(ctx, q, k)

def ctrl_c(ctx, q, k):
    raise KeyboardInterrupt

def _register(name, shape):
    register_scorer(ScorerInfo(name, "q.k", same_size=True, shape=shape,
                               module="attngraph.lower.rules.scorers:Dot"))

_register("warn_fn", warn_shape)
_register("ctrl_c_fn", ctrl_c)
'''


@pytest.fixture
def plugdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for plugin modules; registrations and imports undone after."""
    d = tmp_path / "plugins"
    d.mkdir()
    (d / "robust_plug.py").write_text(PLUGIN, encoding="utf-8")
    for name, body in {"exit4": "raise SystemExit(4)\n",
                       "boom": "class Boom(BaseException):\n    pass\nraise Boom('bang')\n",
                       "genexit": "raise GeneratorExit\n",
                       "interrupted": "raise KeyboardInterrupt\n"}.items():
        (d / f"{name}.py").write_text(body, encoding="utf-8")
    monkeypatch.syspath_prepend(str(d))
    before = set(sys.modules)
    plugins = dict(PLUGIN_MODULES)
    with KINDS.scoped(), SCORERS.scoped():
        yield d
    for name in set(sys.modules) - before:
        if name in {f.stem for f in d.glob("*.py")}:
            del sys.modules[name]
    PLUGIN_MODULES.clear()
    PLUGIN_MODULES.update(plugins)


def spec(tmp_path: Path, fn: str = "dot", text: str = GOOD) -> str:
    p = tmp_path / f"{fn}.yaml"
    p.write_text(text.replace("FN", fn), encoding="utf-8")
    return str(p)


def test_each_exit_code(tmp_path: Path, plugdir: Path, cli) -> None:
    """0 success; 1 a located error in the input; 2 a usage error; 130 Ctrl-C."""
    cases = [
        (0, ["validate", spec(tmp_path)]),
        (1, ["validate", spec(tmp_path, "no_such_fn")]),
        (1, ["validate", str(tmp_path / "missing.yaml")]),
        (1, ["--plugin", "exit4", "validate", spec(tmp_path)]),
        (2, ["validate"]),
        (2, ["validate", "--no-such-option", spec(tmp_path)]),
        (2, ["no-such-command"]),
        (2, ["render", spec(tmp_path), "--view", "nope"]),
        (130, ["--plugin", "robust_plug", "validate", spec(tmp_path, "ctrl_c_fn")]),
    ]
    for code, args in cases:
        r = cli(*args)
        assert r.exit_code == code, (args, r.exit_code, r.output)
        assert r.exc_info is None or r.exc_info[0] is SystemExit, (args, r.exc_info)
        assert "Traceback" not in r.output
    assert {c for c, _ in cases} == set(EXIT_CODES)


def test_the_docs_table_matches_the_codes_the_cli_uses() -> None:
    """docs/robustness.md "Exit codes" lists exactly EXIT_CODES; the README agrees."""
    text = (ROOT / "docs" / "robustness.md").read_text(encoding="utf-8")
    section = text.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", section, re.M)}
    assert documented == set(EXIT_CODES)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "the exit\nstatus is 1" in readme and "exits 2" in readme and "130" in readme
    assert "docs/robustness.md#exit-codes" in readme


@pytest.mark.parametrize(("module", "said"), [
    ("exit4", "--plugin exit4 failed to load: SystemExit: 4"),
    ("boom", "--plugin boom failed to load: Boom: bang"),
    ("genexit", "--plugin genexit failed to load: GeneratorExit"),
])
def test_a_plugin_raising_a_base_exception_is_one_error(module: str, said: str,
                                                        plugdir: Path, tmp_path: Path, cli) -> None:
    """--plugin whose import raises a BaseException: an error naming it, exit 1."""
    r = cli("--plugin", module, "validate", spec(tmp_path), code=1)
    assert f"attngraph: error: {said}" in r.output and "hint:" in r.output


def test_ctrl_c_while_loading_a_plugin_exits_130(plugdir: Path, tmp_path: Path, cli) -> None:
    """KeyboardInterrupt is the user's: 130, as anywhere else."""
    r = cli("--plugin", "interrupted", "validate", spec(tmp_path))
    assert r.exit_code == 130 and "interrupted" in r.output


@pytest.mark.parametrize("target", ["exit4", "boom", "genexit"])
def test_an_installed_plugin_that_exits_is_skipped_with_a_warning(
        target: str, plugdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """An entry point raising SystemExit(4) (or a BaseException) no longer makes every
    command exit 4: it is skipped with a warning and the command runs."""
    import importlib
    import importlib.metadata

    ep = SimpleNamespace(name="demo", value=target,
                         load=lambda: importlib.import_module(target))
    real = importlib.metadata.entry_points
    # attngraph's group only: pydantic looks up its own plugins the same way when a
    # model is (re)built, and must not be handed this one
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group=None, **kw: [ep] if group == PLUGIN_GROUP
                        else real(group=group, **kw) if group is not None else real(**kw))
    r = cli("validate", spec(tmp_path), code=0)
    assert f"attngraph: warning: plugin 'demo' ({target}) failed to load" in r.output
    assert "; skipped" in r.output


def test_a_base_exception_from_plugin_code_at_run_time_names_the_plugin(
        plugdir: Path, tmp_path: Path, cli) -> None:
    """A BaseException a plugin's code raises past its hooks (here a normaliser called
    at run time) is one error naming the plugin, exit 1."""
    (plugdir / "late_plug.py").write_text(
        "from attngraph.kinds import NormaliserInfo, register_normaliser\n"
        "class Late(BaseException):\n    pass\n"
        "def late(z, mask, *a, **k):\n    raise Late('at run time')\n"
        "register_normaliser(NormaliserInfo('late', 'never', impl=late))\n",
        encoding="utf-8")
    text = GOOD.replace("{kind: softmax, scores: s}", "{kind: softmax, scores: s, fn: late}")
    r = cli("--plugin", "late_plug", "compile", spec(tmp_path, "dot", text), code=1)
    assert "Late: at run time" in r.output and "late_plug" in r.output, r.output
    assert "Traceback" not in r.output


def test_warnings_print_once_without_file_paths(plugdir: Path, tmp_path: Path) -> None:
    """numpy's overflow and a UserWarning from a plugin's code: each once, as
    attngraph: warning: ..., with no 'Warning:' line or Python file path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(plugdir), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "attngraph", "--plugin", "robust_plug",
                        "validate", "-q", spec(tmp_path, "warn_fn")], capture_output=True,
                       text=True, env=env, check=False, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert "attngraph: warning: overflow encountered in cast" in lines
    assert lines.count("attngraph: warning: this plugin is experimental") == 1
    assert not [x for x in lines if "Warning:" in x or ".py:" in x], r.stderr
