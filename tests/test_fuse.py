"""The attention fusion pass: its rewrite of the IR and its numerical equivalence."""

from __future__ import annotations

import pytest

import attngraph
from attngraph.passes.fuse_attention import fuse_attention

SPEC = """
attngraph: 1
name: fusable
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q: {kind: queries, from: x, dim: d, heads: 2}
  k: {kind: keys, from: x, dim: d, heads: 2}
  v: {kind: values, from: x, dim: d, heads: 2}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s, mask: {causal: true}, temperature: 2.0}
  z: {kind: readout, weights: p, values: v, out: d}
outputs: {z: z}
"""

BEFORE = """\
graph fusable:
  %x = input(type=vectors, dim=8, length=N) : [N, 8]; mask: bool[N]  @6:6
  %q = queries(dim=8, heads=2, from=%x) : [N, 4] ×2  @8:6
  %k = keys(dim=8, heads=2, from=%x) : [N, 4] ×2  @9:6
  %v = values(dim=8, heads=2, from=%x) : [N, 4] ×2  @10:6
  %s = scorer(fn=scaled_dot, query=%q, key=%k) : [N, N] ×2  @11:6
  %p = softmax(mask={'causal': True}, temperature=2.0, scores=%s) : [N, N] ×2  @12:6
  %z = readout(out=8, weights=%p, values=%v) : [N, 8]  @13:6
  return z=%z"""

AFTER = """\
graph fusable:
  %x = input(type=vectors, dim=8, length=N) : [N, 8]; mask: bool[N]  @6:6
  %q = queries(dim=8, heads=2, from=%x) : [N, 4] ×2  @8:6
  %k = keys(dim=8, heads=2, from=%x) : [N, 4] ×2  @9:6
  %v = values(dim=8, heads=2, from=%x) : [N, 4] ×2  @10:6
  %z = attention(fused=s+p+z, mask={'causal': True}, temperature=2.0, out=8, \
query=%q, key=%k, values=%v) : [N, 8]  @13:6
  return z=%z"""


def test_fusion_rewrites_the_ir_golden() -> None:
    """scorer -> softmax -> readout with unobserved weights becomes one attention node."""
    g = attngraph.loads_spec(SPEC)
    assert str(g) == BEFORE
    assert str(fuse_attention(g)) == AFTER


def test_requested_weights_block_fusion() -> None:
    """When the weights are a declared output, the explicit chain stays."""
    g = attngraph.loads_spec(SPEC.replace("outputs: {z: z}", "outputs: {z: z, p: p}"))
    assert fuse_attention(g) is g


@pytest.mark.parametrize("change", [
    ("fn: scaled_dot", "fn: cosine"),
    ("temperature: 2.0", "fn: sparsemax"),
    ("nodes:\n", "nodes:\n  p2: {kind: dropout, from: p}\n"),
])
def test_only_the_exact_pattern_fuses(change: tuple[str, str]) -> None:
    """Another scorer fn, sparsemax, or a second use of the weights prevents fusion."""
    g = attngraph.loads_spec(SPEC.replace(*change))
    assert all(n.kind != "attention" for n in fuse_attention(g).nodes)


def test_fusion_reaches_block_bodies() -> None:
    """The pass rewrites the bodies of repeated blocks too."""
    g = attngraph.load_spec("specs/transformer_encoder.yaml")
    kinds = [n.kind for _, n in fuse_attention(g).walk()]
    assert "attention" in kinds and "softmax" not in kinds


CASES = [  # (softmax mask, single query vector): causal and window need all pairs
    ("{causal: true}", False),
    ("{window: 1}", False),
    ("{causal: true, window: 2}", False),
    (None, False),
    (None, True),
]


@pytest.mark.parametrize("fn", ["scaled_dot", "dot"])
@pytest.mark.parametrize(("mask", "vector_query"), CASES)
def test_fused_equals_explicit(mask: str | None, vector_query: bool, fn: str) -> None:
    """Fused SDPA and the explicit path give the same numbers and gradients, with
    padding (including a fully padded row), causal and window masks, for q·k/√d and
    for the unscaled q·k (T5's scores)."""
    torch = pytest.importorskip("torch")
    spec = SPEC.replace("temperature: 2.0", "temperature: 0.5").replace("fn: scaled_dot",
                                                                      f"fn: {fn}")
    spec = spec.replace("{causal: true}", mask) if mask else spec.replace(
        "mask: {causal: true}, ", "")
    if vector_query:
        spec = spec.replace("  x: {type: vectors, dim: d}",
                            "  x: {type: vectors, dim: d}\n  c: {type: vector, dim: d}")
        spec = spec.replace("queries, from: x", "queries, from: c")
    fused = attngraph.compile(spec, seed=3)
    plain = attngraph.compile(spec, seed=3, fuse=False)
    assert any(n.kind == "attention" for n in fused.graph.nodes)
    x = torch.randn(3, 5, 8)
    m = torch.tensor([[True] * 5, [True, True, True, False, False], [False] * 5])
    kw = {"x": x, "x_mask": m}
    if vector_query:
        kw["c"] = torch.randn(3, 8)
    a, b = fused(**kw)["z"], plain(**kw)["z"]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    a.sum().backward()
    b.sum().backward()
    pairs = zip(fused.named_parameters(), plain.named_parameters(), strict=True)
    for (name, p1), (_, p2) in pairs:
        torch.testing.assert_close(p1.grad, p2.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_fused_equals_explicit_with_adjacency() -> None:
    """Graph attention through the fused kernel equals the explicit path."""
    torch = pytest.importorskip("torch")
    spec = SPEC.replace("{type: vectors, dim: d}", "{type: graph, dim: d}").replace(
        "{causal: true}", "{adjacency: x, self_loops: false}")
    fused = attngraph.compile(spec, seed=0)
    plain = attngraph.compile(spec, seed=0, fuse=False)
    x = torch.randn(2, 5, 8)
    adj = torch.rand(2, 5, 5) > 0.5
    adj[0, 2] = False  # a node without neighbours: a fully masked row
    a = fused(x=x, x_adjacency=adj)["z"]
    b = plain(x=x, x_adjacency=adj)["z"]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert torch.isfinite(a).all()
