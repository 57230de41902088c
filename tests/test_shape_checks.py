"""What a lowering assumes, checked before any tensor exists: sizes that weights
depend on are fixed numbers, ids and floats go where they belong, tables cover the
ids and positions they are given, numbers that scale results keep them finite, and
blocks nest and repeat within their limits. Each case pins its located message."""

from __future__ import annotations

import pytest

from attngraph.errors import AttnGraphError, GraphError, ShapeError, SpecError
from attngraph.frontend import loads_spec
from attngraph.ir.build import MAX_BLOCK_DEPTH

BASE = """attngraph: 1
name: t
dims: {d: 8, k: 6}
inputs:
  items: {type: vectors, dim: d}
  ctx: {type: vectors, dim: k}
  tok: {type: tokens, vocab: 50}
nodes:
"""
S = "  s: {kind: scorer, fn: dot, query: items, key: items}\n"
FIXED = ("N is a length, known only when a batch arrives, so it cannot size a weight: give "
         "this node features [..., d] (e.g. the readout of weights over items), not the "
         "scores or weights themselves")
SCALE = ("write a value from 0.001 to 1000: beyond it, numbers divided or multiplied by it "
         "leave the finite range of float32 and bfloat16 (NaN results)")
IDS = "token ids become vectors through items (embed:) or embedding"

