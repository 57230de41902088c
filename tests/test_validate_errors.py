"""Every error class of the front end: exact message, (line, col), hint, and class."""

from __future__ import annotations

import pytest

from attngraph.errors import AttnGraphError, GraphError, ShapeError, SpecError
from attngraph.frontend import loads_spec
from attngraph.kinds import spec_kinds

BASE = """attngraph: 1
name: t
dims: {d: 8, k: 6}
inputs:
  items: {type: vectors, dim: d}
  ctx: {type: vectors, dim: k}
nodes:
"""

# (case, body after BASE, error class, line, col, message, hint or None)
CASES = [
    ("dot_sizes",
     "  q: {kind: queries, from: items}\n  kk: {kind: keys, from: ctx}\n"
     "  s: {kind: scorer, fn: dot, query: q, key: kk, pairs: all}\noutputs: {s: s}\n",
     ShapeError, 10, 6,
     "node 's': scorer fn 'dot' needs query and key of one size (query q: 8, key kk: 6)",
     "make both dims equal, or use fn 'general' (q^T W k), which maps between sizes"),
    ("dangling_ref",
     "  s: {kind: scorer, fn: dot, query: itemz, key: items}\noutputs: {s: s}\n",
     GraphError, 8, 37, "node 's': query 'itemz' is not a node or input",
     "did you mean 'items'?"),
    ("unknown_kind",
     "  p: {kind: softmx, scores: items}\noutputs: {p: p}\n",
     SpecError, 8, 13, "node 'p': unknown kind 'softmx'", "did you mean 'softmax'?"),
    ("unknown_field",
     "  v: {kind: linear, from: items, out: 2, bais: false}\noutputs: {v: v}\n",
     SpecError, 8, 42, "node 'v': unknown field 'bais'", "did you mean 'bias'?"),
    ("missing_field",
     "  v: {kind: linear, from: items}\noutputs: {v: v}\n",
     SpecError, 8, 3, "node 'v': missing field 'out'", "add 'out:' (required)"),
    ("bad_enum",
     "  n: {kind: norm, from: items, fn: batch}\noutputs: {n: n}\n",
     SpecError, 8, 36, "node 'n': fn 'batch' is not one of 'layer' or 'rms'",
     "known: layer, rms"),
    ("unknown_scorer",
     "  s: {kind: scorer, fn: additve, query: items, key: items}\noutputs: {s: s}\n",
     SpecError, 8, 25,
     "node 's': fn: 'additve' is not a scorer function", "did you mean 'additive'?"),
    ("negative_size",
     "  v: {kind: linear, from: items, out: -2}\noutputs: {v: v}\n",
     SpecError, 8, 39, "node 'v': out: input should be greater than 0",
     "use a value above 0 for out"),
    ("unknown_dims_name",
     "  v: {kind: linear, from: items, out: dd}\noutputs: {v: v}\n",
     GraphError, 8, 39, "node 'v': 'dd' is not a dims name", "did you mean 'd'?"),
    ("raw_scores_to_readout",
     "  s: {kind: scorer, fn: dot, query: items, key: items}\n"
     "  z: {kind: readout, weights: s, values: items}\noutputs: {z: z}\n",
     ShapeError, 9, 31, "node 'z': weights 's' are not normalised over items",
     "feed the readout a softmax (or a policy's sample); to read weights that are not a "
     "distribution as they are (sigmoid attention), add distribution: false"),
    ("weights_over_other_items",
     "  s: {kind: scorer, fn: dot, query: items, key: items}\n"
     "  p: {kind: softmax, scores: s}\n"
     "  z: {kind: readout, weights: p, values: ctx}\noutputs: {z: z}\n",
     ShapeError, 10, 42,
     "node 'z': weights 'p' are normalised over N items, but values 'ctx' have N_ctx",
     "weights and values must range over the same items"),
    ("unknown_kind_far_from_any",
     "  v: {kind: vec, from: items}\noutputs: {o: v}\n",
     SpecError, 8, 13, "node 'v': unknown kind 'vec'",
     "known: " + ", ".join(sorted(spec_kinds()))),
    ("aligned_lengths",
     "  q: {kind: queries, from: items}\n  kk: {kind: keys, from: ctx, dim: d}\n"
     "  s: {kind: scorer, fn: dot, query: q, key: kk, pairs: aligned}\noutputs: {s: s}\n",
     ShapeError, 10, 37,
     "node 's': pairs: aligned needs as many queries as keys (queries N, keys N_ctx)",
     "use pairs: all to score every query against every key"),
    ("heads_divide",
     "  q: {kind: queries, from: items, heads: 3}\noutputs: {q: q}\n",
     ShapeError, 8, 42, "node 'q': 3 heads do not divide size 8",
     "make the size a multiple of 3 (e.g. dim: 6 or 9)"),
    ("missing_port",
     "  r: {kind: rnn, from: items, hidden: 4}\n  o: {kind: linear, from: r.stat, out: 2}\n"
     "outputs: {o: o}\n",
     ShapeError, 9, 27, "node 'o': 'r' (rnn) has no port 'stat'", "did you mean 'state'?"),
    ("dangling_output",
     "  v: {kind: linear, from: items, out: 2}\noutputs: {v: vv}\n",
     GraphError, 9, 14, "output 'v': 'vv' is not a node or input", "did you mean 'v'?"),
    ("cycle",
     "  a: {kind: linear, from: c, out: 8}\n  b: {kind: linear, from: a, out: 8}\n"
     "  c: {kind: add, from: [b, items]}\noutputs: {o: c}\n",
     GraphError, 8, 27, "cycle: c -> a -> b -> c",
     "attention graphs are acyclic; state that feeds back belongs in a loop's carry "
     "(kind: loop)"),
    ("unknown_block",
     "  b: {kind: block, block: lyr, from: items}\noutputs: {b: b}\n",
     GraphError, 8, 27, "node 'b': 'lyr' is not a block", "define it under blocks:"),
    ("mlp_takes_no_query",
     "  s: {kind: scorer, fn: mlp, query: items, key: items}\noutputs: {s: s}\n",
     ShapeError, 8, 37,
     "node 's': fn 'mlp' scores each item alone (vᵀtanh(W k)) and takes no query",
     "drop 'query', or use fn 'additive' to score against a query"),
    ("causal_needs_pairs",
     "  s: {kind: scorer, fn: dot, query: {learned: d}, key: items}\n"
     "  p: {kind: softmax, scores: s, mask: {causal: true}}\noutputs: {p: p}\n",
     ShapeError, 9, 30,
     "node 'p': a causal mask relates query i to item j, so it needs scores [M, N], got [N]",
     "give the scorer one query per item (query: a node of [M, d], pairs: all) so that its "
     "scores are [M, N], or drop the causal mask"),
    ("bad_reference_text",
     "  v: {kind: linear, from: 'a b', out: 2}\noutputs: {v: v}\n",
     SpecError, 8, 27,
     "node 'v': from must be a reference (node, node.port, or {ref: node, detach: true}), "
     "found 'a b'",
     "name a node or an input of this spec (from: x, or x.port such as enc.state); "
     "ids are lowercase letters, digits and _"),
]


