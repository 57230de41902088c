"""The figures of one forward (``attngraph.analysis.sizes``): tensors, work, runs, modules."""

from __future__ import annotations

import pytest

from attngraph.analysis.sizes import ASSUMED_BATCH, ASSUMED_LENGTH, measure, symbols
from attngraph.frontend import loads_spec
from attngraph.ir.graph import Graph

HEAD = """attngraph: 1
name: t
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
"""

LAYER = """blocks:
  layer:
    inputs: [h]
    nodes:
      y: {kind: linear, from: h, out: d}
      z: {kind: linear, from: y, out: d}
    output: z
"""


def graph(body: str, head: str = HEAD) -> Graph:
    return loads_spec(head + body, "t.yaml", allow_large=True)


def test_defaults_are_the_assumed_batch_and_length() -> None:
    """Without sizes given, every length is ASSUMED_LENGTH and the batch ASSUMED_BATCH."""
    g = graph("nodes:\n  y: {kind: linear, from: x, out: 4}\noutputs: {y: y}\n")
    sz = measure(g)
    assert (sz.batch, dict(sz.lengths)) == (ASSUMED_BATCH, {"N": ASSUMED_LENGTH})
    assert symbols(g) == {"N"}


def test_a_linear_costs_its_weights_once_per_item() -> None:
    """A linear d -> 4 over N items: N·(d·4 + 4) multiply-adds plus its N·4 outputs."""
    g = graph("nodes:\n  y: {kind: linear, from: x, out: 4}\noutputs: {y: y}\n")
    sz = measure(g, batch=1, length=10)
    assert sz.macs.value == 10 * (8 * 4 + 4) + 10 * 4
    assert sz.tensor.value == 10 * 8  # the input [N, d] is the largest tensor
    assert sz.tensor.node is not None and sz.tensor.node.id == "x"


def test_additive_scores_over_all_pairs_count_their_hidden_sum() -> None:
    """The (B, M, N, hidden) tanh sum of an additive scorer is a tensor of its own."""
    g = graph("nodes:\n  s: {kind: scorer, fn: additive, query: x, key: x, hidden: 64}\n"
              "outputs: {s: s}\n")
    sz = measure(g, batch=2, length=10)
    assert sz.tensor.value == 2 * 10 * 10 * 64
    assert sz.tensor.node is not None and sz.tensor.node.id == "s"


def test_lengths_by_name_and_for_all() -> None:
    """A length may be given for every symbol or by name; others keep the assumption."""
    g = graph("nodes:\n  s: {kind: scorer, fn: dot, query: x, key: y}\noutputs: {s: s}\n",
              HEAD + "  y: {type: vectors, dim: d, length: M}\n")
    assert dict(measure(g, length=7).lengths) == {"N": 7, "M": 7}
    assert dict(measure(g, length={"M": 3}).lengths) == {"N": ASSUMED_LENGTH, "M": 3}
    sz = measure(g, batch=1, length={"N": 50, "M": 30})
    assert sz.tensor.value == 50 * 30
    assert sz.tensor.node is not None and sz.tensor.node.id == "s"


def test_loop_steps_multiply_runs_and_work() -> None:
    """A body run once per step: its runs and multiply-adds grow with the steps."""
    body = LAYER.replace("output: z", "outputs: {z: z}") + (
                    "nodes:\n  v: {kind: linear, from: x, out: d}\n"
                    "  r: {kind: readout, weights: w, values: x}\n"
                    "  sc: {kind: scorer, fn: dot, query: {learned: d}, key: x}\n"
                    "  w: {kind: softmax, scores: sc}\n"
                    "  l: {kind: loop, body: layer, steps: 50, carry: {h: {init: r, next: z}}}\n"
                    "outputs: {l: l}\n")
    g = graph(body)
    sz = measure(g, batch=1, length=4)
    assert sz.steps.value == 50 and sz.steps.node is not None and sz.steps.node.id == "l"
    # x, v, r, sc, w, l itself, and the body's two nodes once per step
    assert sz.runs.value == 6 + 2 * 50
    assert sz.runs.node is not None and sz.runs.node.id == "l"
    assert sz.modules.value == 5 + 2


def test_symbolic_steps_take_the_length() -> None:
    """steps: <input> runs as many steps as the input is long."""
    body = LAYER + ("nodes:\n  l: {kind: loop, body: layer, steps: t, feed: {h: {from: u}}}\n"
                    "outputs: {l: l}\n")
    g = graph(body, HEAD + "  t: {type: tokens, vocab: 5, length: T}\n"
              "  u: {type: vectors, dim: d, length: T}\n")
    assert measure(g, length={"T": 123}).steps.value == 123


