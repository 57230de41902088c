"""Differential attention (Ye et al. 2024) against a reference written from the paper's
equations (1)-(2), with copied weights and padding."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

D, H, DH = 32, 2, 8  # model size, heads, d (the size of Q1, Q2, K1, K2 per head)


def _weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w = {f"nodes.{c}.proj.weight": torch.randn(H * DH, D, generator=g) * D ** -0.5
         for c in ("q1", "q2", "k1", "k2")}
    w["nodes.v.proj.weight"] = torch.randn(D, D, generator=g) * D ** -0.5
    w["nodes.z.out.weight"] = torch.randn(D, D, generator=g) * D ** -0.5
    for c in ("lq1", "lk1", "lq2", "lk2"):
        w[f"nodes.{c}.value"] = torch.randn(1, DH, generator=g) * 0.5
    return w


def _reference(x: torch.Tensor, mask: torch.Tensor, w: dict[str, torch.Tensor]) -> tuple[
        torch.Tensor, torch.Tensor]:
    """(softmax(Q1K1ᵀ/√d) − λ softmax(Q2K2ᵀ/√d)) V per head, causal, over the real items;
    λ = exp(λq1·λk1) − exp(λq2·λk2) + λ_init, λ_init = 0.8 − 0.6 exp(−0.3 (l − 1)), l = 1;
    heads concatenated, then W_O."""
    b, n, _ = x.shape

    def heads(name: str, size: int) -> torch.Tensor:
        y = x @ w[f"nodes.{name}.proj.weight"].T
        return y.reshape(b, n, H, size).transpose(1, 2)  # (B, H, N, size)

    q1, q2, k1, k2 = (heads(c, DH) for c in ("q1", "q2", "k1", "k2"))
    v = heads("v", 2 * DH)
    keep = torch.ones(n, n, dtype=torch.bool).tril() & mask[:, None, None, :]

    def softmax(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        s = q @ k.transpose(-1, -2) / math.sqrt(DH)
        return s.masked_fill(~keep, float("-inf")).softmax(-1)

    lam_init = 0.8 - 0.6 * math.exp(-0.3 * (1 - 1))
    lam = (torch.exp((w["nodes.lq1.value"] * w["nodes.lk1.value"]).sum())
           - torch.exp((w["nodes.lq2.value"] * w["nodes.lk2.value"]).sum()) + lam_init)
    a = softmax(q1, k1) - lam * softmax(q2, k2)
    z = (a @ v).transpose(1, 2).reshape(b, n, D)
    return z @ w["nodes.z.out.weight"].T, a


def test_differential_attention_matches_the_paper_with_padding() -> None:
    """Outputs and weights at real positions equal the reference's."""
    model = compile_mechanism("differential_attention")
    w = _weights(7)
    load_weights(model, w)
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(1))
    lengths = [7, 5, 2]
    mask = lengths_mask(lengths, 7)
    got = model(x=x, x_mask=mask)
    want, a = _reference(x, mask, w)
    torch.testing.assert_close(got["z"][mask], want[mask], **TOL)
    for b, n in enumerate(lengths):
        torch.testing.assert_close(got["attention"][b, :, :n, :n], a[b, :, :n, :n], **TOL)


def test_lambda_starts_near_lambda_init() -> None:
    """With λ_q·λ_k near 0 (the paper's N(0, 0.1) initialisation), λ ≈ λ_init = 0.2 for
    the first layer: each row of A1 − λA2 sums to about 1 − 0.2."""
    model = compile_mechanism("differential_attention")
    a = model(x=torch.randn(2, 5, D))["attention"]
    torch.testing.assert_close(a.sum(-1), torch.full_like(a.sum(-1), 0.8), atol=0.05, rtol=0)
