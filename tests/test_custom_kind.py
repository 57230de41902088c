"""A kind defined in one module (examples/05_custom_kind.py) reaches every stage.

The ``scale`` kind (y = c·x) is registered by importing the example; nothing in
attngraph names it. It must validate (with located errors from its own model and
shape rule), draw in both views with its own style, be traced through by
``describe``, be listed in the JSON Schema, and compile to the right numbers.
"""

from __future__ import annotations

import runpy
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import attngraph
from attngraph.errors import ShapeError, SpecError
from attngraph.kinds import KINDS, SCORERS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def example() -> Iterator[dict[str, Any]]:
    """The example module's namespace, its kind registered for this test only."""
    with KINDS.scoped(), SCORERS.scoped():
        yield runpy.run_path(str(ROOT / "examples" / "05_custom_kind.py"), run_name="example")
    assert "scale" not in KINDS


def test_validates_with_its_shape(example: dict[str, Any], cli) -> None:
    """The scaled node has its input's type; ``attngraph validate`` lists it."""


    g = attngraph.loads_spec(example["SPEC"])
    assert g.node("xs").kind == "scale"
    assert str(g.node("xs").type()) == "[N, 8]"
    assert "%xs = scale(by=0.5, from=%x) : [N, 8]" in str(g)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.yaml"
        path.write_text(example["SPEC"])
        r = cli("validate", path)
    assert r.exit_code == 0, r.output
    assert "scale" in r.output


def test_its_model_locates_unknown_fields(example: dict[str, Any]) -> None:
    """An unknown field of the new kind is refused at its line, with a did-you-mean."""
    bad = example["SPEC"].replace("by: 0.5", "bye: 0.5")
    with pytest.raises(SpecError) as info:
        attngraph.loads_spec(bad, "s.yaml")
    d = info.value.diagnostics[0]
    assert (d.loc.line, d.loc.col, d.message) == (8, 30, "node 'xs': unknown field 'bye'")
    assert d.hint == "did you mean 'by'?"


def test_its_shape_rule_locates_errors(example: dict[str, Any]) -> None:
    """The kind's own shape rule fails at the edge it names, with its hint."""
    spec = """\
attngraph: 1
name: bad
inputs:
  t: {type: tokens, vocab: 10}
nodes:
  xs: {kind: scale, from: t}
outputs: {xs: xs}
"""
    with pytest.raises(ShapeError) as info:
        attngraph.loads_spec(spec, "bad.yaml")
    d = info.value.diagnostics[0]
    assert (d.loc.line, d.loc.col) == (6, 27)
    assert "scale multiplies float features" in d.message
    assert d.hint == "embed token ids first (items with embed:)"


def test_draws_in_both_views_with_its_style(example: dict[str, Any]) -> None:
    """Architecture view: one box of the kind's fill; unrolled: one circle per item."""
    import json

    from renderers import render, to_diagram

    g = attngraph.loads_spec(example["SPEC"])
    node = to_diagram(g, "architecture").node("xs")
    assert (node.kind, node.fill, node.shape) == ("scale", "#e6e6fa", "box")
    assert 'n2["xs<br/><small>scale</small>"]' in render(g, "architecture", "mermaid")
    # the scaled items are read as queries only, so drawn at the drawn query, x_1 -> xs_1
    unrolled = to_diagram(g, "unrolled")
    assert ("x_1", "xs_1") in unrolled.edge_labels()
    assert ("xs_1", "p_{1,2}") in unrolled.edge_labels()
    assert unrolled.node("xs[1]").kind == "scale"
    assert json.loads(render(g, "unrolled", "json"))["nodes"]


def test_describe_traces_through_it(example: dict[str, Any]) -> None:
    """A transparent kind: the query still originates at the items (self-attention)."""
    from attngraph.analysis.describe import describe

    site = describe(attngraph.loads_spec(example["SPEC"])).sites[0]
    assert site.axes["source"].value == "self"
    assert [o.qid for o in site.query] == ["x"]


def test_in_the_json_schema(example: dict[str, Any]) -> None:
    """Editors complete the new kind: the schema's node union has it."""
    from attngraph.kinds.schema import json_schema

    kinds = {d["properties"]["kind"]["const"] for d in json_schema()["$defs"].values()
             if "const" in d.get("properties", {}).get("kind", {})}
    assert "scale" in kinds


def test_compiles_to_the_reference(example: dict[str, Any]) -> None:
    """Outputs equal softmax((x/2)·xᵀ) x computed by hand, to 1e-6."""
    import torch

    out = example["main"]()["outputs"]
    g = attngraph.loads_spec(example["SPEC"])
    model = attngraph.compile(g, seed=0).eval()
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(1))
    got = model(src=x)
    p = torch.softmax((0.5 * x) @ x.transpose(1, 2), -1)
    assert torch.allclose(got["p"], p, atol=1e-6)
    assert torch.allclose(got["z"], p @ x, atol=1e-6)
    assert tuple(out["z"].shape) == (2, 5, 8)


def test_a_taken_name_is_refused(example: dict[str, Any]) -> None:
    """Registering a second ``scale`` kind fails instead of replacing the first."""
    from attngraph.errors import RegistryError

    with pytest.raises(RegistryError, match="node kind 'scale' is registered already"):
        example["kind"]("scale", example["ScaleSpec"])(example["scale_shape"].shape)


def test_a_model_without_the_kind_tag_is_refused() -> None:
    """A kind whose model does not carry ``kind: Literal[name]`` fails at registration."""
    from typing import Literal

    from attngraph.errors import RegistryError
    from attngraph.kinds import kind
    from attngraph.spec.models import NodeModel

    class Other(NodeModel):
        kind: Literal["other"]

    with KINDS.scoped(), pytest.raises(RegistryError, match="does not say kind: Literal"):
        kind("mine", Other)
    assert "mine" not in KINDS