@pytest.mark.parametrize(("share", "modules"), [(False, 2 + 2 * 10), (True, 2 + 2)])
def test_repeat_rounds_multiply_modules_unless_shared(share: bool, modules: int) -> None:
    """Each round of a repeat is its own module, unless the rounds share parameters;
    runs multiply either way."""
    share_s = "true" if share else "false"
    g = graph(LAYER + f"nodes:\n  r: {{kind: repeat, block: layer, times: 10, from: x, "
              f"share: {share_s}}}\noutputs: {{r: r}}\n")
    sz = measure(g)
    assert sz.modules.value == modules - 1  # the input is no module
    assert sz.runs.value == 2 + 2 * 10


def test_nested_repeats_multiply() -> None:
    """Rounds of a repeat inside a repeat's block multiply."""
    body = LAYER + ("  outer:\n    inputs: [h]\n    nodes:\n"
                    "      r: {kind: repeat, block: layer, times: 30, from: h}\n    output: r\n"
                    "nodes:\n  r: {kind: repeat, block: outer, times: 40, from: x}\n"
                    "outputs: {r: r}\n")
    sz = measure(graph(body))
    assert sz.modules.value == 1 + 40 * (1 + 30 * 2)


def test_a_learned_table_caps_the_assumed_length() -> None:
    """A learned position table of max_len rows: the guard assumes at most that length,
    and records the bound where it comes from."""
    g = graph("nodes:\n  p: {kind: position, from: x, dim: d, encoding: learned, max_len: 40}\n"
              "outputs: {p: p}\n")
    sz = measure(g)
    assert dict(sz.lengths) == {"N": 40}
    assert [(b.symbol, b.most, b.node.id, b.field) for b in sz.bounds] == [
        ("N", 40, "p", "max_len")]
    assert dict(measure(g, length=100).lengths) == {"N": 100}  # given: kept, for the guard


def test_glimpse_counts_its_largest_patch() -> None:
    """A glimpse samples every pixel of its largest scale before pooling it."""
    g = graph("nodes:\n  l: {kind: linear, from: h, out: 2}\n"
              "  g: {kind: glimpse, image: img, loc: l, size: 8, scales: 3}\noutputs: {g: g}\n",
              "attngraph: 1\nname: t\ninputs:\n  img: {type: image, channels: 3, height: 64, "
              "width: 64}\n  h: {type: vector, dim: 4}\n")
    sz = measure(g, batch=1)
    assert sz.tensor.value == 3 * 64 * 64  # the image itself
    node = g.node("g")
    assert node.types[""].dims == (3 * 3 * 8 * 8,)
    assert sz.macs.value >= 4 * 3 * (8**2 + 16**2 + 32**2)


@pytest.mark.parametrize(("fn", "macs"), [
    # W applies to the one query; each of the N scores costs d
    ("general", 8 * 8 + 10 * 8),
    # W q and U k: hidden per query and per key, hidden more per score (the tanh sum)
    ("additive", (8 * 8 + 8 * 8 + 8 + 8) * (1 + 10) + 10 * (8 + 8)),
])
def test_a_scorer_applies_its_parameters_where_it_does(fn: str, macs: int) -> None:
    """A general scorer's W multiplies each query once, not every key; an additive
    scorer's parameters are counted for queries and keys (within 2x of its work)."""
    g = graph(f"  h: {{type: vector, dim: d}}\nnodes:\n"
              f"  s: {{kind: scorer, fn: {fn}, query: h, key: x}}\noutputs: {{s: s}}\n")
    node = g.node("s")
    from attngraph.kinds import KINDS
    from attngraph.kinds.base import WorkCtx

    work = KINDS["scorer"].work
    assert work is not None
    assert work(WorkCtx(node, g, lambda sym: 10)).macs == macs


def test_a_memory_write_counts_the_tensors_it_keeps() -> None:
    """M ⊙ (1 - w eᵀ) + w aᵀ keeps four memory-sized tensors besides the new memory:
    with a write, a forward holds at least five memories' worth more than without
    (a million-slot memory estimated at a third of its real peak made the guard let
    through a 2 GB process)."""
    base = """attngraph: 1
name: m
inputs: {h: {type: vector, dim: 8}}
nodes:
  mem: {kind: memory, slots: 1000, width: 20, init: learned}
  e: {kind: linear, from: h, out: 20}
  k: {kind: scorer, fn: cosine, query: e, key: mem}
  w: {kind: softmax, scores: k}
"""
    without = measure(loads_spec(base + "outputs: {w: w}\n", "a.yaml"), batch=2)
    with_write = measure(loads_spec(
        base + "  m2: {kind: write, memory: mem, weights: w, erase: e, add: e}\n"
        "outputs: {w: w, m2: m2}\n", "b.yaml"), batch=2)
    assert with_write.held.value - without.held.value >= 5 * 2 * 1000 * 20
