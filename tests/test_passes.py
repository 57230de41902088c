"""Passes and pipelines: verify after each pass, print after any, fused graphs re-infer."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from attngraph.errors import GraphError, RegistryError
from attngraph.frontend import load_spec
from attngraph.ir.graph import Edge, Graph, Role
from attngraph.passes import FRONT, OPTIMIZE, Pass, Pipeline
from attngraph.passes.shape_inference import infer_shapes

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))


def _dangle(graph: Graph) -> Graph:
    """A broken pass: gives the last node an edge from a node that does not exist."""
    last = graph.nodes[-1]
    bad = replace(last, inputs=(*last.inputs, Edge(Role("from"), "ghost")))
    return graph.replace_nodes([*graph.nodes[:-1], bad])


def test_pipeline_verifies_after_each_pass() -> None:
    """A pass that breaks an invariant is caught right after it runs."""
    g = load_spec(ROOT / "specs" / "global_attention.yaml")
    with pytest.raises(GraphError, match="'ghost' is not a node"):
        Pipeline((Pass("dangle", _dangle),))(g)


def test_print_after_prints_the_ir_after_that_pass() -> None:
    """``with_print_after`` prints ``// IR after NAME`` and the dump, once per pass named."""
    printed: list[str] = []
    g = load_spec(ROOT / "specs" / "transformer_encoder.yaml")
    out = OPTIMIZE.with_print_after(["fuse_attention"], printed.append)(g)
    assert printed == [f"// IR after fuse_attention\n{out}"]
    assert "= attention(fused=" in printed[0]


def test_print_after_an_unknown_pass_suggests_names() -> None:
    """A name not in the pipeline fails with the pipeline's pass names."""
    with pytest.raises(RegistryError, match="unknown pass of this pipeline 'fuse_atention'"):
        OPTIMIZE.with_print_after(["fuse_atention"])


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_fused_graphs_infer_again_to_the_same_types(path: Path) -> None:
    """Shape inference on the fused graph gives every node the types fusion left."""
    fused = OPTIMIZE(load_spec(path))
    again = infer_shapes(fused.replace_nodes(
        [n if n.is_input else replace(n, types={}) for n in fused.nodes]))
    assert [dict(n.types) for n in again.nodes] == [dict(n.types) for n in fused.nodes]
    assert again.params == fused.params


def test_front_is_shape_inference() -> None:
    """The front end's passes are data: one shape inference."""
    assert [p.name for p in FRONT.passes] == ["infer_shapes"]


def test_cli_print_after(tmp_path: Path, cli) -> None:
    """``attngraph compile --print-after fuse_attention`` shows the fused IR."""
    r = cli("compile", ROOT / "specs" / "transformer_encoder.yaml",
            "--print-after", "fuse_attention", code=0)
    assert r.output.startswith("// IR after fuse_attention\ngraph transformer_encoder:")
    assert "= attention(fused=" in r.output
    r = cli("compile", ROOT / "specs" / "multihead_attention.yaml",
            "--print-after", "fuse", code=1)
    assert "unknown pass 'fuse'" in r.output
