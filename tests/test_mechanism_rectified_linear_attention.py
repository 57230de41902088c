"""Rectified linear attention (Zhang et al. 2021) against a reference written from the
paper's equations, LN(ReLU(QKᵀ/√d) V) with RMSNorm, with copied weights and padding."""

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


def _weights() -> dict[str, torch.Tensor]:
    w = mha_weights(("q", "k", "v"), D, seed=4)
    g = torch.Generator().manual_seed(6)
    w.pop("nodes.z.out.weight"), w.pop("nodes.z.out.bias")
    w["nodes.n.weight"] = 1.0 + 0.1 * torch.randn(D, generator=g)  # the RMSNorm gain g
    w["nodes.z.weight"] = torch.randn(D, D, generator=g) * D ** -0.5
    w["nodes.z.bias"] = torch.randn(D, generator=g) * 0.1
    return w


def _reference(x: torch.Tensor, mask: torch.Tensor, w: dict[str, torch.Tensor]
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """α = ReLU(q·k/√d) per head over the real items; z = α V, heads concatenated;
    RMSNorm(z) = z / √(mean z² + ε) ⊙ g; then W_o."""
    b, n, _ = x.shape
    q, k, v = (heads_of(x, w, c, H) for c in "qkv")
    alpha = torch.relu(q @ k.transpose(-1, -2) / math.sqrt(D // H))
    alpha = alpha * mask[:, None, None, :]
    z = (alpha @ v).transpose(1, 2).reshape(b, n, D)
    eps = torch.finfo(z.dtype).eps
    z = z / torch.sqrt(z.pow(2).mean(-1, keepdim=True) + eps) * w["nodes.n.weight"]
    return z @ w["nodes.z.weight"].T + w["nodes.z.bias"], alpha


def test_rela_matches_the_paper_with_padding() -> None:
    """Outputs and weights at real positions equal the reference; the weights have exact
    zeros and do not sum to one."""
    model = compile_mechanism("rectified_linear_attention")
    w = _weights()
    load_weights(model, w)
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(8))
    mask = lengths_mask([7, 4, 1], 7)
    out = model(x=x, x_mask=mask)
    want, alpha = _reference(x, mask, w)
    torch.testing.assert_close(out["z"][mask], want[mask], **TOL)
    keep = (mask[:, None, :, None] & mask[:, None, None, :]).expand_as(alpha)
    torch.testing.assert_close(out["attention"][keep], alpha[keep], **TOL)
    real = out["attention"][keep]
    assert (real == 0).any() and (real > 0).any()
    assert not torch.allclose(out["attention"][0].sum(-1), torch.ones(H, 7))
