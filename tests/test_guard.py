"""The resource guard: every limit refuses with its figure, located, unless allow_large;
the catalog and the docs' examples pass with room to spare."""

from __future__ import annotations

from pathlib import Path

import pytest

from attngraph import guard
from attngraph.analysis.sizes import ASSUMED_BATCH, ASSUMED_LENGTH
from attngraph.errors import SpecError
from attngraph.frontend import load_spec, loads_spec
from attngraph.guard import check_resources
from fuzz.seeds import seeds

ROOT = Path(__file__).resolve().parent.parent
LARGE = "or pass --allow-large (allow_large=True) if you mean it"

HEAD = """attngraph: 1
name: t
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
"""

GLIMPSE_LOOP = """attngraph: 1
name: glimpse_loop
inputs:
  img: {type: image, height: 28, width: 28}
blocks:
  look:
    inputs: [h, image]
    nodes:
      where: {kind: linear, from: h, out: 2, act: tanh}
      loc:   {kind: policy, mean: {ref: where, detach: true}, dist: gaussian}
      g:     {kind: glimpse, image: image, loc: loc, size: 8, scales: 2}
      gv:    {kind: linear, from: g, out: 64, act: relu}
      h2:    {kind: rnn, from: gv, hidden: 64, init: h}
    outputs: {h: h2, log_prob: loc.log_prob}
nodes:
  run:    {kind: loop, body: look, steps: STEPS, inputs: {image: img},
           carry: {h: {zeros: 64, next: h}}}
  logits: {kind: linear, from: run.final_h, out: 10}
outputs: {logits: logits, log_probs: run.log_prob}
"""


def refused(text: str, **kw: object) -> list[tuple[str, int, int, str | None]]:
    """(message, line, col, hint) of each diagnostic of the guard's refusal."""
    with pytest.raises(SpecError) as info:
        loads_spec(text, "t.yaml", **kw)  # type: ignore[arg-type]
    return [(d.message, d.loc.line, d.loc.col, d.hint) for d in info.value.diagnostics]


def test_a_loop_of_a_million_steps_is_refused_at_its_steps() -> None:
    """A loop of 1,000,000 steps (forward over 10 s) is refused at its steps field, with
    the figure; the runs it implies are not reported a second time."""
    text = GLIMPSE_LOOP.replace("STEPS", "1000000")
    got = refused(text)
    assert got[0] == ("node 'run': a loop of 1,000,000 steps, over the limit of 10,000", 16, 43,
                      f"each step runs the body once, node by node: use fewer steps, {LARGE}")
    assert not any("one after another" in m for m, *_ in got)
    assert loads_spec(text, "t.yaml", allow_large=True).node("run").types[""].dims[0] == 1000000


def test_a_loop_within_the_limits_passes() -> None:
    """The same loop at 6 steps (the docs' example) is accepted."""
    loads_spec(GLIMPSE_LOOP.replace("STEPS", "6"), "t.yaml")


def test_symbolic_steps_are_counted_at_the_length_given() -> None:
    """steps: <input> takes the length a command says it will use."""
    text = ("attngraph: 1\nname: t\ninputs:\n  t: {type: tokens, vocab: 5, length: T}\n"
            "blocks:\n  b:\n    inputs: [y]\n    nodes:\n"
            "      e: {kind: embedding, from: y, dim: 4, vocab: 5}\n    outputs: {e: e}\n"
            "nodes:\n  l: {kind: loop, body: b, steps: t, feed: {y: {from: t}}}\n"
            "outputs: {l: l}\n")
    loads_spec(text, "t.yaml")
    got = refused(text, length=20_000)
    assert got[0][:3] == ("node 'l': a loop of 20,000 steps (T = 20,000), over the limit of "
                          "10,000", 12, 35)


def test_two_mlps_on_a_million_features_are_refused_for_their_parameters() -> None:
    """A vectors input of dim 1,000,000 feeding two mlps (compile over 10 s): the
    parameter count is refused at the node with the most."""
    text = HEAD.replace("dim: d", "dim: 1000000") + (
        "nodes:\n  a: {kind: mlp, from: x, hidden: 64, out: 4}\n"
        "  b: {kind: mlp, from: x, hidden: 64, out: 4}\noutputs: {a: a, b: b}\n")
    got = refused(text)
    assert got[0] == ("spec would have 128,000,648 parameters, over the limit of 100,000,000 "
                      "(node 'a' has 64,000,324)", 7, 6, f"shrink dims, {LARGE}")