# (case, body after BASE, error class, line, col, message, hint)
CASES = [
    # a symbolic length where a size was expected (int('N') before)
    ("linear_on_scores", S + "  y: {kind: linear, from: s, out: 4}\noutputs: {y: y}\n",
     ShapeError, 10, 27,
     "node 'y': the feature size of 'from' must be a fixed number, found the length N", FIXED),
    ("mlp_on_scores", S + "  y: {kind: mlp, from: s, hidden: 4, out: 4}\noutputs: {y: y}\n",
     ShapeError, 10, 24,
     "node 'y': the feature size of 'from' must be a fixed number, found the length N", FIXED),
    ("norm_on_scores", S + "  y: {kind: norm, from: s}\noutputs: {y: y}\n",
     ShapeError, 10, 25,
     "node 'y': the feature size of 'from' must be a fixed number, found the length N", FIXED),
    ("items_of_scores", S + "  y: {kind: items, from: s}\noutputs: {y: y}\n",
     ShapeError, 10, 26,
     "node 'y': the feature size of 'from' must be a fixed number, found the length N", FIXED),
    ("keys_on_scores", S + "  y: {kind: keys, from: s}\noutputs: {y: y}\n",
     ShapeError, 10, 25,
     "node 'y': the feature size of 'from' must be a fixed number, found the length N", FIXED),
    ("rnn_on_scores", S + "  y: {kind: rnn, from: s, hidden: 4}\noutputs: {y: y}\n",
     ShapeError, 10, 24,
     "node 'y': the feature size of 'from' must be a fixed number, found the length N", FIXED),
    ("scorer_key_of_scores", S + "  y: {kind: scorer, fn: mlp, key: s}\noutputs: {y: y}\n",
     ShapeError, 10, 35,
     "node 'y': the feature size of 'key' must be a fixed number, found the length N", FIXED),
    ("scorer_query_of_scores",
     S + "  y: {kind: scorer, fn: general, query: s, key: items}\noutputs: {y: y}\n",
     ShapeError, 10, 41,
     "node 'y': the feature size of 'query' must be a fixed number, found the length N", FIXED),
    ("readout_of_scores",
     S + "  p: {kind: softmax, scores: s}\n  y: {kind: readout, weights: p, values: s}\n"
     "outputs: {y: y}\n",
     ShapeError, 11, 42,
     "node 'y': the feature size of 'values' must be a fixed number, found the length N",
     FIXED),
    ("concat_scores", S + "  y: {kind: concat, from: [items, s]}\noutputs: {y: y}\n",
     ShapeError, 10, 35,
     "node 'y': the feature size of 's' must be a fixed number, found the length N", FIXED),
    ("baseline_of_weights",
     S + "  p: {kind: policy, scores: s, baseline: s}\noutputs: {p: p}\n",
     ShapeError, 10, 42, "node 'p': the baseline reads a float vector [d], got [N, N]",
     "give it a state vector, e.g. the rnn's state, or write baseline: true"),
    # ids where floats belong, and floats with heads where a layer expects none
    ("dropout_on_ids", "  y: {kind: dropout, from: tok}\noutputs: {y: y}\n",
     ShapeError, 9, 28, "node 'y': dropout zeroes numbers, but 'tok' is long[N_tok]",
     "drop ids after they become vectors (items with embed:, or embedding)"),
    ("concat_ids", "  y: {kind: concat, from: [items, tok]}\noutputs: {y: y}\n",
     ShapeError, 9, 35, "node 'y': concat joins float features, but 'tok' is long[N_tok]", IDS),
    ("policy_on_ids", "  y: {kind: policy, scores: tok}\noutputs: {y: y}\n",
     ShapeError, 9, 29,
     "node 'y': a categorical policy needs float scores over items, but 'tok' is long[N_tok]",
     "give it the scores of a scorer ([N] or [M, N])"),
    ("gaussian_mean_ids", "  y: {kind: policy, dist: gaussian, mean: tok}\noutputs: {y: y}\n",
     ShapeError, 9, 43, "node 'y': a gaussian policy's mean is a float vector [k], got long[N_tok]",
     "predict it with {kind: linear, from: <state>, out: 2, act: tanh}"),
    ("mlp_on_heads",
     "  q: {kind: queries, from: items, heads: 2}\n  y: {kind: mlp, from: q, hidden: 4, out: 2}\n"
     "outputs: {y: y}\n",
     ShapeError, 10, 24, "node 'y': 'q' still has 2 heads",
     "merge heads in the readout (combine: concat) first"),
    ("rnn_on_heads",
     "  q: {kind: queries, from: items, heads: 2}\n  y: {kind: rnn, from: q, hidden: 4}\n"
     "outputs: {y: y}\n",
     ShapeError, 10, 24, "node 'y': rnn reads a sequence [N, d] or one step [d], got [N, 4] ×2",
     "merge heads in the readout (combine: concat) first"),
    # a table smaller than the ids it looks up
    ("embedding_vocab_short",
     "  y: {kind: embedding, from: tok, dim: d, vocab: 10}\noutputs: {y: y}\n",
     ShapeError, 9, 50,
     "node 'y': a table of vocab 10 rows cannot look up the ids of 'tok', which go up to 49",
     "make vocab at least 50 (the ids' vocab)"),
    # numbers that would make NaN or inf
    ("temperature_tiny", S + "  p: {kind: softmax, scores: s, temperature: 1.0e-300}\n"
     "outputs: {p: p}\n",
     SpecError, 10, 46, "node 'p': temperature: must be from 0.001 to 1000, found 1e-300", SCALE),
    ("temperature_sparsemax",
     S + "  p: {kind: softmax, scores: s, temperature: 1.0e-300, fn: sparsemax}\n"
     "outputs: {p: p}\n",
     SpecError, 10, 46, "node 'p': temperature: must be from 0.001 to 1000, found 1e-300", SCALE),
    ("gumbel_tau_tiny",
     S + "  p: {kind: policy, scores: s, estimator: gumbel, tau: 5.0e-324}\noutputs: {p: p}\n",
     SpecError, 10, 56, "node 'p': tau: must be from 0.001 to 1000, found 4.94066e-324", SCALE),
    ("std_tiny",
     "  m: {kind: linear, from: ctx, out: 2}\n"
     "  p: {kind: policy, dist: gaussian, mean: m, std: 1.0e-300}\noutputs: {p: p}\n",
     SpecError, 10, 51, "node 'p': std: must be from 0.001 to 1000, found 1e-300", SCALE),
    ("beta_huge",
     "  s: {kind: scorer, fn: cosine, query: items, key: items, beta: 1.0e9}\noutputs: {s: s}\n",
     SpecError, 9, 65, "node 's': beta: must be from 0.001 to 1000, found 1e+09", SCALE),
    ("sigma_nan",
     "  s: {kind: scorer, fn: location, mode: gaussian, query: items, key: items, "
     "sigma: .nan}\noutputs: {s: s}\n",
     SpecError, 9, 84, "number '.nan' is not finite",
     "write a finite number; a spec has no use for .inf or .nan (quote it, '.nan', if you "
     "meant text)"),
    ("dropout_p", "  y: {kind: dropout, from: items, p: 0.999}\noutputs: {y: y}\n",
     SpecError, 9, 38, "node 'y': p: must be from 0 to 0.99, found 0.999",
     "write a value from 0 to 0.99: dropout scales what it keeps by 1/(1 - p)"),
]


