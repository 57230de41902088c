"""Stick-breaking attention (Tan et al. 2024) against the paper's definition, computed
directly as a product (not in log space), with copied weights and padding."""

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


def _reference(x: torch.Tensor, w: dict[str, torch.Tensor]) -> tuple[torch.Tensor,
                                                                      torch.Tensor]:
    """A_ij = β_ij Π_{j<k<i} (1 − β_ik) for j < i, β = σ(q·k/√d); o_i = Σ_j A_ij v_j;
    heads concatenated, then W_o. Causal: padded items (after the real ones) are never
    reached by a real query."""
    q, k, v = (heads_of(x, w, c, H) for c in "qkv")
    n = x.shape[1]
    beta = torch.sigmoid(q @ k.transpose(-1, -2) / math.sqrt(D // H))  # (B, H, N, N)
    a = torch.zeros_like(beta)
    for i in range(n):
        for j in range(i):
            left = torch.ones_like(beta[..., i, j])
            for kk in range(j + 1, i):
                left = left * (1 - beta[..., i, kk])
            a[..., i, j] = beta[..., i, j] * left
    z = (a @ v).transpose(1, 2).flatten(2)
    return z @ w["nodes.z.out.weight"].T + w["nodes.z.out.bias"], a


def test_stick_breaking_matches_the_paper_with_padding() -> None:
    """Outputs and weights at real positions equal the reference's."""
    model = compile_mechanism("stick_breaking")
    w = mha_weights(("q", "k", "v"), D, seed=2)
    load_weights(model, w)
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(4))
    mask = lengths_mask([7, 5, 2], 7)
    got = model(x=x, x_mask=mask)
    want, a = _reference(x, w)
    torch.testing.assert_close(got["z"][mask], want[mask], **TOL)
    for b, n in enumerate([7, 5, 2]):
        torch.testing.assert_close(got["attention"][b, :, :n, :n], a[b, :, :n, :n], **TOL)


def test_the_first_query_reads_nothing_and_weights_never_exceed_one() -> None:
    """No item before the first: its weights are 0; a stick's pieces sum to at most 1."""
    model = compile_mechanism("stick_breaking")
    x = torch.randn(2, 6, D)
    a = model(x=x)["attention"]
    assert torch.all(a[:, :, 0] == 0)
    assert torch.all(a.sum(-1) <= 1 + 1e-6)
    assert torch.all(torch.triu(a) == 0)
