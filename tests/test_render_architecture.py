"""The architecture view: one node per spec node, typed edges, structure, legend."""

from __future__ import annotations

import json

from attngraph.frontend import loads_spec
from renderers import render, to_diagram

SPEC = """
attngraph: 1
name: arch
dims: {d: 32}
inputs:
  x: {type: vectors, dim: d}
blocks:
  layer:
    inputs: [h]
    nodes:
      q: {kind: queries, from: h, heads: 4}
      k: {kind: keys, from: h, heads: 4}
      v: {kind: values, from: h, heads: 4}
      s: {kind: scorer, fn: scaled_dot, query: q, key: k}
      p: {kind: softmax, scores: s, mask: {causal: true}}
      a: {kind: readout, weights: p, values: v}
      r: {kind: add, from: [h, a]}
    output: r
nodes:
  enc: {kind: repeat, block: layer, times: 3, from: x}
  pick: {kind: scorer, fn: mlp, key: {ref: enc, detach: true}}
  act: {kind: policy, scores: pick}
  z: {kind: readout, weights: act, values: enc}
outputs: {z: z}
"""


def _data(**options: object) -> dict:
    return json.loads(render(loads_spec(SPEC), "architecture", "json", **options))


def test_one_node_per_spec_node_and_repeat_marked() -> None:
    """Top-level nodes are drawn once each; the collapsed repeat is labelled ×K."""
    data = _data()
    ids = {n["id"] for n in data["nodes"]}
    assert {"x", "enc", "pick", "act", "z"} <= ids
    assert next(n for n in data["nodes"] if n["id"] == "enc")["label"] == "enc ×3"
    assert not any(i.startswith("enc#") for i in ids)


def test_edges_carry_inferred_shapes_and_dashes() -> None:
    """Edge labels are the source's inferred type; the detached edge is dashed."""
    data = _data()
    edge = {(e["source"], e["target"]): e for e in data["edges"]}
    assert edge[("x", "enc")]["label"] == "[N, 32]"
    assert edge[("enc", "pick")]["dashed"] is True
    assert edge[("pick", "act")]["dashed"] is False


def test_expanded_repeat_has_a_cluster_per_round_with_heads() -> None:
    """expand_repeats draws K clusters; per-head edges are labelled ``×h``."""
    data = _data(expand_repeats=True)
    clusters = [c["id"] for c in data["graph"]["clusters"]]
    assert clusters == ["enc#1", "enc#2", "enc#3"]
    labels = {e.get("label", "") for e in data["edges"]}
    assert "[N, 8] ×4" in labels
    assert ("enc#1/r", "enc#2/h") in {(e["source"], e["target"]) for e in data["edges"]}


def test_policy_and_mask_are_distinct() -> None:
    """A policy has its own shape and colour; a softmax mask is its own node."""
    dg = to_diagram(loads_spec(SPEC), "architecture", expand_repeats=True)
    shapes = {n.kind: (n.shape, n.fill) for n in dg.nodes}
    assert shapes["policy"] != shapes["scorer"] and shapes["policy"] != shapes["readout"]
    masks = [n for n in dg.nodes if n.kind == "mask"]
    assert len(masks) == 3 and masks[0].label == "mask: causal"
    assert {k for k, _, _ in dg.legend} >= {"policy", "mask", "scorer"}


def test_dot_text_has_legend_and_clusters() -> None:
    """The DOT text holds the legend cluster and one cluster per expanded round."""
    text = render(loads_spec(SPEC), "architecture", "dot", expand_repeats=True)
    assert "subgraph cluster_legend" in text
    assert text.count('subgraph "cluster_enc#') == 3