@pytest.mark.parametrize(
    ("case", "body", "cls", "line", "col", "message", "hint"), CASES, ids=[c[0] for c in CASES]
)
def test_refused_with_its_located_message(
    case: str, body: str, cls: type, line: int, col: int, message: str, hint: str | None
) -> None:
    """Each spec that used to fail at forward (or with a traceback) is refused, located."""
    with pytest.raises(AttnGraphError) as info:
        loads_spec(BASE + body, "t.yaml")
    assert type(info.value) is cls
    d = info.value.diagnostics[0]
    assert (d.message, d.loc.line, d.loc.col, d.hint) == (message, line, col, hint)


DEC = """attngraph: 1
name: t
dims: {d: 8, vocab: 20}
inputs:
  src: {type: tokens, vocab: vocab}
  tgt: {type: tokens, vocab: VOCAB_T, length: T}
blocks:
  step:
    inputs: [y_prev, h]
    nodes:
      e:      {kind: embedding, from: y_prev, dim: d, vocab: vocab}
      cell:   {kind: rnn, from: e, hidden: d, init: h}
      logits: {kind: linear, from: cell, out: OUT}
    outputs: {logits: logits, h: cell}
nodes:
  dec:
    kind: loop
    body: step
    steps: STEPS
    carry: {h: {zeros: d, next: h}}
    feed: {y_prev: {from: tgt, feedback: logits, start: START}}
outputs: {logits: dec.logits}
"""


def dec(vt: str = "vocab", out: str = "vocab", steps: str = "tgt", start: str = "1") -> str:
    return (DEC.replace("VOCAB_T", vt).replace("OUT", out).replace("STEPS", steps)
            .replace("START", start))


IMG = """attngraph: 1
name: t
inputs:
  img: {type: image, height: 8, width: 8}
nodes:
  x: {kind: items, from: img, patches: [2, 2]}
"""
REPEAT = """attngraph: 1
name: t
dims: {d: 8, rounds: 5000}
inputs:
  x: {type: vectors, dim: d}
blocks:
  layer:
    inputs: [h]
    nodes:
      y: {kind: linear, from: h, out: d}
    output: y
nodes:
  r: {kind: repeat, block: layer, times: rounds, from: x}
outputs: {r: r}
"""

# (case, whole spec, error class, line, col, message, hint)
WHOLE = [
    ("feed_start_over_vocab", dec(start="4096"), ShapeError, 21, 11,
     "node 'dec': feed 'y_prev' starts from id 4096, but feedback 'logits' picks ids below 20",
     "use a start id below 20 (e.g. the BOS id of the targets' vocab)"),
    ("fed_targets_over_table", dec(vt="100"), ShapeError, 11, 62,
     "in block 'step' (used by node 'dec'): node 'e': a table of vocab 20 rows cannot look "
     "up the ids of 'y_prev', which go up to 99", "make vocab at least 100 (the ids' vocab)"),
    ("fed_back_logits_over_table", dec(out="30"), ShapeError, 11, 62,
     "in block 'step' (used by node 'dec'): node 'e': a table of vocab 20 rows cannot look "
     "up the ids of 'y_prev', which go up to 29", "make vocab at least 30 (the ids' vocab)"),
    ("feed_length_not_steps", dec(steps="5"), ShapeError, 21, 27,
     "node 'dec': feed 'y_prev' reads one element per step, but 'tgt' has T of them for 5 "
     "steps", "give steps: tgt (the steps are its length)"),
    ("position_table_shorter_than_fixed_n",
     IMG + "  p: {kind: position, from: x, dim: 4, encoding: learned, max_len: 10}\n"
     "outputs: {p: p}\n", ShapeError, 7, 68,
     "node 'p': a table of max_len 10 positions cannot cover the 16 items of 'x'",
     "raise max_len to 16, or drop it (the items are a fixed 16)"),
    ("location_table_shorter_than_fixed_n",
     IMG + "  s: {kind: scorer, fn: location, key: x, max_len: 10}\noutputs: {s: s}\n",
     ShapeError, 7, 52,
     "node 's': location scores learned for max_len 10 positions, but the keys have 16 items",
     "raise max_len to 16, or drop it (the keys are a fixed 16 items)"),
    ("times_from_dims", REPEAT, GraphError, 13, 42,
     "node 'r': times 'rounds' is 5,000, over the limit of 1,024 for times",
     "make 'rounds' at most 1,024 under dims:, or write a number of at most 1,024 here"),
]