@pytest.mark.parametrize(
    ("case", "body", "cls", "line", "col", "message", "hint"), CASES, ids=[c[0] for c in CASES]
)
def test_error_is_located_with_exact_message(
    case: str, body: str, cls: type, line: int, col: int, message: str, hint: str | None
) -> None:
    """Each bad spec raises its own error class once, at the exact line and column."""
    with pytest.raises(AttnGraphError) as info:
        loads_spec(BASE + body, "t.yaml")
    err = info.value
    assert type(err) is cls
    d = err.diagnostics[0]
    assert (d.message, d.loc.line, d.loc.col) == (message, line, col)
    assert d.hint == hint
    assert str(err).startswith(f"t.yaml:{line}:{col}: error: ")


def test_softmax_over_nothing() -> None:
    """A softmax whose scores have no items axis (a scalar log-prob) is refused."""
    body = (
        "  loc: {kind: linear, from: items, out: 2}\n"
        "  one: {kind: readout, weights: w, values: items}\n"
        "  sc: {kind: scorer, fn: dot, query: {learned: d}, key: items}\n"
        "  w: {kind: softmax, scores: sc}\n"
        "  m: {kind: linear, from: one, out: 2}\n"
        "  pol: {kind: policy, dist: gaussian, mean: m}\n"
        "  p: {kind: softmax, scores: pol.log_prob}\noutputs: {p: p}\n"
    )
    with pytest.raises(ShapeError) as info:
        loads_spec(BASE + body, "t.yaml")
    d = info.value.diagnostics[0]
    assert d.message == (
        "node 'p': softmax over nothing: scores 'pol.log_prob' are [], with no items axis"
    )
    assert (d.loc.line, d.loc.col) == (14, 30)