def test_an_additive_scorer_over_all_pairs_with_a_big_hidden_is_refused() -> None:
    """The (B, M, N, hidden) sum that asked the allocator for more than the machine has
    is counted, and refused at the scorer with its size and the lengths assumed."""
    text = HEAD + ("nodes:\n  s: {kind: scorer, fn: additive, query: x, key: x, hidden: 4096}\n"
                   "outputs: {s: s}\n")
    got = refused(text)
    assert got[0] == (
        "node 's' would make a tensor of 8,589,934,592 elements (34.4 GB of float32) at "
        "batch 32, N = 256, over the limit of 500,000,000", 7, 6,
        f"shrink the sizes it multiplies (hidden, heads, lengths), {LARGE}")
    # at the sizes a command says it will use, it fits
    loads_spec(text, "t.yaml", batch=2, length=5)


def test_a_huge_image_input_is_refused_as_an_input() -> None:
    """An input too large to hold is named as an input."""
    text = ("attngraph: 1\nname: t\ninputs:\n  img: {type: image, channels: 3, height: 100000, "
            "width: 100000}\nnodes:\n  x: {kind: items, from: img, patches: [1000, 1000]}\n"
            "outputs: {x: x}\n")
    got = refused(text)
    assert any(m.startswith("input 'img' is a tensor of 960,000,000,000 elements")
               and (line, col) == (4, 8) for m, line, col, _ in got), got


def test_the_work_of_a_forward_is_refused_with_the_node_that_costs_most() -> None:
    """Multiply-adds over the limit: the figure, the limit and the costliest node."""
    text = HEAD + ("blocks:\n  layer:\n    inputs: [h]\n    nodes:\n"
                   "      y: {kind: linear, from: h, out: 2000}\n    output: y\n"
                   "nodes:\n  a: {kind: linear, from: x, out: 2000}\n"
                   "  r: {kind: repeat, block: layer, times: 60, from: a, share: true}\n"
                   "outputs: {r: r}\n")
    got = refused(text)
    assert got[0][0] == (
        "one forward at batch 32, N = 256 would take about 1,968,209,920,000 multiply-adds, "
        "over the limit of 1,000,000,000,000 (node 'y' costs the most)"), got
    assert got[0][1:3] == (10, 10)


def test_all_tensors_of_a_forward_are_counted_together() -> None:
    """Many tensors each under the tensor limit, too many together: refused."""
    nodes = "".join(f"  a{i}: {{kind: linear, from: x, out: 10000}}\n" for i in range(40))
    got = refused(HEAD + "nodes:\n" + nodes + "outputs: {a: a0}\n")
    assert got[0][0].startswith("one forward at batch 32, N = 256 would make 3,276,873,728 ")
    assert "kept for the backward pass), over the limit of 2,000,000,000" in got[0][0]


def test_nested_repeats_are_refused_for_their_modules() -> None:
    """Repeats inside repeats multiply: the modules compiling would build are counted
    and refused at the outer repeat."""
    text = HEAD + ("blocks:\n  layer:\n    inputs: [h]\n    nodes:\n"
                   "      y: {kind: linear, from: h, out: d}\n    output: y\n"
                   "  outer:\n    inputs: [h]\n    nodes:\n"
                   "      r: {kind: repeat, block: layer, times: 1024, from: h}\n"
                   "    output: r\n"
                   "nodes:\n  r: {kind: repeat, block: outer, times: 1024, from: x}\n"
                   "outputs: {r: r}\n")
    got = refused(text)
    msgs = {m: (line, col) for m, line, col, _ in got}
    # the outer repeat, and in each of its 1,024 rounds the inner one and its 1,024 rounds
    mod = ("compiling would build 1,049,601 node modules (each round of a repeat has its "
           "own), over the limit of 20,000")
    assert msgs[mod] == (18, 6)
    runs = [m for m in msgs if "one after another" in m]
    assert runs == ["one forward at batch 32, N = 256 would run 1,049,602 nodes one after "
                    "another (loop steps and repeat rounds multiply), over the limit of "
                    "50,000"]
    shared = text.replace("times: 1024, from: x}", "times: 1024, from: x, share: true}") \
        .replace("times: 1024, from: h}", "times: 1024, from: h, share: true}")
    assert [m for m, *_ in refused(shared) if "modules" in m] == []