@pytest.mark.parametrize(
    ("case", "text", "cls", "line", "col", "message", "hint"), WHOLE, ids=[c[0] for c in WHOLE]
)
def test_whole_spec_refused_with_its_located_message(
    case: str, text: str, cls: type, line: int, col: int, message: str, hint: str | None
) -> None:
    """Loops, tables and repeats: refused at the field that is wrong."""
    with pytest.raises(AttnGraphError) as info:
        loads_spec(text, "t.yaml")
    assert type(info.value) is cls
    d = info.value.diagnostics[0]
    assert (d.message, d.loc.line, d.loc.col, d.hint) == (message, line, col, hint)


def test_the_decoder_the_cases_vary_is_valid() -> None:
    """The loop the cases above break validates as written, and at a dims name of 1,024
    rounds the repeat does too."""
    loads_spec(dec(), "t.yaml")
    loads_spec(REPEAT.replace("5000", "1024"), "t.yaml")


def chain(depth: int, kind: str = "block") -> str:
    """A spec whose blocks nest ``depth`` deep."""
    lines = ["attngraph: 1", "name: t", "inputs:", "  x: {type: vectors, dim: 4}", "blocks:"]
    for i in range(depth):
        lines += [f"  b{i}:", "    inputs: [h]", "    nodes:"]
        if i + 1 < depth:
            extra = ", times: 1" if kind == "repeat" else ""
            lines += [f"      y: {{kind: {kind}, block: b{i + 1}, from: h{extra}}}"]
        else:
            lines += ["      y: {kind: linear, from: h, out: 4}"]
        lines += ["    output: y"]
    lines += ["nodes:", "  z: {kind: block, block: b0, from: x}", "outputs: {z: z}"]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("depth", [MAX_BLOCK_DEPTH + 1, 300])
def test_blocks_nested_too_deep_are_refused_before_recursing(depth: int) -> None:
    """Blocks nested past the limit (a RecursionError at ~250 levels before) are refused
    at the use one level too deep, with the chain."""
    with pytest.raises(GraphError) as info:
        loads_spec(chain(depth), "t.yaml")
    d = info.value.diagnostics[0]
    more = " -> ..." if depth > MAX_BLOCK_DEPTH + 1 else ""
    assert d.message == (
        f"node 'y' of block 'b31': blocks nest {depth} deep (b0 -> b1 -> b2 -> ... -> b31 -> "
        f"b32{more}), over the limit of 32")
    assert (d.loc.line, d.loc.col) == (164, 31)
    assert d.hint == ("use fewer levels: write some blocks' nodes into the block that uses "
                      "them, or stack rounds of one block with kind: repeat")


@pytest.mark.parametrize("kind", ["block", "repeat"])
def test_blocks_nested_to_the_limit_compile_and_run(kind: str) -> None:
    """At the limit, every stage (validate, diagrams, describe, compile, forward) works."""
    from fuzz.oracle import check

    o = check(chain(MAX_BLOCK_DEPTH, kind), "t.yaml")
    assert o.outcome == "valid", o


def test_a_block_node_named_like_its_input_is_refused_with_a_hint() -> None:
    """A block whose node takes an input's name: located, with what to do."""
    text = ("attngraph: 1\nname: t\ninputs:\n  x: {type: vectors, dim: 4}\nblocks:\n  b:\n"
            "    inputs: [h]\n    nodes:\n      h: {kind: linear, from: h, out: 4}\n"
            "    output: h\nnodes:\n  z: {kind: block, block: b, from: x}\noutputs: {z: z}\n")
    with pytest.raises(GraphError) as info:
        loads_spec(text, "t.yaml")
    d = info.value.diagnostics[0]
    assert (d.message, d.loc.line, d.hint) == (
        "block 'b': 'h' is both an input and a node", 9,
        "rename the node 'h' (its inputs are named under inputs:)")


