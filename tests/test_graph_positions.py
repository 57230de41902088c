"""The graph keeps the positions of the spec's own sections (``train:``, ``dims:``,
``inputs:``, ``outputs:``), so training places its errors without reading the YAML
again (:meth:`attngraph.ir.graph.Graph.where`)."""

from __future__ import annotations

from pathlib import Path

from attngraph.errors import SourceLoc
from attngraph.frontend import loads_spec
from attngraph.ir.graph import Graph
from attngraph.source import loads

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"


def test_train_positions_are_the_documents() -> None:
    """Every path under ``train:`` and the other kept sections is where the document
    puts it, key or value, with the spec's text for the excerpt."""
    text = GA.read_text(encoding="utf-8")
    g, doc = loads_spec(text, "ga.yaml"), loads(text, "ga.yaml")
    paths = [("train", "task"), ("train", "batch"), ("train", "options", "vocab"),
             ("train", "target", "accuracy"), ("outputs",), ("dims", "vocab"),
             ("inputs", "tokens"), ()]
    for path in paths:
        for key in (False, True):
            assert g.where(*path, key=key) == doc.loc(path, key=key), (path, key)
            assert g.where(*path, key=key).line > 0, (path, key)
    assert str(g.where("train", "task")) == "ga.yaml:35:9"
    assert g.where("train", "task").excerpt().strip().startswith("35 | ")
    assert g.text == text


def test_a_missing_path_gives_its_nearest_kept_ancestor() -> None:
    """A setting the spec lacks points at the section that would hold it."""
    text = GA.read_text(encoding="utf-8")
    g = loads_spec(text, "ga.yaml")
    assert g.where("train", "options", "nonesuch") == g.where("train", "options")
    assert g.where("train", "optimizer") == g.where("train")


def test_positions_outlive_the_passes_and_a_graph_built_in_code_has_none() -> None:
    """The front end's passes keep the positions; a graph built in code gives its file."""
    g = loads_spec(GA.read_text(encoding="utf-8"), "ga.yaml")
    assert g.positions is not None and ("train", "task") in g.positions.locs
    assert not any(p and p[0] in ("nodes", "blocks") for p in g.positions.locs)
    bare = Graph("bare", (), (), file="bare.yaml")
    assert bare.where("train", "task") == SourceLoc("bare.yaml")
    assert bare.text is None
