"""The hoisting pass: which nodes of a loop body run once, at each step, or after the
steps; and that the model it gives equals the one compiled without it."""

from __future__ import annotations

from pathlib import Path

import pytest

import attngraph
from attngraph.passes.hoist import hoist_invariants

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent

DECODER = """
attngraph: 1
name: decoder
dims: {vocab: 9, e: 6, h: 8, a: 5}
inputs:
  source: {type: vectors, dim: h}
  target: {type: labels, per_item: true, length: T, classes: vocab}
blocks:
  step:
    inputs: [enc, state, y]
    nodes:
      y_emb:  {kind: embedding, from: y, dim: e, vocab: vocab}
      keys:   {kind: linear, from: enc, out: h, act: tanh}
      score:  {kind: scorer, fn: additive, query: state, key: keys, hidden: a}
      alpha:  {kind: softmax, scores: score}
      ctx:    {kind: readout, weights: alpha, values: enc}
      inp:    {kind: concat, from: [y_emb, ctx]}
      next:   {kind: rnn, cell: gru, from: inp, hidden: h, init: state}
      out:    {kind: concat, from: [next, ctx]}
      logits: {kind: linear, from: out, out: vocab}
    outputs: {logits: logits, attention: alpha, state: next}
nodes:
  dec:
    kind: loop
    body: step
    steps: target
    inputs: {enc: source}
    carry: {state: {zeros: h, next: state}}
    feed: {y: {from: target, start: 0, feedback: logits}}
outputs: {logits: dec.logits, attention: dec.attention}
"""

BODY = """\
    graph step (block step):
      %enc = input() : [N, 8]  @10:14
      %state = input() : [8]  @10:19
      %y = input() : long[]  @10:26
      %y_emb = embedding(dim=6, vocab=9, from=%y) : [6]  before  @12:15
      %keys = linear(out=8, act=tanh, from=%enc) : [N, 8]  once  @13:15
      %score:key = prepare(of=score, role=key, dim=5, from=%keys) : [N, 5]  once  @14:15
      %score = scorer(fn=additive, hidden=5, query=%state, key=%score:key) : [N]  @14:15
      %alpha = softmax(scores=%score) : [N]  @15:15
      %ctx = readout(weights=%alpha, values=%enc) : [8]  @16:15
      %inp = concat(from.0=%y_emb, from.1=%ctx) : [14]  @17:15
      %next = rnn(hidden=8, from=%inp, init=%state) : [8]; state: [8]  @18:15
      %out = concat(from.0=%next, from.1=%ctx) : [16]  after  @19:15
      %logits = linear(out=9, from=%out) : [9]  after  @20:15
      return logits=%logits, attention=%alpha, state=%next"""


def _without_hoisting() -> attngraph.passes.Pipeline:
    from attngraph.passes import OPTIMIZE, Pipeline

    return Pipeline(tuple(p for p in OPTIMIZE.passes if p.name != "hoist_invariants"))


def test_hoisting_marks_the_stages_golden() -> None:
    """Key projections run once; the additive score's U k is prepared once; the
    embedding of the fed word runs before the steps (on every step's word); the
    output layer, on which no carry depends, runs after them."""
    g = hoist_invariants(attngraph.loads_spec(DECODER))
    dump = str(g)
    assert BODY in dump, dump


def test_nothing_to_hoist_leaves_the_graph() -> None:
    g = attngraph.load_spec(ROOT / "specs" / "multihead_attention.yaml")
    assert hoist_invariants(g) is g


def test_impure_nodes_stay_in_the_steps() -> None:
    """Dropout (and sampling) of an unchanging value is drawn anew at each step."""
    text = DECODER.replace("keys:   {kind: linear, from: enc, out: h, act: tanh}",
                           "drop:   {kind: dropout, from: enc, p: 0.5}\n"
                           "      keys:   {kind: linear, from: drop, out: h, act: tanh}")
    g = hoist_invariants(attngraph.loads_spec(text))
    body = g.node("dec").body
    assert body.node("drop").runs == "step"
    assert body.node("keys").runs == "step"
    assert "score:key" not in body  # its keys change per step: nothing to prepare once


def _loop_specs() -> list[Path]:
    paths = sorted((ROOT / "specs").glob("*.yaml")) + sorted((ROOT / "mechanisms").glob("*.yaml"))
    return [p for p in paths if "kind: loop" in p.read_text(encoding="utf-8")]


def _padded_inputs(graph: attngraph.Graph, seed: int) -> dict[str, torch.Tensor]:
    from attngraph.lower.runtime.examples import random_inputs

    gen = torch.Generator().manual_seed(seed)
    kw = random_inputs(graph, batch=3, length=6, generator=gen)
    for node in graph.inputs:
        if node.spec.type == "positions":  # point at items every example has
            kw[node.id] %= 2
        t = node.types[""]
        if node.spec.type in ("tokens", "vectors") and t.dims and isinstance(t.dims[0], str):
            mask = torch.ones(3, *([6] * sum(isinstance(d, str) for d in t.dims)),
                              dtype=torch.bool)
            mask[1, 4:] = False
            mask[2, 2:] = False
            kw[f"{node.id}_mask"] = mask
    return kw