def test_key_heads_must_divide_query_heads() -> None:
    """3 key heads for 8 query heads: located at the query, with the grouped-query rule."""
    spec = """attngraph: 1
name: t
inputs:
  x: {type: vectors, dim: 24}
nodes:
  q: {kind: queries, from: x, heads: 8}
  k: {kind: keys, from: x, dim: 9, heads: 3}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
outputs: {s: s}
"""
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    d = e.value
    assert (d.loc.line, d.loc.col) == (8, 44)
    assert d.message == "node 's': query has 8 heads but key has 3, which does not divide them"
    assert "grouped-query" in (d.hint or "")


def test_values_heads_must_divide_weights_heads() -> None:
    """Values with heads that do not divide the weights' are refused at the values."""
    spec = """attngraph: 1
name: t
inputs:
  x: {type: vectors, dim: 24}
nodes:
  q: {kind: queries, from: x, heads: 4}
  k: {kind: keys, from: x, dim: 12, heads: 2}
  v: {kind: values, from: x, dim: 18, heads: 3}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: v}
outputs: {z: z}
"""
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    assert e.value.message == "node 'z': weights have 4 head(s) but values have 3"
    assert e.value.loc.line == 11


@pytest.mark.parametrize(("line", "col", "message", "hint"), [
    ("  b: {kind: position_bias, scores: p, fn: alibi}\n", 36,
     "node 'b': a relative position bias is added to scores, not to weights",
     "add it before the softmax"),
    ("  b: {kind: position_bias, scores: s, fn: alibi, buckets: 8}\n", 59,
     "node 'b': 'buckets' applies to fn t5, not alibi", "drop it, or use fn: t5"),
    ("  b: {kind: rotary, from: x}\n", 27,
     "node 'b': rotary embeddings rotate pairs of features, but the size (per head) is 5",
     "make the per-head size even"),
    # the bucket rule divides by zero (a traceback from compile) or indexes past the table
    ("  b: {kind: position_bias, scores: s, fn: t5, buckets: 3}\n", 56,
     "node 'b': 3 buckets leave no bucket of exact distances",
     "give at least 4 buckets (32 in T5)"),
    ("  b: {kind: position_bias, scores: s, fn: t5, bidirectional: false, buckets: 4, "
     "max_distance: 2}\n", 95,
     "node 'b': max_distance 2 must exceed the 2 distances that have a bucket each",
     "raise max_distance above 2 (128 in T5), or use fewer buckets"),
    ("  b: {kind: position_bias, scores: s, fn: t5, buckets: 32, max_distance: 8}\n", 74,
     "node 'b': max_distance 8 must exceed the 8 distances that have a bucket each",
     "raise max_distance above 8 (128 in T5), or use fewer buckets"),
])
def test_relative_position_fields_are_checked(line: str, col: int, message: str,
                                              hint: str) -> None:
    """Relative position kinds refuse what their lowering cannot do, located."""
    spec = ("attngraph: 1\nname: t\ninputs:\n  x: {type: vectors, dim: 5}\nnodes:\n"
            "  s: {kind: scorer, fn: dot, query: x, key: x}\n"
            "  p: {kind: softmax, scores: s}\n" + line + "outputs: {b: b}\n")
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    d = e.value
    assert (d.message, d.loc.line, d.loc.col, d.hint) == (message, 8, col, hint)


@pytest.mark.parametrize(("line", "col", "message"), [
    ("  b: {kind: conv, from: x, out: 3, kernel: 4}\n", 44,
     "node 'b': a convolution over items keeps N, so its kernel is odd, got 4"),
    ("  b: {kind: conv, from: x, out: 3, kernel: 3, stride: 2}\n", 55,
     "node 'b': 'stride' applies to a 2-D convolution of an image; over items the stride "
     "is 1 and N is kept"),
    ("  b: {kind: to_image, from: x, height: 2, width: 2}\n", 29,
     "node 'b': the number of pixels must be a fixed number, found the length N"),
    ("  b: {kind: pool, from: h}\n", 25,
     "node 'b': pool reduces items [N, d] to one vector [d], got [5]"),
    ("  b: {kind: mul, from: [x, y]}\n", 6, "node 'b': mul needs inputs of one shape"),
])
def test_elementwise_and_conv_kinds_check_their_inputs(line: str, col: int,
                                                       message: str) -> None:
    """conv, to_image, pool and mul refuse what their lowering cannot do, located."""
    spec = ("attngraph: 1\nname: t\ninputs:\n  x: {type: vectors, dim: 5}\n"
            "  y: {type: vector, dim: 3}\n  h: {type: vector, dim: 5}\nnodes:\n"
            + line + "outputs: {b: b}\n")
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    d = e.value
    assert d.message.startswith(message) and (d.loc.line, d.loc.col) == (8, col), d
    assert d.hint


