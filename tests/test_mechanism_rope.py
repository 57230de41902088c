"""RoPE (Su et al. 2021) against a reference that rotates with 2×2 matrices."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import (  # noqa: E402
    TOL,
    attend,
    compile_mechanism,
    heads_of,
    lengths_mask,
    load_weights,
    mha_weights,
)


def rotate(x: torch.Tensor) -> torch.Tensor:
    """RoFormer eq. (34): pair (2i, 2i+1) at position m times the rotation by m·θ_i."""
    *_, n, d = x.shape
    out = torch.empty_like(x)
    for m in range(n):
        for i in range(d // 2):
            a = m * 10000 ** (-2 * i / d)
            rot = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
            out[..., m, 2 * i:2 * i + 2] = x[..., m, 2 * i:2 * i + 2] @ rot.T
    return out


def test_rope_matches_reference_with_padding() -> None:
    """Causal attention over rotated queries and keys equals the module at real items."""
    d, h, n = 16, 2, 6
    w = mha_weights(("q", "k", "v"), d, seed=2)
    model = compile_mechanism("rope")
    load_weights(model, w)
    x = torch.randn(2, n, d)
    mask = lengths_mask([6, 4], n)
    q, k, v = (heads_of(x, w, c, h) for c in "qkv")
    scores = rotate(q) @ rotate(k).transpose(-1, -2) / math.sqrt(d // h)
    keep = torch.ones(n, n, dtype=torch.bool).tril() & mask[:, None, None, :]
    torch.testing.assert_close(model(x=x, x_mask=mask)["z"][mask],
                               attend(scores, keep, v, w)[mask], **TOL)


def test_rotated_scores_depend_on_relative_position_only() -> None:
    """The same query and key vectors at positions (m, n) and (m+3, n+3) score alike."""
    model = compile_mechanism("rope")
    x = torch.randn(1, 1, 16).expand(1, 8, 16).clone()
    p = model(x=x)["attention"]  # equal items: scores depend on i − j only
    a = p[0, :, 5, 2:6].log() - p[0, :, 5, 5:6].log()  # score differences in row 5
    b = p[0, :, 7, 4:8].log() - p[0, :, 7, 7:8].log()  # the same offsets in row 7
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
