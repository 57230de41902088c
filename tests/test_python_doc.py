"""``docs/python.md`` stays true: its spec is written where it says, its Python examples
run in order in one session and give what they say, its shell commands run, and its
error example is what the workflow prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("pandas")

from fuzz.seeds import blocks  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "python.md"
BLOCKS = blocks(DOC)


@pytest.fixture
def in_a_copy(repo_copy) -> Path:
    """A working folder that sees the catalog and the example data as in the repository,
    holding the files the doc says to save (``<!-- file: NAME -->`` before a block)."""
    folder = repo_copy("specs", "examples")
    for b in BLOCKS:
        if b.marker.startswith("file:"):
            (folder / b.marker.split(":", 1)[1].strip()).write_text(b.text, encoding="utf-8")
    return folder


def test_the_walk_through_is_ten_lines_at_most() -> None:
    """The CSV walk-through (own data -> train -> evaluate -> predict -> export -> reload)
    is one block of at most 10 lines, and the DataFrame one shorter still."""
    code = [b for b in BLOCKS if b.lang == "python"]
    walk = next(b.text for b in code if "attngraph.fit(" in b.text and ".csv" in b.text)
    lines = [x for x in walk.splitlines() if x.strip()]
    assert len(lines) <= 10
    for call in ("attngraph.fit(", ".evaluate(", ".predict(", ".export(", "load_run("):
        assert call in walk, call
    frame = next(b.text for b in code if "attngraph.fit(" in b.text and "df" in b.text)
    assert len([x for x in frame.splitlines() if x.strip()]) <= 10


def test_the_readme_example_is_the_docs() -> None:
    """README links the page, and each training line of its Python example is a line of
    the page's examples (which the test below runs)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/python.md" in readme
    doc = DOC.read_text(encoding="utf-8")
    block = readme[readme.index('run = attngraph.fit("topics.yaml"'):]
    block = block[:block.index("```")]
    for line in block.splitlines()[:4]:
        assert line in doc, line


@pytest.mark.slow
def test_the_python_examples_run_in_order(in_a_copy: Path) -> None:
    """Every python block runs after the ones before it; the runs they make predict the
    labels of the data, the CSV run reloads as itself, the own-loop run saved reloads."""
    scope: dict[str, object] = {"__name__": "python_doc"}
    for block in (b for b in BLOCKS if b.lang == "python"):
        try:
            exec(compile(block.text, f"docs/python.md:{block.line}", "exec"), scope)  # noqa: S102
        except Exception as exc:  # the block's line makes the failure findable
            pytest.fail(f"docs/python.md:{block.line}: {type(exc).__name__}: {exc}")
    assert scope["metrics"]["accuracy"] > 0.5  # type: ignore[index]
    assert scope["preds"][0]["prediction"] == "weather"  # type: ignore[index]
    assert scope["run"].labels == ["food", "sport", "tech", "weather"]  # type: ignore[attr-defined]
    assert scope["run"].graph.dims["vocab"] == 33  # type: ignore[attr-defined]
    assert (in_a_copy / "topics.onnx").stat().st_size > 0
    own = scope["own"]
    assert own.labels == scope["run"].labels  # type: ignore[attr-defined]
    assert (in_a_copy / "runs" / "own" / "checkpoint.pt").exists()


@pytest.mark.slow
def test_the_shell_commands_run(in_a_copy: Path, cli) -> None:
    """Each command of the page's sh block exits 0 (the CSV it trains on is made first, as
    the Python walk-through makes it); train states the sizes it chose."""
    import pandas as pd

    pd.read_json("examples/data/topics.jsonl", lines=True).to_csv("topics.csv", index=False)
    sh = next(b for b in BLOCKS if b.lang == "sh")
    for line in sh.text.splitlines():
        argv = shlex.split(line)
        assert argv[0] == "attngraph"
        res = cli(*argv[1:])
        assert res.exit_code == 0, f"{line}\n{res.output}"
        if argv[1] == "train":
            assert "sizes from the data in topics.csv: vocab = 33" in res.stderr
    assert (in_a_copy / "preds.jsonl").exists() and (in_a_copy / "topics.pt2").exists()


def test_the_error_example_is_what_train_prints(tmp_path: Path) -> None:
    """The page's error for a record holding a number where text belongs is exactly what
    ``attngraph.train`` raises for such records, located at the record."""
    import attngraph

    shown = next(b for b in BLOCKS if b.lang == "text").text.strip()
    spec = next(b for b in BLOCKS if b.marker.startswith("file:")).text
    bad = re.search(r"\{.*\}", shown.splitlines()[1])
    assert bad is not None
    import json

    records = [{"text": "a storm", "label": "weather"}, {"text": "a match", "label": "sport"},
               json.loads(bad.group())] * 4
    with pytest.raises(attngraph.AttnGraphError) as err:
        attngraph.fit(spec, records, steps=1, out=tmp_path / "run")
    assert err.value.format().strip() == shown
    assert not (tmp_path / "run").exists()  # a run that cannot start writes nothing
