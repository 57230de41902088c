"""Location-aware attention (Chorowski et al. 2015) against its equations in a loop."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402
from torch import nn  # noqa: E402

D, K, WIDTH, H = 8, 4, 5, 6


def _reference(h: torch.Tensor, y: torch.Tensor, n: int, p: dict[str, torch.Tensor],
               gru: nn.GRUCell) -> tuple[torch.Tensor, torch.Tensor]:
    """One utterance of n frames h [n, d]: f = F * α_{i-1}, e = wᵀ tanh(W s + V h + U f
    + b), α = softmax(e), g = Σ α h, s = GRU([y ‖ g], s)."""
    s = torch.zeros(D)
    prev = torch.zeros(n)
    states, alignments = [], []
    for i in range(y.shape[0]):
        f = F.conv1d(prev[None, None], p["F"], padding=WIDTH // 2)[0].T  # (n, K)
        e = torch.tanh(s @ p["W"] + h @ p["V"] + f @ p["U"] + p["b"]) @ p["w"]
        alpha = e.softmax(0)
        g = alpha @ h
        s = gru(torch.cat([y[i], g])[None], s[None])[0]
        prev = alpha
        states.append(s)
        alignments.append(alpha)
    return torch.stack(states), torch.stack(alignments)


def test_location_aware_attention_matches_reference_with_padding() -> None:
    """States and alignments equal the reference for each utterance, padded frames 0."""
    torch.manual_seed(0)
    gru = nn.GRUCell(2 * D, D)
    p = {"F": torch.randn(K, 1, WIDTH), "W": torch.randn(D, H) * 0.3,
         "V": torch.randn(D, H) * 0.3, "U": torch.randn(K, H) * 0.3, "b": torch.randn(H),
         "w": torch.randn(H)}
    run = "nodes.dec.nodes"
    model = compile_mechanism("location_aware")
    load_weights(model, {
        f"{run}.f.conv.weight": p["F"], f"{run}.e.W": p["W"], f"{run}.e.U": p["V"],
        f"{run}.e.V": p["U"], f"{run}.e.b": p["b"], f"{run}.e.v": p["w"],
        f"{run}.s2.cell.weight_ih": gru.weight_ih, f"{run}.s2.cell.weight_hh": gru.weight_hh,
        f"{run}.s2.cell.bias_ih": gru.bias_ih, f"{run}.s2.cell.bias_hh": gru.bias_hh})
    src, tgt = torch.randn(3, 7, D), torch.randn(3, 4, D)
    lengths = [7, 5, 2]
    got = model(src=src, tgt=tgt, src_mask=lengths_mask(lengths, 7))
    for b, n in enumerate(lengths):
        states, alignments = _reference(src[b, :n], tgt[b], n, p, gru)
        torch.testing.assert_close(got["states"][b], states, **TOL)
        torch.testing.assert_close(got["alignment"][b, :, :n], alignments, **TOL)
        assert (got["alignment"][b, :, n:] == 0).all()