@pytest.mark.parametrize(("line", "col", "message"), [
    ("  b: {kind: scorer, fn: dot, query: h, key: x, features: f}\n", 58,
     "node 'b': per-item features enter the additive score (vᵀ tanh(W q + U k_i + V f_i)), "
     "not fn dot"),
    ("  b: {kind: scorer, fn: additive, query: h, key: x, features: h}\n", 63,
     "node 'b': features must be one vector per key item, [N, c] or [N], got [5]"),
])
def test_scorer_features_are_checked(line: str, col: int, message: str) -> None:
    """Per-item features: additive only, one per key item; located at the reference."""
    spec = ("attngraph: 1\nname: t\ninputs:\n  x: {type: vectors, dim: 5}\n"
            "  h: {type: vector, dim: 5}\nnodes:\n  f: {kind: conv, from: x, out: 2, kernel: 3}\n"
            + line + "outputs: {b: b}\n")
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    d = e.value
    assert (d.message, d.loc.line, d.loc.col) == (message, 8, col)
    assert d.hint


def test_a_carry_starts_one_way() -> None:
    """zeros and zeros_over together are refused, located at the carry."""
    spec = """attngraph: 1
name: t
inputs:
  x: {type: vectors, dim: 4}
blocks:
  b:
    inputs: [c]
    nodes:
      n: {kind: add, from: [c, c]}
    output: n
nodes:
  l: {kind: loop, body: b, steps: 2, carry: {c: {zeros: 3, zeros_over: x, next: n}}}
outputs: {l: l}
"""
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    assert e.value.message == "node 'l': carry 'c' gives zeros and zeros_over; it starts one way"
    assert e.value.loc.line == 12


def test_a_onehot_carry_starts_one_way_too() -> None:
    """onehot with zeros is refused at the carry, the hint naming every way to start; a
    onehot start is weights over its slots, so it must match the body output it becomes."""
    spec = """attngraph: 1
name: t
inputs:
  x: {type: vectors, dim: 4}
blocks:
  b:
    inputs: [c]
    nodes:
      n: {kind: linear, from: c, out: 3}
    outputs: {n: n}
nodes:
  l: {kind: loop, body: b, steps: 2, carry: {c: {onehot: 3, zeros: 3, next: n}}}
outputs: {l: l}
"""
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    assert e.value.message == "node 'l': carry 'c' gives zeros and onehot; it starts one way"
    assert e.value.loc.line == 12
    assert all(w in (e.value.hint or "") for w in ("init", "zeros_over", "onehot", "zeros_like"))
    with pytest.raises(ShapeError) as e:
        loads_spec(spec.replace("onehot: 3, zeros: 3", "onehot: 5"))
    assert e.value.message.startswith("node 'l': carry 'c' starts as ")
    assert loads_spec(spec.replace("onehot: 3, zeros: 3", "onehot: 3")).node("l").kind == "loop"


@pytest.mark.parametrize(("line", "col", "message"), [
    ("  r: {kind: filterbank, image: img, params: h, size: 3}\n", 45,
     "node 'r': filterbank params are [5] (g̃x, g̃y, log σ², log δ̃, log γ), got [4]"),
    ("  r: {kind: filterbank, image: h, params: p, size: 3}\n", 32,
     "node 'r': filterbank reads an image [C, H, W], got [4]"),
])
def test_filterbank_checks_its_inputs(line: str, col: int, message: str) -> None:
    """DRAW's filterbank refuses params that are not [5] and inputs that are not images."""
    spec = ("attngraph: 1\nname: t\ninputs:\n  img: {type: image, height: 7, width: 9}\n"
            "  h: {type: vector, dim: 4}\nnodes:\n  p: {kind: linear, from: h, out: 5}\n"
            + line + "outputs: {r: r}\n")
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    d = e.value
    assert d.message.startswith(message) and (d.loc.line, d.loc.col) == (8, col), d
    assert d.hint


