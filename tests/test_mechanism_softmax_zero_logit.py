"""Softmax with an extra zero logit (softmax₁) against a reference written from its
definition, with copied weights and padding; and its stability at large scores."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import (  # noqa: E402
    TOL,
    compile_mechanism,
    heads_of,
    lengths_mask,
    load_weights,
    mha_weights,
)

D, H = 16, 2


def _reference(x: torch.Tensor, mask: torch.Tensor, w: dict[str, torch.Tensor]
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """p_ij = exp(s_ij) / (1 + Σ_k exp(s_ik)) over the real items: a softmax over the
    real scores and one more zero logit, whose column is dropped; then z = Σ_j p_ij v_j,
    heads concatenated, W_o."""
    b, n, _ = x.shape
    q, k, v = (heads_of(x, w, c, H) for c in "qkv")
    s = q @ k.transpose(-1, -2) / math.sqrt(D // H)
    s = s.masked_fill(~mask[:, None, None, :], float("-inf"))
    zero = torch.zeros(*s.shape[:-1], 1)
    p = torch.cat([s, zero], -1).softmax(-1)[..., :-1]
    z = (p @ v).transpose(1, 2).reshape(b, n, D)
    return z @ w["nodes.z.out.weight"].T + w["nodes.z.out.bias"], p


def test_softmax_zero_logit_matches_its_definition_with_padding() -> None:
    """Outputs and weights at real positions equal the reference; rows sum below one."""
    model = compile_mechanism("softmax_zero_logit")
    w = mha_weights(("q", "k", "v"), D, seed=11)
    load_weights(model, w)
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(12))
    mask = lengths_mask([7, 4, 1], 7)
    out = model(x=x, x_mask=mask)
    want, p = _reference(x, mask, w)
    torch.testing.assert_close(out["z"][mask], want[mask], **TOL)
    keep = (mask[:, None, :, None] & mask[:, None, None, :]).expand_as(p)
    torch.testing.assert_close(out["attention"][keep], p[keep], **TOL)
    rows = out["attention"].sum(-1)[mask[:, None, :].expand(-1, H, -1)]
    assert (rows < 1).all() and (rows > 0).all()


def test_softmax_zero_logit_is_stable_at_large_scores() -> None:
    """Scores in the hundreds (exp overflows float32) still give the definition's
    weights: finite, and equal to the reference's."""
    model = compile_mechanism("softmax_zero_logit")
    w = mha_weights(("q", "k", "v"), D, seed=13)
    w["nodes.q.proj.weight"] = w["nodes.q.proj.weight"] * 30.0
    w["nodes.k.proj.weight"] = w["nodes.k.proj.weight"] * 30.0
    load_weights(model, w)
    x = torch.randn(2, 5, D, generator=torch.Generator().manual_seed(14))
    mask = lengths_mask([5, 3], 5)
    q, k = heads_of(x, w, "q", H), heads_of(x, w, "k", H)
    assert (q @ k.transpose(-1, -2) / math.sqrt(D // H)).abs().max() > 100
    out = model(x=x, x_mask=mask)
    want, _ = _reference(x, mask, w)
    assert torch.isfinite(out["z"]).all()
    torch.testing.assert_close(out["z"][mask], want[mask], atol=1e-4, rtol=1e-5)
