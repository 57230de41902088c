"""Lowered specs against hand-written PyTorch references with copied weights."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import attngraph  # noqa: E402

TOL = {"atol": 1e-5, "rtol": 1e-5}

MHA_SELF = """
attngraph: 1
name: mha_self
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q: {kind: queries, from: x, dim: d, heads: 2}
  k: {kind: keys, from: x, dim: d, heads: 2}
  v: {kind: values, from: x, dim: d, heads: 2}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s, mask: {causal: CAUSAL}}
  z: {kind: readout, weights: p, values: v, out: d}
outputs: {z: z}
"""

MHA_CROSS = """
attngraph: 1
name: mha_cross
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d, length: M}
  mem: {type: vectors, dim: d}
nodes:
  q: {kind: queries, from: x, dim: d, heads: 4}
  k: {kind: keys, from: mem, dim: d, heads: 4}
  v: {kind: values, from: mem, dim: d, heads: 4}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: v, out: d}
outputs: {z: z, attention: p}
"""


def _copy_mha(model: nn.Module, mha: nn.MultiheadAttention, d: int) -> None:
    sd = model.state_dict()
    w, b = mha.in_proj_weight.detach(), mha.in_proj_bias.detach()
    for i, name in enumerate("qkv"):
        sd[f"nodes.{name}.proj.weight"] = w[i * d:(i + 1) * d]
        sd[f"nodes.{name}.proj.bias"] = b[i * d:(i + 1) * d]
    sd["nodes.z.out.weight"] = mha.out_proj.weight.detach()
    sd["nodes.z.out.bias"] = mha.out_proj.bias.detach()
    model.load_state_dict(sd)


def _lengths_mask(lengths: list[int], n: int) -> torch.Tensor:
    return torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_matches_multihead_attention(fuse: bool, causal: bool) -> None:
    """Self-attention with key padding (and causal) masks equals nn.MultiheadAttention."""
    torch.manual_seed(0)
    d, n = 8, 6
    model = attngraph.compile(MHA_SELF.replace("CAUSAL", str(causal).lower()), seed=1,
                              fuse=fuse)
    mha = nn.MultiheadAttention(d, 2, batch_first=True)
    _copy_mha(model, mha, d)
    x = torch.randn(3, n, d)
    mask = _lengths_mask([6, 4, 2], n)
    attn_mask = torch.triu(torch.ones(n, n, dtype=torch.bool), 1) if causal else None
    want, _ = mha(x, x, x, key_padding_mask=~mask, attn_mask=attn_mask, need_weights=False)
    got = model(x=x, x_mask=mask)["z"]
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("fuse", [True, False])
def test_cross_attention_matches_multihead_attention(fuse: bool) -> None:
    """Cross-attention (queries from x, keys/values from a padded memory) equals MHA."""
    torch.manual_seed(0)
    d = 8
    model = attngraph.compile(MHA_CROSS, seed=2, fuse=fuse)
    mha = nn.MultiheadAttention(d, 4, batch_first=True)
    _copy_mha(model, mha, d)
    x, mem = torch.randn(2, 3, d), torch.randn(2, 7, d)
    mask = _lengths_mask([7, 3], 7)
    want, w = mha(x, mem, mem, key_padding_mask=~mask, average_attn_weights=True)
    out = model(x=x, mem=mem, mem_mask=mask)
    torch.testing.assert_close(out["z"], want, **TOL)
    torch.testing.assert_close(out["attention"].mean(1), w, **TOL)


BAHDANAU = """
attngraph: 1
name: bahdanau
inputs:
  s: {type: vector, dim: 6}
  h: {type: vectors, dim: 5}
nodes:
  e: {kind: scorer, fn: additive, query: s, key: h, hidden: 7}
  a: {kind: softmax, scores: e}
  c: {kind: readout, weights: a, values: h}