def test_a_length_over_a_learned_table_is_refused_at_max_len() -> None:
    """A learned position table of max_len rows refuses a longer length passed by a
    command (a fixed length over it is a shape error, see test_shapes)."""
    text = HEAD + ("nodes:\n  p: {kind: position, from: x, dim: d, encoding: learned, "
                   "max_len: 64}\noutputs: {p: p}\n")
    loads_spec(text, "t.yaml")
    loads_spec(text, "t.yaml", length=64)
    got = refused(text, length=100)
    assert got[0] == ("node 'p': its learned table covers max_len 64 positions, but the "
                      "length N is 100 here", 7, 68,
                      "raise max_len to at least 100, or use a length of at most 64")
    assert refused(text, length={"N": 65})[0][0].endswith("the length N is 65 here")


def test_a_fixed_position_past_the_length_is_refused_at_the_formula() -> None:
    """A formula that reads item 9 of the items (take at a number) refuses a length a
    command passes with no item 9; any length is accepted when none is given (the
    batch decides, and the forward names the node), and so is a length that has it."""
    text = HEAD + ("blocks:\n  b:\n    inputs: [h]\n    nodes:\n"
                   "      y: {kind: expr, formula: \"take(h, 9, items) + take(h, 2, items)\"}\n"
                   "    output: y\nnodes:\n  z: {kind: block, block: b, from: x}\n"
                   "outputs: {z: z}\n")
    loads_spec(text, "t.yaml")
    loads_spec(text, "t.yaml", length=10)
    got = refused(text, length=5)
    assert got == [("node 'y': its take reads position 9 along the length N, but N is 5 here "
                    "(positions 0 to 4)", 10, 32,
                    "use a length of more than 9, or a position within it")]
    assert refused(text, length={"N": 9})[0][0].endswith("N is 9 here (positions 0 to 8)")


def test_check_resources_returns_the_figures() -> None:
    """Under the limits, the guard returns what it measured."""
    g = loads_spec(HEAD + "nodes:\n  y: {kind: linear, from: x, out: 4}\noutputs: {y: y}\n")
    sz = check_resources(g)
    assert (sz.batch, dict(sz.lengths)) == (ASSUMED_BATCH, {"N": ASSUMED_LENGTH})
    assert sz.params.value == 36


SEEDS = seeds(ROOT)


@pytest.mark.parametrize("seed", SEEDS, ids=[s.name for s in SEEDS])
def test_catalog_and_docs_pass_with_room(seed: object) -> None:
    """Each catalog spec and docs example that validates stays under a fifth of every
    limit at the assumed batch and length (and at twice the length, under the limits)."""
    from attngraph.errors import AttnGraphError

    try:
        g = loads_spec(seed.text, "s.yaml", allow_large=True)  # type: ignore[attr-defined]
    except AttnGraphError:
        pytest.skip("an example of an error")
    if g.params > guard.MAX_PARAMS:
        pytest.skip("the docs' example of a refused spec")
    sz = check_resources(g)
    for fig, limit in ((sz.params, guard.MAX_PARAMS), (sz.tensor, guard.MAX_TENSOR),
                       (sz.held, guard.MAX_HELD), (sz.macs, guard.MAX_MACS),
                       (sz.runs, guard.MAX_RUNS), (sz.modules, guard.MAX_MODULES),
                       (sz.steps, guard.MAX_STEPS)):
        assert fig.value * 5 <= limit, (fig, limit)
    if not sz.bounds:  # a learned table's max_len caps the length
        check_resources(g, length=2 * ASSUMED_LENGTH)


def test_the_limits_are_the_documented_ones() -> None:
    """docs/spec-language.md states every limit, the assumed batch and length."""
    text = (ROOT / "docs" / "spec-language.md").read_text(encoding="utf-8")
    for n in (guard.MAX_PARAMS, guard.MAX_DIM, guard.MAX_TENSOR, guard.MAX_HELD, guard.MAX_MACS,
              guard.MAX_RUNS, guard.MAX_MODULES, guard.MAX_STEPS, ASSUMED_BATCH, ASSUMED_LENGTH):
        assert f"{n:,}" in text, n


