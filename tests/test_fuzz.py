"""Property test: mutated specs give the project's own error or success, never a crash."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attngraph.errors import AttnGraphError
from attngraph.pipeline import loads_spec

SEEDS = [
    """attngraph: 1
name: mhsa
dims: {d: 16, vocab: 50, classes: 3}
inputs:
  tokens: {type: tokens, vocab: vocab}
  other: {type: vectors, dim: d}
nodes:
  x: {kind: items, from: tokens, embed: d}
  c: {kind: position, from: x, dim: d}
  xc: {kind: add, from: [x, c]}
  q: {kind: queries, from: xc, heads: 4}
  k: {kind: keys, from: xc, heads: 4}
  v: {kind: values, from: xc, heads: 4}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s, mask: {causal: true, window: 3}}
  z: {kind: readout, weights: p, values: v, combine: concat, out: d}
  g: {kind: scorer, fn: additive, query: {learned: d}, key: {ref: z, detach: true}}
  w: {kind: softmax, scores: g}
  r: {kind: readout, weights: w, values: z}
  pol: {kind: policy, scores: g, estimator: gumbel}
  logits: {kind: mlp, from: r, hidden: 8, out: classes}
outputs: {logits: logits, attention: p, pick: pol.log_prob}
""",
    """attngraph: 1
name: dec
dims: {d: 8, vocab: 20}
inputs:
  src: {type: tokens, vocab: vocab}
  tgt: {type: tokens, vocab: vocab, length: T}
  gr: {type: graph, dim: d}
blocks:
  step:
    inputs: [y, s, ann]
    nodes:
      e: {kind: embedding, from: y, dim: d, vocab: vocab}
      h: {kind: rnn, from: e, hidden: 16, init: s}
      sc: {kind: scorer, fn: general, query: h.state, key: ann}
      a: {kind: softmax, scores: sc}
      c: {kind: readout, weights: a, values: ann}
      o: {kind: linear, from: c, out: vocab}
    outputs: {logits: o, state: h.state, align: a}
  layer:
    inputs: [h]
    nodes:
      s: {kind: scorer, fn: dot, query: h, key: h}
      p: {kind: softmax, scores: s, mask: {window: 2}}
      z: {kind: readout, weights: p, values: h}
      n: {kind: norm, from: z}
    output: n
nodes:
  x: {kind: items, from: src, embed: d}
  enc: {kind: rnn, from: x, hidden: 8, bidirectional: true}
  dec:
    kind: loop
    body: step
    steps: tgt
    inputs: {ann: enc.out}
    carry: {s: {init: enc.state, next: state}}
    feed: {y: {from: tgt, feedback: logits, start: 1}}
  gx: {kind: items, from: gr}
  stack: {kind: repeat, block: layer, times: 2, from: gx}
  gs: {kind: scorer, fn: dot, query: gx, key: gx}
  gp: {kind: softmax, scores: gs, mask: {adjacency: gr}}
  gz: {kind: readout, weights: gp, values: stack}
outputs: {logits: dec.logits, alignment: dec.align, g: gz}
""",
]

SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**12), st.floats(allow_nan=True),
    st.sampled_from(["d", "x", "q.state", "N", "softmax", "scorer", "all", "aligned", "", "zz",
                     "vocab", "p", "1e9", "tokens", "from", "z.out", "a.b.c", "items"]),
    st.text(max_size=6),
)
VALUES = st.recursive(
    SCALARS,
    lambda kids: st.one_of(st.lists(kids, max_size=3),
                           st.dictionaries(st.sampled_from(
                               ["kind", "from", "ref", "detach", "learned", "dim", "heads",
                                "causal", "x"]), kids, max_size=3)),
    max_leaves=6,
)


def _paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(data: Any, path: tuple, op: str, value: Any) -> Any:
    data = copy.deepcopy(data)
    if not path:
        return value if op == "set" else data
    parent = data
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "set":
        parent[last] = value
    elif op == "rename" and isinstance(parent, dict):
        parent[str(value)] = parent.pop(last)
    return data


def _check(text: str) -> None:
    try:
        loads_spec(text, "fuzz.yaml")
    except AttnGraphError as exc:
        assert exc.diagnostics, "an error must carry at least one diagnostic"
        for d in exc.diagnostics:
            assert d.loc.file == "fuzz.yaml"
            d.format()


@settings(max_examples=1200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_structural_mutations_never_crash(data: st.DataObject) -> None:
    """Deleting, replacing or renaming any part of a valid spec gives success or our error."""
    seed = yaml.safe_load(data.draw(st.sampled_from(SEEDS)))
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(seed)
        path = data.draw(st.sampled_from(paths))
        op = data.draw(st.sampled_from(["delete", "set", "rename"]))
        seed = _mutate(seed, path, op, data.draw(VALUES))
    _check(yaml.safe_dump(seed, sort_keys=False))


@settings(max_examples=800, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(SEEDS), st.integers(0, 4000), st.integers(0, 8),
       st.text(alphabet="{}[]:,-&*!|>'\"#\n \tabcxyz0123.", max_size=8))
def test_text_mutations_never_crash(seed: str, at: int, cut: int, insert: str) -> None:
    """Cutting and splicing characters anywhere gives success or our error, never a crash."""
    at = at % (len(seed) + 1)
    _check(seed[:at] + insert + seed[at + cut:])


def test_seeds_are_valid() -> None:
    """The fuzzing seeds themselves validate, so mutations start from a valid spec."""
    for text in SEEDS:
        loads_spec(text, "seed.yaml")
