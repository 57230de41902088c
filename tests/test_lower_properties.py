"""Properties of lowered modules: masks, invariances, gradients, seeds, errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.errors import LoweringError  # noqa: E402

GLOBAL = """
attngraph: 1
name: global_attention
dims: {vocab: 50, d: 16, classes: 3}
inputs:
  tokens: {type: tokens, vocab: vocab}
nodes:
  x:      {kind: items, from: tokens, embed: d}
  score:  {kind: scorer, fn: additive, query: {learned: d}, key: x}
  p:      {kind: softmax, scores: score, fn: FN}
  z:      {kind: readout, weights: p, values: x}
  logits: {kind: linear, from: z, out: classes}
outputs: {logits: logits, attention: p}
"""

ENCODER = """
attngraph: 1
name: encoder
dims: {vocab: 30, d: 16, classes: 3}
inputs:
  tokens: {type: tokens, vocab: vocab}
blocks:
  layer:
    inputs: [h]
    nodes:
      q: {kind: queries, from: h, dim: d, heads: 2}
      k: {kind: keys, from: h, dim: d, heads: 2}
      v: {kind: values, from: h, dim: d, heads: 2}
      s: {kind: scorer, fn: scaled_dot, query: q, key: k}
      p: {kind: softmax, scores: s}
      a: {kind: readout, weights: p, values: v, out: d}
      r: {kind: add, from: [h, a]}
      n: {kind: norm, from: r}
    output: n
nodes:
  x:     {kind: items, from: tokens, embed: d}
  rnn:   {kind: rnn, from: x, hidden: 8, bidirectional: true}
  enc:   {kind: repeat, block: layer, times: 2, from: rnn}
  score: {kind: scorer, fn: mlp, key: enc}
  p:     {kind: softmax, scores: score}
  z:     {kind: readout, weights: p, values: enc}
  out:   {kind: linear, from: z, out: classes}
outputs: {out: out, state: rnn.state}
"""

SELF = """
attngraph: 1
name: self_attention
inputs:
  x: {type: vectors, dim: 8}
nodes:
  q: {kind: queries, from: x, dim: 8, heads: 2}
  k: {kind: keys, from: x, dim: 8, heads: 2}
  v: {kind: values, from: x, dim: 8, heads: 2}
  s: {kind: scorer, fn: FN, query: q, key: k}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: v, out: 8}
  y: {kind: mlp, from: z, hidden: 16, out: 8}
outputs: {y: y, p: p}
"""


def _mask(lengths: list[int], n: int) -> torch.Tensor:
    return torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]


NORMALISERS = ["softmax", "sparsemax", "entmax15", "topk, k: 2"]


@pytest.mark.parametrize("fn", NORMALISERS)
def test_weights_sum_to_one_over_unmasked_items(fn: str) -> None:
    """Every normaliser's weights sum to 1 over real items and are 0 on padding."""
    model = attngraph.compile(GLOBAL.replace("FN", fn), seed=0)
    tokens = torch.randint(0, 50, (4, 7))
    mask = _mask([7, 5, 3, 1], 7)
    p = model(tokens=tokens, tokens_mask=mask)["attention"]
    torch.testing.assert_close(p.sum(-1), torch.ones(4))
    assert (p[~mask] == 0).all()
    assert (p >= 0).all()


