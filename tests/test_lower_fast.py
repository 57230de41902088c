"""Fast paths of the lowering compute the textbook formulas."""

from __future__ import annotations

import pytest
import torch

from attngraph.lower.rules.scorers import Additive


@pytest.mark.parametrize("heads", [None, 3])
@pytest.mark.parametrize("batch", [2, 3, 5])
def test_additive_scorer_matches_formula(heads: int | None, batch: int) -> None:
    """vᵀ tanh(W q + U k + b) per pair and per aligned position, with and without
    heads, for batch sizes equal to and different from the head count."""
    torch.manual_seed(batch)
    mod = Additive(6, 5, 7, heads, None)
    with torch.no_grad():
        mod.b.normal_()
    lead = (batch, heads) if heads else (batch,)
    q, k = torch.randn(*lead, 4, 6), torch.randn(*lead, 4, 5)
    w = mod.W if heads else mod.W.unsqueeze(0)
    u = mod.U if heads else mod.U.unsqueeze(0)
    b = mod.b if heads else mod.b.unsqueeze(0)
    v = mod.v if heads else mod.v.unsqueeze(0)
    qh = q if heads else q.unsqueeze(1)
    kh = k if heads else k.unsqueeze(1)
    ref = torch.einsum(
        "hx,bhmnx->bhmn", v,
        torch.tanh(torch.einsum("bhmd,hdx->bhmx", qh, w)[:, :, :, None]
                   + torch.einsum("bhnd,hdx->bhnx", kh, u)[:, :, None] + b[None, :, None, None]),
    )
    if not heads:
        ref = ref.squeeze(1)
    torch.testing.assert_close(mod.all(q, k), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mod.aligned(q, k), torch.diagonal(ref, dim1=-2, dim2=-1),
                               atol=1e-5, rtol=1e-5)


MHSA = """
attngraph: 1
name: mhsa
dims: {d: 12}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q: {kind: queries, from: x, dim: d, heads: 3}
  k: {kind: keys, from: x, dim: d, heads: 3}
  v: {kind: values, from: x, dim: 6, heads: 3}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: v, combine: mean}
outputs: {z: z}
"""


def test_projections_of_one_value_share_a_matmul() -> None:
    """Queries, keys and values of the same input run as one stacked linear whose
    results (and gradients) equal each node's own projection."""
    import attngraph
    from attngraph.lower.runtime.module import Runtime

    text = MHSA.replace("dim: 6, heads: 3}", "dim: d, heads: 3}")
    model = attngraph.compile(text, seed=0)
    assert model.groups == {"q": ("q", "k", "v")}
    assert [st[0] for st in model.schedule] == ["q", "z"]
    x = torch.randn(2, 7, 12, requires_grad=True)
    out = model(x=x)["z"]
    rt = Runtime(batch=2)
    q, k, v = (model.nodes[n]({"from": x}, rt) for n in "qkv")
    ref = model.nodes["z"]({"query": q, "key": k, "values": v}, rt)
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=1e-6)
    g_out = torch.autograd.grad(out.sum(), x)[0]
    g_ref = torch.autograd.grad(ref.sum(), x)[0]
    torch.testing.assert_close(g_out, g_ref, atol=1e-6, rtol=1e-6)


def test_a_stacked_projection_kept_without_autograd_follows_its_weights() -> None:
    """Without autograd the stacked weights are kept between calls (decoding re-runs
    them every token); an optimiser step or ``load_state_dict`` changes a weight in
    place, and the next call uses the new weights, equal to a fresh model's."""
    import attngraph

    text = MHSA.replace("dim: 6, heads: 3}", "dim: d, heads: 3}")
    model = attngraph.compile(text, seed=0).eval()
    other = attngraph.compile(text, seed=1).eval()
    x = torch.randn(2, 7, 12)
    with torch.no_grad():
        first = model(x=x)["z"]
        torch.testing.assert_close(model(x=x)["z"], first)  # the kept stack
        model.load_state_dict(other.state_dict())
        torch.testing.assert_close(model(x=x)["z"], other(x=x)["z"], atol=0, rtol=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss = model(x=x)["z"].square().sum()
    loss.backward()
    opt.step()
    fresh = attngraph.compile(text, seed=0).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(model(x=x)["z"], fresh(x=x)["z"], atol=0, rtol=0)
        assert not torch.allclose(model(x=x)["z"], other(x=x)["z"])


def test_projection_groups_need_the_same_input_and_bias() -> None:
    """Only projections of the same value with the same input size and bias use are
    stacked; a projection without bias stays apart."""
    import attngraph

    model = attngraph.compile(MHSA.replace("heads: 3}", "heads: 3, bias: false}", 3)
                              .replace("heads: 3, bias: false}", "heads: 3}", 2), seed=0)
    assert model.groups == {"q": ("q", "k")}
    assert model(x=torch.randn(2, 5, 12))["z"].shape == (2, 5, 2)  # mean of heads of size 6/3
