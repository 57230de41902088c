"""The unrolled view reproduces the reference figures (shared/reference-figures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngraph.frontend import load_spec, loads_spec
from renderers import render, to_diagram

FIGURES = Path(__file__).resolve().parent.parent / "examples" / "figures"


def _per_item(*pairs: tuple[str, str]) -> set[tuple[str, str]]:
    """Expand ``{i}`` in an edge template over the drawn items 1, 2, N."""
    return {(a.format(i=i), b.format(i=i)) for a, b in pairs for i in ("1", "2", "N")}


# Written by hand from the PNGs in shared/reference-figures, in label form.
EXPECTED = {
    "simple-attention": _per_item(("x_{i}", "z"), ("p_{i}", "z")),
    "simple-attention-full": _per_item(
        ("x_{i}", "z"), ("p_{i}", "z"), ("x_{i}", "p_{i}"), ("context_{i}", "p_{i}")),
    "simple-attention-kvq-1": _per_item(
        ("query_{i}", "z"), ("p_{i}", "z"), ("query_{i}", "p_{i}"), ("key_{i}", "p_{i}")),
    "simple-attention-kvq-2": _per_item(
        ("value_{i}", "z"), ("p_{i}", "z"), ("query_{i}", "p_{i}"), ("key_{i}", "p_{i}")),
    "intra-attention": {
        ("query_1", "p_{1,1}"), ("query_1", "p_{1,2}"), ("query_1", "p_{1,N}"),
        ("key_1", "p_{1,1}"), ("key_2", "p_{1,2}"), ("key_N", "p_{1,N}"),
        ("p_{1,1}", "z_1"), ("p_{1,2}", "z_1"), ("p_{1,N}", "z_1"),
        ("value_1", "z_1"), ("value_2", "z_1"), ("value_N", "z_1"),
    },
}


def _json_edges(path: Path, **options: object) -> tuple[dict, set[tuple[str, str]]]:
    data = json.loads(render(load_spec(path), "unrolled", "json", **options))
    label = {n["id"]: n["label"] for n in data["nodes"]}
    return data, {(label[e["source"]], label[e["target"]]) for e in data["edges"]}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_figure_edges(name: str) -> None:
    """The json edges of each figure spec's unrolled view equal the figure's edges."""
    _, edges = _json_edges(FIGURES / f"{name}.yaml")
    assert edges == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_one_ellipsis_per_items_axis(name: str) -> None:
    """Each figure has exactly one ellipsis node, flagged ``ellipsis: true``, without edges."""
    data, _ = _json_edges(FIGURES / f"{name}.yaml")
    dots = [n for n in data["nodes"] if n["ellipsis"]]
    assert len(dots) == 1
    ends = {e["source"] for e in data["edges"]} | {e["target"] for e in data["edges"]}
    assert dots[0]["id"] not in ends


def test_items_option_draws_more_items() -> None:
    """``items=3`` draws x_1..x_3 then x_N; the edge count grows with the items drawn."""
    data, edges = _json_edges(FIGURES / "simple-attention.yaml", items=3)
    labels = {n["label"] for n in data["nodes"]}
    assert {"x_1", "x_2", "x_3", "x_N", "p_3"} <= labels
    assert len(edges) == 8


def test_query_option_picks_the_drawn_query() -> None:
    """``query=2`` draws the all-pairs weights p_{2,j} and z_2 for the second query."""
    _, edges = _json_edges(FIGURES / "intra-attention.yaml", query=2)
    assert ("query_2", "p_{2,N}") in edges
    assert ("p_{2,1}", "z_2") in edges
    assert not any("p_{1," in b for _, b in edges)


def test_rows_run_bottom_to_top() -> None:
    """Keys sit below the weights, which sit below the values, which sit below z."""
    dg = to_diagram(load_spec(FIGURES / "simple-attention-kvq-2.yaml"), "unrolled")
    rank = {n.label: n.rank for n in dg.nodes}
    assert dg.direction == "BT"
    assert rank["key_1"] < rank["p_1"] < rank["value_1"] < rank["z"]
    assert rank["query_1"] > rank["p_1"]


DETACH = """
attngraph: 1
name: detached
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
nodes:
  s: {kind: scorer, fn: mlp, key: {ref: x, detach: true}}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