@pytest.mark.parametrize("path", _loop_specs(), ids=lambda p: p.stem)
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_hoisted_model_equals_the_plain_one(path: Path, mode: str) -> None:
    """Every loop spec: the same state dict, outputs and gradients with and without the
    pass, with padding in the batch; in training (teacher forcing: the fed word's
    embedding runs before the steps, the output layer after them) and in eval
    (greedy feedback: both run at each step)."""
    graph = attngraph.load_spec(path)
    fast = attngraph.compile(graph, seed=0)
    plain = attngraph.compile(graph, seed=0, optimize=_without_hoisting())
    assert list(fast.state_dict()) == list(plain.state_dict())
    for m in (fast, plain):
        m.train(mode == "train")
    kw = _padded_inputs(graph, seed=1)
    outs = []
    for m in (fast, plain):
        torch.manual_seed(3)  # the same draws for a sampling policy
        out = m(**kw)
        loss = sum(v.float().sum() for v in out.values() if v.is_floating_point())
        loss.backward()
        outs.append(out)
    for name in outs[1]:
        torch.testing.assert_close(outs[0][name], outs[1][name], atol=1e-5, rtol=1e-5,
                                   msg=f"output '{name}'")
    grads = dict(plain.named_parameters())
    for name, p in fast.named_parameters():
        q = grads[name]
        if q.grad is None:
            assert p.grad is None or not p.grad.any(), name
            continue
        torch.testing.assert_close(p.grad, q.grad, atol=1e-5, rtol=1e-5, msg=name)


def test_grouped_query_keys_are_prepared_per_query_head() -> None:
    """An additive score with 2 query heads over 1 key head: U k is made once per query
    head, and equals scoring without the pass."""
    text = """
attngraph: 1
name: gqa_decoder
dims: {h: 8, a: 4}
inputs:
  source: {type: vectors, dim: h}
  target: {type: vectors, dim: h, length: T}
blocks:
  step:
    inputs: [enc, state, x]
    nodes:
      q:     {kind: queries, from: state, dim: h, heads: 2}
      k:     {kind: keys, from: enc, dim: 4, heads: 1}
      score: {kind: scorer, fn: additive, query: q, key: k, hidden: a}
      alpha: {kind: softmax, scores: score}
      v:     {kind: values, from: enc, dim: 4, heads: 1}
      ctx:   {kind: readout, weights: alpha, values: v}
      inp:   {kind: concat, from: [x, ctx]}
      next:  {kind: rnn, cell: gru, from: inp, hidden: h, init: state}
    outputs: {state: next, attention: alpha}
nodes:
  dec:
    kind: loop
    body: step
    steps: target
    inputs: {enc: source}
    carry: {state: {zeros: h, next: state}}
    feed: {x: {from: target}}
outputs: {states: dec.state, attention: dec.attention}
"""
    graph = attngraph.loads_spec(text)
    body = hoist_invariants(graph).node("dec").body
    assert body.node("k").runs == "once" and body.node("v").runs == "once"
    assert body.node("score:key").types[""].heads == 2
    fast = attngraph.compile(graph, seed=0)
    plain = attngraph.compile(graph, seed=0, optimize=_without_hoisting())
    kw = _padded_inputs(graph, seed=2)
    a, b = fast(**kw), plain(**kw)
    for name in b:
        torch.testing.assert_close(a[name], b[name], atol=1e-6, rtol=1e-5)


def test_print_after_shows_the_stages(tmp_path: Path, cli) -> None:


    spec = tmp_path / "decoder.yaml"
    spec.write_text(DECODER, encoding="utf-8")
    res = cli("compile", spec, "--print-after", "hoist_invariants", code=0)
    assert "// IR after hoist_invariants" in res.output
    assert "%score:key = prepare(" in res.output and "  after  @" in res.output


def test_default_port_is_the_first_output_when_it_runs_after_the_steps() -> None:
    """A loop's default port is its body's first output (here the logits, which run
    after the steps in training), not the first one made at each step."""
    text = DECODER.replace("outputs: {logits: dec.logits, attention: dec.attention}",
                           "outputs: {first: dec, logits: dec.logits}")
    graph = attngraph.loads_spec(text)
    assert hoist_invariants(graph).node("dec").body.node("logits").runs == "after"
    model = attngraph.compile(graph, seed=0).train()
    out = model(**_padded_inputs(graph, seed=4))
    assert torch.equal(out["first"], out["logits"])
