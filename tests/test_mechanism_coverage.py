"""Coverage attention (See et al. 2017) against its equations with an LSTM decoder
whose hidden and cell states are carried (nn.LSTMCell)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402
from torch import nn  # noqa: E402

D, H = 8, 6


def _reference(h: torch.Tensor, y: torch.Tensor, p: dict[str, torch.Tensor],
               lstm: nn.LSTMCell) -> tuple[torch.Tensor, ...]:
    """One source h [n, d]: s_t = LSTM(y_t, (s, c)); e = vᵀ tanh(W_h h + W_s s + w_c c^t
    + b); a = softmax(e); h* = Σ a h; c^{t+1} = c^t + a."""
    n = h.shape[0]
    state = (torch.zeros(1, D), torch.zeros(1, D))
    cov = torch.zeros(n)
    ctxs, atts, covs = [], [], []
    for t in range(y.shape[0]):
        state = lstm(y[t][None], state)
        s = state[0][0]
        e = torch.tanh(h @ p["W_h"] + s @ p["W_s"] + cov[:, None] * p["w_c"] + p["b"]) @ p["v"]
        a = e.softmax(0)
        ctxs.append(a @ h)
        atts.append(a)
        covs.append(cov)
        cov = cov + a
    return torch.stack(ctxs), torch.stack(atts), torch.stack(covs)


def test_coverage_attention_matches_reference_with_padding() -> None:
    """Contexts, attention and coverage equal the reference per example; the coverage
    loss Σ min(a, c) computed from the outputs equals the reference's."""
    torch.manual_seed(0)
    lstm = nn.LSTMCell(D, D)
    p = {"W_h": torch.randn(D, H) * 0.3, "W_s": torch.randn(D, H) * 0.3,
         "w_c": torch.randn(H), "b": torch.randn(H), "v": torch.randn(H)}
    run = "nodes.dec.nodes"
    model = compile_mechanism("coverage")
    load_weights(model, {
        f"{run}.s.cell.weight_ih": lstm.weight_ih, f"{run}.s.cell.weight_hh": lstm.weight_hh,
        f"{run}.s.cell.bias_ih": lstm.bias_ih, f"{run}.s.cell.bias_hh": lstm.bias_hh,
        f"{run}.e.W": p["W_s"], f"{run}.e.U": p["W_h"], f"{run}.e.V": p["w_c"][None],
        f"{run}.e.b": p["b"], f"{run}.e.v": p["v"]})
    src, tgt = torch.randn(2, 6, D), torch.randn(2, 5, D)
    lengths = [6, 3]
    got = model(src=src, tgt=tgt, src_mask=lengths_mask(lengths, 6))
    for b, n in enumerate(lengths):
        ctx, att, cov = _reference(src[b, :n], tgt[b], p, lstm)
        torch.testing.assert_close(got["context"][b], ctx, **TOL)
        torch.testing.assert_close(got["attention"][b, :, :n], att, **TOL)
        torch.testing.assert_close(got["coverage"][b, :, :n], cov, **TOL)
        loss = torch.minimum(got["attention"][b], got["coverage"][b]).sum()
        torch.testing.assert_close(loss, torch.minimum(att, cov).sum(), **TOL)