outputs: {z: z}
"""


def test_detached_edges_are_dashed() -> None:
    """A detached reference draws dashed edges (through the folded scorer), others solid."""
    data = json.loads(render(loads_spec(DETACH), "unrolled", "json"))
    label = {n["id"]: n["label"] for n in data["nodes"]}
    dashed = {(label[e["source"]], label[e["target"]]) for e in data["edges"] if e["dashed"]}
    assert dashed == {("x_1", "p_1"), ("x_2", "p_2"), ("x_N", "p_N")}
    assert "dashed" in render(loads_spec(DETACH), "unrolled", "dot")


REPEAT = """
attngraph: 1
name: stack
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
blocks:
  layer:
    inputs: [h]
    nodes:
      a: {kind: linear, from: h, out: d}
    output: a
nodes:
  enc: {kind: repeat, block: layer, times: 6, from: x, label: layer}
  s: {kind: scorer, fn: mlp, key: enc}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: enc}
outputs: {z: z}
"""


def test_repeat_draws_layers_with_vertical_ellipsis() -> None:
    """A repeat of 6 draws layer 1, layer 2, a vertical ellipsis, layer 6, chained upward."""
    dg = to_diagram(loads_spec(REPEAT), "unrolled")
    edges = dg.edge_labels()
    assert {("layer 1", "layer 2"), ("layer 2", "⋮"), ("⋮", "layer 6")} <= edges
    assert ("x_1", "layer 1") in edges and ("layer 6", "p_N") in edges
    assert [n.label for n in dg.nodes if n.ellipsis].count("⋮") == 1


SPECS = Path(__file__).resolve().parent.parent / "specs"


def _spec_edges(name: str) -> tuple[list[str], set[tuple[str, str]]]:
    data, edges = _json_edges(SPECS / f"{name}.yaml")
    return [n["label"] for n in data["nodes"]], edges


def test_a_loop_fed_one_item_per_step_is_drawn_per_item() -> None:
    """The NTM loop reads x_t at step t: its steps are drawn ntm_1, ntm_2, ntm_T under
    x_1, x_2, x_T, each reading its own item; M_0 is read by the first step only; the
    four carries run on one labelled edge."""
    labels, edges = _spec_edges("memory_network")
    assert {"ntm_1", "ntm_2", "ntm_T"} <= set(labels)
    into = {(a, b) for a, b in edges if b.startswith("ntm_")}
    assert into == {("x_1", "ntm_1"), ("x_2", "ntm_2"), ("x_T", "ntm_T"),
                    ("M_0", "ntm_1"), ("ntm_1", "ntm_2")}


def test_a_decoder_reads_the_previous_target_token() -> None:
    """With feedback (teacher forcing), step t reads y_{t-1}: y_1 feeds dec_2 and no
    target token feeds dec_1; every step reads every encoder state."""
    _, edges = _spec_edges("bahdanau_translation")
    fed = {(a, b) for a, b in edges if a.startswith("y_") and b.startswith("dec_")}
    assert fed == {("y_1", "dec_2")}
    for h in ("h_1", "h_2", "h_N"):
        assert {(h, f"dec_{t}") for t in ("1", "2", "T")} <= edges


def test_nodes_read_only_for_their_count_are_not_drawn() -> None:
    """glimpse_hard cuts the canvas into tiles only so that position codes can count
    them: the tiles are not drawn; the glimpse loop's two carries share one edge."""
    labels, edges = _spec_edges("glimpse_hard")
    assert "tiles" not in labels
    assert ("ram_{t-1}", "ram_t") in edges and ("ram_t", "ram_{t+1}") in edges


def test_a_bidirectional_encoder_runs_both_ways() -> None:
    """Bahdanau's bidirectional encoder: h_1 feeds h_2 and h_2 feeds h_1; Luong local-p's
    forward encoder only h̄_1 -> h̄_2."""
    _, edges = _spec_edges("bahdanau_translation")
    assert {("h_1", "h_2"), ("h_2", "h_1")} <= edges
    labels, edges = _spec_edges("luong_local_p")
    chain = {(a, b) for a, b in edges if a.startswith("h̄_") and b.startswith("h̄_")}
    assert chain == {("h̄_1", "h̄_2")}, (labels, chain)