@pytest.mark.parametrize("fuse", [True, False])
def test_appending_padding_changes_no_output(fuse: bool) -> None:
    """Padding items appended after the real ones change no output (rnn, heads, repeat)."""
    model = attngraph.compile(ENCODER, seed=0, fuse=fuse).eval()
    tokens = torch.randint(0, 30, (3, 5))
    mask = _mask([5, 4, 2], 5)
    a = model(tokens=tokens, tokens_mask=mask)
    padded = torch.cat([tokens, torch.randint(0, 30, (3, 3))], 1)
    b = model(tokens=padded, tokens_mask=torch.cat([mask, torch.zeros(3, 3, dtype=bool)], 1))
    torch.testing.assert_close(a["out"], b["out"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(a["state"], b["state"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn", ["scaled_dot", "dot", "general", "additive", "cosine"])
def test_self_attention_without_positions_is_permutation_equivariant(fn: str) -> None:
    """Permuting the items of self-attention permutes its outputs and weights alike."""
    model = attngraph.compile(SELF.replace("FN", fn), seed=0)
    x = torch.randn(2, 6, 8)
    perm = torch.randperm(6)
    a, b = model(x=x), model(x=x[:, perm])
    torch.testing.assert_close(b["y"], a["y"][:, perm], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b["p"], a["p"][:, :, perm][:, :, :, perm], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fn", NORMALISERS)
def test_all_masked_row_gives_zero_weights_not_nan(fn: str) -> None:
    """A row whose items are all padding gets zero weights; nothing is NaN, nor its grads."""
    model = attngraph.compile(GLOBAL.replace("FN", fn), seed=0)
    tokens = torch.randint(0, 50, (2, 4))
    mask = torch.tensor([[True, True, False, False], [False] * 4])
    out = model(tokens=tokens, tokens_mask=mask)
    assert (out["attention"][1] == 0).all()
    assert torch.isfinite(out["logits"]).all()
    out["logits"].sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


@pytest.mark.parametrize("fuse", [True, False])
def test_fully_masked_causal_window_rows_are_zero(fuse: bool) -> None:
    """Fused and explicit paths both give zeros (not NaN) for rows with nothing to attend."""
    spec = MASKED.replace("MASK", "{causal: true, window: 1}")
    model = attngraph.compile(spec, seed=0, fuse=fuse)
    x = torch.randn(2, 4, 8)
    mask = torch.tensor([[True, False, False, False], [True] * 4])
    z = model(x=x, x_mask=mask)["z"]
    assert torch.isfinite(z).all()
    # queries 2 and 3 of row 0 see only padded items (causal window of 1)
    assert (z[0, 2:] == model.nodes.z.out.bias).all()


MASKED = """
attngraph: 1
name: masked
inputs:
  x: {type: vectors, dim: 8}
nodes:
  q: {kind: queries, from: x, dim: 8}
  k: {kind: keys, from: x, dim: 8}
  v: {kind: values, from: x, dim: 8}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s, mask: MASK}
  z: {kind: readout, weights: p, values: v, out: 8}
outputs: {z: z}
"""

HUGE = """
attngraph: 1
name: huge
inputs:
  q: {type: vector, dim: 4}
  x: {type: vectors, dim: 4}
nodes:
  s: {kind: scorer, fn: dot, query: q, key: x}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x}
outputs: {z: z, p: p, s: s}
"""


def test_huge_scores_stay_finite() -> None:
    """Scores around 1e4 give finite weights, outputs and gradients."""
    model = attngraph.compile(HUGE, seed=0)
    q = torch.full((2, 4), 50.0, requires_grad=True)
    x = torch.randn(2, 5, 4) * 50
    out = model(q=q, x=x, x_mask=_mask([5, 3], 5))
    assert out["s"].abs().max() > 1e3
    assert torch.isfinite(out["p"]).all() and torch.isfinite(out["z"]).all()
    out["z"].sum().backward()
    assert torch.isfinite(q.grad).all()


DETACH = """
attngraph: 1
name: detached
dims: {vocab: 20, d: 8}
inputs:
  tokens: {type: tokens, vocab: vocab}
nodes:
  x:      {kind: items, from: tokens, embed: d}
  enc:    {kind: linear, from: x, out: d, act: tanh}
  score:  {kind: scorer, fn: additive, query: {learned: d}, key: {ref: enc, detach: true}}
  p:      {kind: softmax, scores: score}
  z:      {kind: readout, weights: p, values: x}
  logits: {kind: linear, from: z, out: 2}
outputs: {logits: logits}
"""


def test_gradients_reach_every_parameter_except_across_detach() -> None:
    """Every parameter gets a nonzero gradient, except those reached only through a
    detach edge, whose gradient is exactly zero."""
    model = attngraph.compile(DETACH, seed=0)
    model(tokens=torch.randint(0, 20, (3, 6)))["logits"].pow(2).sum().backward()
    for name, p in model.named_parameters():
        if name.startswith("nodes.enc."):
            assert p.grad is None or (p.grad == 0).all(), name
        else:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    # without the detach the same parameters do learn
    model = attngraph.compile(DETACH.replace("{ref: enc, detach: true}", "enc"), seed=0)
    model(tokens=torch.randint(0, 20, (3, 6)))["logits"].pow(2).sum().backward()
    assert model.nodes.enc.weight.grad.abs().sum() > 0


def test_same_seed_same_state_dict_and_global_rng_untouched() -> None:
    """compile(seed=s) twice gives equal state dicts, another seed differs, and the
    global RNG continues as if compile had not run."""
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a = attngraph.compile(ENCODER, seed=7).state_dict()
    after = torch.rand(3)
    b = attngraph.compile(ENCODER, seed=7).state_dict()
    c = attngraph.compile(ENCODER, seed=8).state_dict()
    torch.testing.assert_close(after, expected)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_repeat_rounds_share_parameters_only_when_asked() -> None:
    """repeat with times 2 holds two parameter sets; share: true holds one."""
    sep = attngraph.compile(ENCODER, seed=0)
    shared = attngraph.compile(ENCODER.replace("times: 2,", "times: 2, share: true,"), seed=0)
    n_sep = sum(p.numel() for p in sep.nodes.enc.parameters())
    n_shared = sum(p.numel() for p in shared.nodes.enc.parameters())
    assert n_sep == 2 * n_shared
    assert "nodes.enc.rounds.1.nodes.a.out.weight" in sep.state_dict()


def test_parameter_count_matches_shape_inference() -> None:
    """The module has exactly the parameters counted by shape inference."""
    g = attngraph.loads_spec(ENCODER)
    model = attngraph.compile(g, seed=0)
    assert sum(p.numel() for p in model.parameters()) == g.params


def test_runtime_error_names_node_and_line() -> None:
    """A shape error at run time is a LoweringError naming the node and its YAML line
    (here a module whose weight was replaced by one of the wrong size)."""
    model = attngraph.compile(SELF.replace("FN", "dot"), seed=0)
    model.nodes["y"].net[0].weight.data = torch.randn(16, 7)
    with pytest.raises(LoweringError) as exc:
        model(x=torch.randn(2, 5, 8))
    assert "node 'y'" in exc.value.message
    assert exc.value.loc.line == SELF.splitlines().index(
        "  y: {kind: mlp, from: z, hidden: 16, out: 8}") + 1


def test_missing_input_is_a_located_error() -> None:
    """Calling the model without a declared input names that input."""
    model = attngraph.compile(SELF.replace("FN", "dot"), seed=0)
    with pytest.raises(LoweringError, match="needs input 'x'"):
        model()


def test_torch_compile_fullgraph_runs() -> None:
    """torch.compile(fullgraph=True) traces a masked multi-head encoder without graph
    breaks (eager backend: no C compiler needed) and gives the same numbers."""
    model = attngraph.compile(ENCODER.replace("rnn:   {kind: rnn, from: x, hidden: 8, "
                                              "bidirectional: true}", "rnn:   {kind: linear, "
                                              "from: x, out: d}").replace(
        ", state: rnn.state", ""), seed=0).eval()
    tokens = torch.randint(0, 30, (2, 5))
    mask = _mask([5, 3], 5)
    want = model(tokens=tokens, tokens_mask=mask)["out"]
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    got = compiled(tokens=tokens, tokens_mask=mask)["out"]
    torch.testing.assert_close(got, want)