@pytest.mark.parametrize(("extra", "line", "col", "message"), [
    ("  b: {kind: gather, from: x, index: t}\n", 9, 37,
     "node 'b': gather's index must be positions into the N items of 'x', got ids"),
    ("  b: {kind: gather, from: x, index: q}\n", 9, 37,
     "node 'b': gather's index must be positions into the N items of 'x', got positions "
     "into N_o items"),
    ("  b: {kind: onehot, from: t, classes: 3}\n", 9, 39,
     "node 'b': onehot of 3 classes, but its ids go up to 9"),
])
def test_indexing_checks_what_it_reads(extra: str, line: int, col: int, message: str) -> None:
    """gather reads positions of its own items only; onehot covers every id."""
    spec = ("attngraph: 1\nname: t\ninputs:\n  v: {type: vectors, dim: 3}\n"
            "  t: {type: tokens, vocab: 10}\n  o: {type: vectors, dim: 3}\n"
            "  q: {type: positions, of: o}\nnodes:\n  x: {kind: items, from: v}\n"
            + extra + "outputs: {b: b}\n")
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    d = e.value
    assert (d.message, d.loc.line, d.loc.col) == (message, line + 1, col), d
    assert d.hint


@pytest.mark.parametrize(("inputs", "node", "message"), [
    ("  v: {type: vectors, dim: 3, nested: true}\n", "  m: {kind: add, from: [v, v]}\n",
     "node 'v': 'nested' and 'inner' apply to tokens inputs, not vectors"),
    ("  v: {type: tokens, vocab: 5, inner: W}\n", "  m: {kind: items, from: v, embed: 2}\n",
     "node 'v': 'inner' is the words' length of nested tokens"),
    ("  v: {type: tokens, vocab: 5}\n", "  m: {kind: map, block: b, from: v}\n",
     "node 'm': map runs the block on each element of the first axis, so 'v' needs items "
     "of items ([S, W] or [S, W, d]), got long[N]"),
])
def test_nested_inputs_and_map_are_checked(inputs: str, node: str, message: str) -> None:
    """Nested tokens' fields and map's inputs are checked, located, with a hint."""
    spec = ("attngraph: 1\nname: t\ninputs:\n" + inputs + "blocks:\n  b:\n    inputs: [w]\n"
            "    nodes:\n      e: {kind: embedding, from: w, dim: 2, vocab: 5}\n"
            "    output: e\nnodes:\n" + node + "outputs: {m: m}\n")
    with pytest.raises(AttnGraphError) as e:
        loads_spec(spec)
    d = e.value.diagnostics[0]
    assert d.message == message, d
    assert d.hint and d.loc.line in (4, 12)


def test_location_scores_refuse_heads() -> None:
    """Position scores are one set for all heads: keys with heads are refused (they gave
    scores whose runtime shape had heads the type did not)."""
    spec = ("attngraph: 1\nname: t\ninputs:\n  src: {type: vectors, dim: 8}\nnodes:\n"
            "  k: {kind: keys, from: src, heads: 2}\n"
            "  s: {kind: scorer, fn: location, key: k, max_len: 10}\noutputs: {s: s}\n")
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    assert e.value.message.startswith("node 's': fn location scores positions")
    assert (e.value.loc.line, e.value.loc.col) == (7, 40)


def test_rotary_base_must_exceed_one() -> None:
    """A base of 1 or less (accepted as a scale before) gives angles that do not fall
    with the feature index: refused at the base."""
    spec = ("attngraph: 1\nname: t\ninputs:\n  x: {type: vectors, dim: 4}\nnodes:\n"
            "  b: {kind: rotary, from: x, base: 0.5}\noutputs: {b: b}\n")
    with pytest.raises(ShapeError) as e:
        loads_spec(spec)
    d = e.value
    assert (d.message, d.loc.line, d.loc.col, d.hint) == (
        "node 'b': a base of 0.5 gives angles θ_i = base^(−2i/d) that do not fall with i",
        6, 36, "write a base above 1 (10000 in RoFormer)")
