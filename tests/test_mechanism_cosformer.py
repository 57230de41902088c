"""cosFormer (Qin et al. 2022) against a reference written from the paper's equations,
with copied weights and padding in the batch; and against its linear-time form."""

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
    """O_i = Σ_j s_ij V_j / Σ_j s_ij, s_ij = ReLU(Q_i)·ReLU(K_j) cos(π/2 (i − j)/M), per
    head, over the real j, M each example's length; heads concatenated, then W_o."""
    b, n, _ = x.shape
    q, k, v = (heads_of(x, w, c, H) for c in "qkv")  # (B, H, N, d/h)
    m = mask.sum(-1).to(x.dtype)[:, None, None, None]  # M per example
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    s = torch.relu(q) @ torch.relu(k).transpose(-1, -2) * torch.cos(math.pi / 2 * (i - j) / m)
    s = s * mask[:, None, None, :]
    p = s / s.sum(-1, keepdim=True).clamp_min(1e-6)
    o = (p @ v).transpose(1, 2).reshape(b, n, D)
    return o @ w["nodes.z.out.weight"].T + w["nodes.z.out.bias"], p


def test_cosformer_matches_the_paper_with_padding() -> None:
    """Outputs (and weights) at real positions equal the reference; padded examples in
    the batch."""
    model = compile_mechanism("cosformer")
    w = mha_weights(("q", "k", "v"), D, seed=0)
    load_weights(model, w)
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(1))
    mask = lengths_mask([7, 5, 2], 7)
    out = model(x=x, x_mask=mask)
    want, p = _reference(x, mask, w)
    torch.testing.assert_close(out["z"][mask], want[mask], **TOL)
    keep = mask[:, None, :, None] & mask[:, None, None, :]
    torch.testing.assert_close(out["attention"][keep.expand_as(p)], p[keep.expand_as(p)], **TOL)


def test_cosformer_equals_its_linear_time_decomposition() -> None:
    """cos(a − b) = cos a cos b + sin a sin b (eq. 10): with Q^cos_i = Q'_i cos(πi/2M) and
    so on, O_i = [Q^cos_i Σ_j K^cosᵀ_j V_j + Q^sin_i Σ_j K^sinᵀ_j V_j] / [the same with 1]."""
    model = compile_mechanism("cosformer")
    w = mha_weights(("q", "k", "v"), D, seed=2)
    load_weights(model, w)
    x = torch.randn(2, 6, D, generator=torch.Generator().manual_seed(3))
    mask = lengths_mask([6, 4], 6)
    b, n, _ = x.shape
    q, k, v = (heads_of(x, w, c, H) for c in "qkv")
    m = mask.sum(-1).to(x.dtype)[:, None, None, None]
    angle = math.pi / 2 * torch.arange(n)[None, None, :, None] / m  # (B, 1, N, 1)
    keep = mask[:, None, :, None].to(x.dtype)
    qp, kp = torch.relu(q), torch.relu(k) * keep
    num = (qp * angle.cos()) @ ((kp * angle.cos()).transpose(-1, -2) @ v) \
        + (qp * angle.sin()) @ ((kp * angle.sin()).transpose(-1, -2) @ v)
    den = (qp * angle.cos()) @ (kp * angle.cos()).sum(-2, keepdim=True).transpose(-1, -2) \
        + (qp * angle.sin()) @ (kp * angle.sin()).sum(-2, keepdim=True).transpose(-1, -2)
    o = (num / den.clamp_min(1e-6)).transpose(1, 2).reshape(b, n, D)
    want = o @ w["nodes.z.out.weight"].T + w["nodes.z.out.bias"]
    got = model(x=x, x_mask=mask)["z"]
    torch.testing.assert_close(got[mask], want[mask], **TOL)
