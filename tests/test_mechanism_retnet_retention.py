"""RetNet's parallel retention (Sun et al. 2023) against a reference written from the
paper's equations (5)-(8) and its retention score normalisation, with copied weights;
the decays are the paper's, γ_h = 1 − 2^(−5−h), which the spec computes itself."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

D, H = 32, 4


def _rotate(x: torch.Tensor) -> torch.Tensor:
    """x (B, h, N, d) ⊙ Θ: features (2i, 2i+1) of position n turned by n·θ_i,
    θ_i = 10000^(−2i/d) (RoPE's rotation, the real form of e^{inθ})."""
    n, d = x.shape[-2], x.shape[-1]
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,)
    angle = torch.arange(n, dtype=torch.float32)[:, None] * theta[None, :]  # (N, d/2)
    cos, sin = angle.cos(), angle.sin()
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def _reference(x: torch.Tensor, mask: torch.Tensor, w: dict[str, torch.Tensor],
               gamma: torch.Tensor) -> torch.Tensor:
    """MSR(X) = (swish(X W_G) ⊙ Concat(R̃_h V_h)) W_O, R̃ the normalised retention."""
    b, n, _ = x.shape
    dh = D // H

    def heads(name: str) -> torch.Tensor:
        return (x @ w[f"nodes.{name}.proj.weight"].T).reshape(b, n, H, dh).transpose(1, 2)

    q, k, v = _rotate(heads("q")), _rotate(heads("k")), heads("v")
    # D_nm = γ^(n−m) for n ≥ m, else 0, per head (H, N, N); padded items m weigh 0
    decay = torch.zeros(H, n, n)
    for h in range(H):
        for i in range(n):
            for j in range(i + 1):
                decay[h, i, j] = float(gamma[h]) ** (i - j)
    decay = decay[None] * mask[:, None, None, :]  # (B, H, N, N)
    decay = decay / decay.sum(-1, keepdim=True).sqrt()  # D̃
    r = (q @ k.transpose(-1, -2)) / math.sqrt(dh) * decay  # R = QKᵀ/√d ⊙ D̃
    r = r / r.sum(-1, keepdim=True).abs().clamp(min=1.0)  # R̃
    y = (r @ v).transpose(1, 2).reshape(b, n, D)
    gate = F.silu(x @ w["nodes.g.weight"].T)
    return (gate * y) @ w["nodes.z.weight"].T


def test_retention_matches_the_paper_with_padding() -> None:
    """Outputs at real positions equal the reference, padded examples in the batch."""
    model = compile_mechanism("retnet_retention")
    g = torch.Generator().manual_seed(5)
    w = {f"nodes.{c}.proj.weight": torch.randn(D, D, generator=g) * D ** -0.5 for c in "qkv"}
    w["nodes.g.weight"] = torch.randn(D, D, generator=g) * D ** -0.5
    w["nodes.z.weight"] = torch.randn(D, D, generator=g) * D ** -0.5
    load_weights(model, w)
    gamma = torch.tensor([1 - 2 ** (-5 - h) for h in range(H)])  # the paper's decays
    x = torch.randn(3, 7, D, generator=g)
    mask = lengths_mask([7, 5, 2], 7)
    got = model(x=x, x_mask=mask)["z"]
    torch.testing.assert_close(got[mask], _reference(x, mask, w, gamma)[mask], **TOL)
