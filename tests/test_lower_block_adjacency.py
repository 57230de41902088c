"""Graph attention inside a block: the adjacency bound to a block input masks the softmax."""

from __future__ import annotations

import torch

import attngraph
from attngraph.frontend import loads_spec

SPEC = """attngraph: 1
name: gat_block
dims: {d: 8}
inputs:
  g: {type: graph, dim: d}
blocks:
  gat:
    inputs: [h, adj]
    nodes:
      s: {kind: scorer, fn: dot, query: h, key: h}
      a: {kind: softmax, scores: s, mask: {adjacency: adj}}
      z: {kind: readout, weights: a, values: h}
    outputs: {z: z, a: a}
nodes:
  h0: {kind: items, from: g}
  r1: {kind: block, block: gat, from: {h: h0, adj: g.adjacency}}
outputs: {h: r1.z, attention: r1.a}
"""


def test_block_adjacency_masks_non_neighbours() -> None:
    """Weights are zero exactly where the adjacency (with self-loops) is false."""
    model = attngraph.compile(loads_spec(SPEC, "t.yaml"), seed=0)
    torch.manual_seed(0)
    n = 6
    adj = torch.rand(2, n, n) > 0.6
    adj = adj | adj.transpose(1, 2)
    out = model(g=torch.randn(2, n, 8), g_adjacency=adj)
    w = out["attention"]
    allowed = adj | torch.eye(n, dtype=torch.bool)
    assert torch.all(w[~allowed] == 0)
    assert torch.allclose(w.sum(-1), torch.ones(2, n))
