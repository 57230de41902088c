"""Linformer (Wang et al. 2020) against a reference written from eq. (7), each example
computed alone at its own length n (E_i, F_i cut to their first n columns), with
copied weights; the spec runs the examples padded in one batch."""

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

D, H, K, MAX_LEN = 16, 2, 4, 64


def _weights(seed: int) -> dict[str, torch.Tensor]:
    w = mha_weights(("q", "k", "v"), D, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    w["nodes.e.value"] = torch.randn(1, H, K, MAX_LEN, generator=g) * 0.3
    w["nodes.f.value"] = torch.randn(1, H, K, MAX_LEN, generator=g) * 0.3
    return w


def _reference(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """One example x (1, n, d): head_i = softmax(Q_i (E_i K_i)ᵀ/√d) F_i V_i with
    E_i, F_i the first n columns; heads concatenated, then W_O."""
    n = x.shape[1]
    q, k, v = (heads_of(x, w, c, H) for c in "qkv")  # (1, H, n, d/h)
    e = w["nodes.e.value"][0, :, :, :n]  # (H, k, n)
    f = w["nodes.f.value"][0, :, :, :n]
    ek, fv = e @ k, f @ v  # (1, H, k, d/h)
    p = (q @ ek.transpose(-1, -2) / math.sqrt(D // H)).softmax(-1)  # (1, H, n, k)
    z = (p @ fv).transpose(1, 2).flatten(2)
    return z @ w["nodes.z.out.weight"].T + w["nodes.z.out.bias"]


def test_linformer_matches_the_paper_with_padding() -> None:
    """Each example's outputs at its real positions equal the reference on it alone."""
    model = compile_mechanism("linformer")
    w = _weights(11)
    load_weights(model, w)
    lengths = [9, 6, 2]
    x = torch.randn(3, 9, D, generator=torch.Generator().manual_seed(0))
    got = model(x=x, x_mask=lengths_mask(lengths, 9))["z"]
    for b, n in enumerate(lengths):
        torch.testing.assert_close(got[b, :n], _reference(x[b:b + 1, :n], w)[0], **TOL)


def test_projected_length_is_k_whatever_n() -> None:
    """The attention map is n × k: every query weighs the k projected rows."""
    model = compile_mechanism("linformer")
    for n in (3, 20):
        p = model(x=torch.randn(2, n, D))["attention"]
        assert p.shape == (2, H, n, K)
        torch.testing.assert_close(p.sum(-1), torch.ones(2, H, n), **TOL)
