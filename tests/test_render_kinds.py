"""The views read each kind's traits: a user's kind draws in its style and like its role.

The kinds here are registered the way a user's package registers one (with
:func:`attngraph.kinds.kind`, outside attngraph), inside ``KINDS.scoped()``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Literal

import pytest

from attngraph.frontend import loads_spec
from attngraph.ir.graph import TensorType
from attngraph.kinds import KINDS, RuleCtx, Style, kind
from attngraph.spec.models import NodeModel, Ref
from renderers import render, to_diagram

SPARSEMAX = Style("#abcdef", "hexagon")
COMPARE = Style("#123456", "diamond")


class SparsemaxSpec(NodeModel):
    kind: Literal["sparsemax"]
    scores: Ref


class CompareSpec(NodeModel):
    kind: Literal["compare"]
    query: Ref
    key: Ref


def _sparsemax(ctx: RuleCtx) -> dict[str, TensorType]:
    """Sparse weights of the scores' shape, summing to one over items."""
    return {"": replace(ctx.t("scores"), simplex=True)}


def _compare(ctx: RuleCtx) -> dict[str, TensorType]:
    """Scores of every query against every key: [M, N]."""
    q, k = ctx.t("query"), ctx.t("key")
    return {"": TensorType((q.dims[0], k.dims[0]))}


@pytest.fixture
def user_kinds() -> Iterator[None]:
    """A weights kind and a scorer kind, registered for one test only."""
    with KINDS.scoped():
        kind("sparsemax", SparsemaxSpec, role="weights", style=SPARSEMAX)(_sparsemax)
        kind("compare", CompareSpec, role="scorer", style=COMPARE)(_compare)
        yield
    assert "sparsemax" not in KINDS and "compare" not in KINDS


SPEC = """
attngraph: 1
name: self
dims: {d: 16}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q: {kind: queries, from: x}
  k: {kind: keys, from: x}
  s: {kind: SCORER, query: q, key: k}
  p: {kind: WEIGHTS, scores: s, label: p}
  z: {kind: readout, weights: p, values: x}
outputs: {z: z}
"""
BUILT_IN = SPEC.replace("SCORER", "scorer, fn: dot").replace("WEIGHTS", "softmax")
USER = SPEC.replace("SCORER", "compare").replace("WEIGHTS", "sparsemax")


def _dot(text: str, view: str) -> str:
    out = render(loads_spec(text), view, "dot")
    assert isinstance(out, str)
    return out


def test_user_kinds_draw_in_their_style_in_the_architecture_view(user_kinds: None) -> None:
    """Each user kind's box has its registered fill and shape, and joins the legend."""
    dg = to_diagram(loads_spec(USER), "architecture")
    drawn = {n.kind: (n.fill, n.shape) for n in dg.nodes}
    assert drawn["sparsemax"] == (SPARSEMAX.fill, SPARSEMAX.shape)
    assert drawn["compare"] == (COMPARE.fill, COMPARE.shape)
    legend = {k: (fill, shape) for k, fill, shape in dg.legend}
    assert legend["sparsemax"] == (SPARSEMAX.fill, SPARSEMAX.shape)
    assert legend["compare"] == (COMPARE.fill, COMPARE.shape)
    text = _dot(USER, "architecture")
    assert f'fillcolor="{SPARSEMAX.fill}"' in text and "shape=hexagon" in text


def test_built_in_styles_are_the_kinds_styles() -> None:
    """Every built-in box is drawn in the style its kind registers."""
    dg = to_diagram(loads_spec(BUILT_IN), "architecture")
    for n in dg.nodes:
        if n.kind in KINDS:
            assert (n.fill, n.shape) == (KINDS[n.kind].style.fill, KINDS[n.kind].style.shape)
    assert {n.kind for n in dg.nodes} >= {"input", "queries", "scorer", "softmax", "readout"}


def test_user_kinds_draw_like_their_roles_in_the_unrolled_view(user_kinds: None) -> None:
    """A scorer kind folds into a weights kind, drawn as p_{1,j}, exactly like the built-ins."""
    user = to_diagram(loads_spec(USER), "unrolled")
    built_in = to_diagram(loads_spec(BUILT_IN), "unrolled")
    assert user.edge_labels() == built_in.edge_labels()
    assert ("q_1", "p_{1,N}") in user.edge_labels()
    assert not any(n.kind == "compare" for n in user.nodes)  # folded into the weights
    assert [n.label for n in user.nodes if n.kind == "sparsemax"] == [
        "p_{1,1}", "p_{1,2}", "p_{1,N}"]
    ranks = {n.label: n.rank for n in user.nodes}
    assert ranks == {n.label: n.rank for n in built_in.nodes}
    data = json.loads(render(loads_spec(USER), "unrolled", "json"))
    assert sum(n["ellipsis"] for n in data["nodes"]) == 1


def test_describe_reads_the_roles(user_kinds: None) -> None:
    """describe finds the site a user's scorer and weights kinds form, with their names."""
    from attngraph.analysis.describe import describe

    site = describe(loads_spec(USER)).sites[0]
    assert site.chain == ("s", "p", "z")
    assert site.fn == "compare"
    assert site.formula == "Scores of every query against every key: [M, N]."
    assert site.axes["hardness"].value == "soft"
    assert site.axes["basis"].value == "content"
    assert site.axes["source"].value == "self"