def test_all_problems_reported_together() -> None:
    """Independent schema problems are all reported, in file order, in one error."""
    body = (
        "  a: {kind: linear, from: items, out: 2, bais: 1}\n"
        "  b: {kind: sofmax, scores: a}\n"
        "  c: {kind: norm, from: items, fn: batch}\noutputs: {a: a}\n"
    )
    with pytest.raises(SpecError) as info:
        loads_spec(BASE + body, "t.yaml")
    lines = [d.loc.line for d in info.value.diagnostics]
    assert lines == [8, 9, 10]


def test_shape_errors_do_not_cascade() -> None:
    """A node downstream of a failed node is skipped, not reported a second time."""
    body = (
        "  q: {kind: queries, from: items, heads: 3}\n"
        "  s: {kind: scorer, fn: dot, query: q, key: items}\n"
        "  v: {kind: linear, from: ctx, out: 2, act: relu}\n"
        "  w: {kind: add, from: [v, items]}\noutputs: {s: s, w: w}\n"
    )
    with pytest.raises(ShapeError) as info:
        loads_spec(BASE + body, "t.yaml")
    msgs = [d.message for d in info.value.diagnostics]
    assert msgs == [
        "node 'q': 3 heads do not divide size 8",
        "node 'w': add needs inputs of one shape, got [N_ctx, 2], [N, 8]",
    ]


def test_version_and_top_level() -> None:
    """A wrong language version and a missing top-level key are schema errors."""
    with pytest.raises(SpecError) as info:
        loads_spec("attngraph: 2\nname: t\ninputs: {}\nnodes: {}\noutputs: {}\n", "t.yaml")
    d = info.value.diagnostics[0]
    assert (d.message, d.loc.line, d.loc.col) == ("language version 2 is not supported", 1, 12)
    with pytest.raises(SpecError) as info:
        loads_spec("attngraph: 1\nname: t\ninputs: {}\nnodes: {}\n", "t.yaml")
    assert "spec: missing field 'outputs'" in [d.message for d in info.value.diagnostics]


def test_resource_guard_refuses_huge_specs() -> None:
    """A spec over 1e8 parameters is refused with the figure, unless allow_large."""
    text = BASE + "  v: {kind: linear, from: items, out: 400000000}\noutputs: {v: v}\n"
    with pytest.raises(SpecError) as info:
        loads_spec(text, "t.yaml")
    assert info.value.message == (
        "spec would have 3,600,000,000 parameters, over the limit of 100,000,000 "
        "(node 'v' has 3,600,000,000)"
    )
    g = loads_spec(text, "t.yaml", allow_large=True)
    assert g.params == 3_600_000_000


def test_object_tags_never_run() -> None:
    """A tag that would build a Python object is refused before anything runs."""
    text = BASE.replace("name: t", "name: !!python/object/apply:os.system [echo hi]")
    with pytest.raises(SpecError) as info:
        loads_spec(text + "  v: {kind: linear, from: items, out: 2}\noutputs: {v: v}\n")
    assert "is not allowed" in info.value.message


def test_every_case_carries_a_hint() -> None:
    """Every rejection above says what to write instead (the fuzzer counts the same
    over its mutants)."""
    assert all(c[-1] for c in CASES), [c[0] for c in CASES if not c[-1]]