outputs: {c: c, a: a}
"""


def test_additive_scorer_matches_handwritten_bahdanau() -> None:
    """fn additive is Bahdanau's e_j = vᵀ tanh(W s + U h_j); a = softmax; c = Σ a_j h_j."""
    torch.manual_seed(0)
    W, U, v = nn.Linear(6, 7, bias=False), nn.Linear(5, 7), nn.Linear(7, 1, bias=False)
    s, h = torch.randn(3, 6), torch.randn(3, 4, 5)
    mask = _lengths_mask([4, 2, 3], 4)
    e = v(torch.tanh(W(s)[:, None, :] + U(h))).squeeze(-1)
    a = torch.softmax(e.masked_fill(~mask, float("-inf")), -1)
    c = (a[:, :, None] * h).sum(1)
    model = attngraph.compile(BAHDANAU, seed=0)
    model.load_state_dict({
        "nodes.e.W": W.weight.detach().T, "nodes.e.U": U.weight.detach().T,
        "nodes.e.b": U.bias.detach(), "nodes.e.v": v.weight.detach()[0],
    })
    out = model(s=s, h=h, h_mask=mask)
    torch.testing.assert_close(out["a"], a, **TOL)
    torch.testing.assert_close(out["c"], c, **TOL)


LUONG = """
attngraph: 1
name: luong
inputs:
  ht: {type: vector, dim: 6}
  hs: {type: vectors, dim: 5}
nodes:
  score: {kind: scorer, fn: general, query: ht, key: hs}
  a: {kind: softmax, scores: score}
  c: {kind: readout, weights: a, values: hs}
outputs: {c: c, a: a}
"""


def test_general_scorer_matches_handwritten_luong() -> None:
    """fn general is Luong's score(h_t, h̄_s) = h_tᵀ W_a h̄_s."""
    torch.manual_seed(0)
    Wa = nn.Linear(5, 6, bias=False)
    ht, hs = torch.randn(2, 6), torch.randn(2, 4, 5)
    a = torch.softmax((Wa(hs) * ht[:, None, :]).sum(-1), -1)
    c = torch.einsum("bn,bnd->bd", a, hs)
    model = attngraph.compile(LUONG, seed=0)
    model.load_state_dict({"nodes.score.W": Wa.weight.detach()})
    out = model(ht=ht, hs=hs)
    torch.testing.assert_close(out["a"], a, **TOL)
    torch.testing.assert_close(out["c"], c, **TOL)


GAT = """
attngraph: 1
name: gat
inputs:
  g: {type: graph, dim: 5}
nodes:
  h: {kind: items, from: g, dim: 8, bias: false}
  q: {kind: queries, from: h, proj: identity, heads: 2}
  k: {kind: keys, from: h, proj: identity, heads: 2}
  v: {kind: values, from: h, proj: identity, heads: 2}
  e: {kind: scorer, fn: gat, query: q, key: k}
  alpha: {kind: softmax, scores: e, mask: {adjacency: g}}
  out: {kind: readout, weights: alpha, values: v, combine: concat}
outputs: {out: out, alpha: alpha}
"""


def _gat_reference(x: torch.Tensor, adj: torch.Tensor, W: torch.Tensor, a_l: torch.Tensor,
                   a_r: torch.Tensor, heads: int) -> torch.Tensor:
    """A graph attention layer written out: LeakyReLU(0.2) over neighbours, heads concat."""
    b, n, _ = x.shape
    wh = (x @ W.T).reshape(b, n, heads, -1)  # (B, N, h, F)
    el = (wh * a_l).sum(-1)  # (B, N, h)
    er = (wh * a_r).sum(-1)
    e = F.leaky_relu(el[:, :, None, :] + er[:, None, :, :], 0.2)  # (B, N_i, N_j, h)
    allowed = (adj | torch.eye(n, dtype=torch.bool))[..., None]
    alpha = torch.softmax(e.masked_fill(~allowed, float("-inf")), dim=2)
    out = torch.einsum("bijh,bjhf->bihf", alpha, wh)
    return out.reshape(b, n, -1)


def test_gat_scorer_matches_handwritten_graph_attention_layer() -> None:
    """fn gat with an adjacency mask and concat heads equals a hand-written GAT layer."""
    torch.manual_seed(0)
    x = torch.randn(2, 6, 5)
    adj = torch.rand(2, 6, 6) > 0.6
    W = torch.randn(8, 5)
    a_l, a_r = torch.randn(2, 4), torch.randn(2, 4)
    model = attngraph.compile(GAT, seed=0)
    model.load_state_dict({"nodes.h.proj.weight": W, "nodes.e.a_q": a_l, "nodes.e.a_k": a_r})
    out = model(g=x, g_adjacency=adj)
    torch.testing.assert_close(out["out"], _gat_reference(x, adj, W, a_l, a_r, 2), **TOL)
