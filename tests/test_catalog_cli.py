"""`attngraph catalog` lists the built-in mechanisms from any working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

SPECS = Path(__file__).resolve().parent.parent / "specs"


def test_catalog_lists_builtin_specs_outside_the_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """Run from a folder with no specs/, the command lists every spec of the catalog."""
    monkeypatch.chdir(tmp_path)
    r = cli("catalog", code=0)
    names = {line.split()[0] for line in r.output.splitlines() if line.strip()}
    assert names == {p.stem for p in SPECS.glob("*.yaml")}


def test_bad_specs_do_not_stop_the_listing(tmp_path: Path, cli) -> None:
    """With broken files beside good ones (a tagged scalar that once crashed the loader,
    a deep nesting, a Latin-1 file, a named pipe), every good spec is listed and each
    bad one is reported with its located error; nothing hangs or tracebacks."""
    import os
    import shutil

    for name in ("global_attention.yaml", "multihead_attention.yaml"):
        shutil.copy(SPECS / name, tmp_path / name)
    (tmp_path / "a_tag.yaml").write_text("attngraph: !!bool 1\nname: x\n")
    (tmp_path / "b_deep.yaml").write_text("x: " + "[" * 30_000 + "]" * 30_000 + "\n")
    (tmp_path / "c_latin1.yaml").write_bytes(b"attngraph: 1\nname: caf\xe9\n")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "d_pipe.yaml")
    r = cli("catalog", "--dir", tmp_path, code=1)
    out = r.output
    listed = {line.split()[0] for line in out.splitlines() if line[:1].isalpha()}
    assert {"global_attention", "multihead_attention"} <= listed
    assert f"{tmp_path / 'a_tag.yaml'}:1:12: error: YAML tag" in out
    assert f"{tmp_path / 'b_deep.yaml'}:1:68: error: document nests deeper" in out
    assert f"{tmp_path / 'c_latin1.yaml'}:2:10: error: spec is not UTF-8 text" in out
    if hasattr(os, "mkfifo"):
        assert "d_pipe.yaml is a FIFO (named pipe), not a spec file" in out
    assert "Traceback" not in out
    assert out.rstrip().endswith(f"{4 if hasattr(os, 'mkfifo') else 3} of "
                                 f"{6 if hasattr(os, 'mkfifo') else 5} specs have errors")


#: Where the attention posts say attention is used (the first post's list, and multiple
#: object recognition from the second); the catalog has a spec for each.
AREAS = {"algorithm learning", "caption generation", "graph modeling", "handwriting generation",
         "image classification in clutter", "image generation", "language modeling",
         "speech recognition", "text translation", "multiple object recognition"}


def test_catalog_names_each_specs_task_and_application_area(cli) -> None:
    """Every line ends with the task's application area, then the spec's task, and
    the catalog covers every area the attention posts name."""
    import re

    from attngraph.frontend import load_spec
    from attngraph.train.tasks.lookup import TASKS

    r = cli("catalog", "--dir", SPECS, code=0)
    lines = {line.split()[0]: line for line in r.output.splitlines() if line.strip()}
    areas = set()
    for path in SPECS.glob("*.yaml"):
        task = load_spec(path).train.task
        area = TASKS[task].area
        line = lines[path.stem]
        assert re.search(rf"  {re.escape(area)} +{re.escape(task)}$", line), line
        areas.add(area)
    assert AREAS <= areas, sorted(AREAS - areas)