def test_an_mlp_hidden_layer_is_a_tensor_of_its_own() -> None:
    """An mlp with a hidden layer of 999,999 over 36 image patches (2 GB peak in a
    forward and backward of 3 images): its hidden vectors are counted and refused."""
    text = ("attngraph: 1\nname: t\ninputs:\n  img: {type: image, height: 24, width: 24}\n"
            "nodes:\n  x: {kind: items, from: img, patches: [4, 4], dim: 48}\n"
            "  f: {kind: mlp, from: x, hidden: 999999, out: 48}\noutputs: {f: f}\n")
    got = refused(text)
    assert got[0] == (
        "node 'f' would make a tensor of 1,151,998,848 elements (4.6 GB of float32) at "
        "batch 32, over the limit of 500,000,000", 7, 6,
        f"shrink the sizes it multiplies (hidden, heads, lengths), {LARGE}")


def test_train_checks_the_spec_at_the_batch_and_length_it_trains_at(tmp_path: Path, cli) -> None:
    """`attngraph train` runs the guard at its own batch and the task's length: an
    additive score over all pairs with hidden 600 is refused at the assumed length 256
    (1.26e9 elements) but trains at the needle task's length 12."""


    root = Path(__file__).resolve().parent.parent
    text = (root / "specs" / "intra_attention.yaml").read_text(encoding="utf-8")
    text = text.replace("fn: scaled_dot, query: q, key: k, pairs: all,",
                        "fn: additive, query: q, key: k, pairs: all, hidden: 600,")
    spec = tmp_path / "big.yaml"
    spec.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError, match="1,258,291,200 elements"):
        load_spec(spec)
    cli("train", spec, "--steps", "1", "--quiet", "--out", tmp_path / "run", code=0)


def test_compile_checks_the_spec_at_its_batch_and_length(cli) -> None:
    """`attngraph compile --batch --length` runs the guard at those sizes: all-pairs
    scores of intra_attention at batch 256 and N = 4,096 are refused before any tensor
    exists, and pass at the defaults."""


    spec = str(Path(__file__).resolve().parent.parent / "specs" / "intra_attention.yaml")
    res = cli("compile", spec, "--batch", "256", "--length", "4096", code=1)
    assert "4,294,967,296 elements (17.2 GB of float32) at batch 256, N = 4,096" in res.output
    cli("compile", spec, code=0)


def test_kernel_attention_is_measured_as_it_runs() -> None:
    """Linear attention runs without the N×N scores, so the guard lets a long input
    through; declaring the weights as an output keeps the pairwise form, refused."""
    spec = """attngraph: 1
name: la
dims: {d: 64}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q:  {kind: queries, from: x, heads: 4}
  k:  {kind: keys, from: x, heads: 4}
  v:  {kind: values, from: x, heads: 4}
  fq: {kind: feature_map, from: q}
  fk: {kind: feature_map, from: k}
  s:  {kind: scorer, fn: dot, query: fq, key: fk}
  p:  {kind: softmax, scores: s, fn: sum}
  z:  {kind: readout, weights: p, values: v, out: d}
outputs: {z: z}
"""
    loads_spec(spec, batch=2, length=60_000)
    with pytest.raises(SpecError, match="node 's' would make a tensor of 28,800,000,000"):
        loads_spec(spec.replace("outputs: {z: z}", "outputs: {z: z, p: p}"), batch=2,
                   length=60_000)


def test_the_guard_measures_after_the_passes_that_say_they_resize(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What lets the long kernel attention through is the pass's ``resizes`` trait, not
    its name: the same pass without it leaves the N×N scores to be measured."""
    from dataclasses import replace

    import attngraph.passes as passes

    spec = """attngraph: 1
name: la
inputs: {x: {type: vectors, dim: 16}}
nodes:
  fq: {kind: feature_map, from: x}
  s:  {kind: scorer, fn: dot, query: fq, key: fq}
  p:  {kind: softmax, scores: s, fn: sum}
  z:  {kind: readout, weights: p, values: x}
outputs: {z: z}
"""
    assert [p.name for p in passes.OPTIMIZE.passes if p.resizes] == ["linear_attention"]
    assert passes.as_run(loads_spec(spec)).node("z").kind == "linear_attention"
    loads_spec(spec, batch=2, length=60_000)
    plain = passes.Pipeline(tuple(replace(p, resizes=False) for p in passes.OPTIMIZE.passes))
    monkeypatch.setattr(passes, "OPTIMIZE", plain)
    with pytest.raises(SpecError, match="node 's' would make a tensor"):
        loads_spec(spec, batch=2, length=60_000)
