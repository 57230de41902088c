"""Sparsemax, entmax-1.5 and top-k attention against references from their definitions."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402


def _bisect(z: torch.Tensor, alpha: float) -> torch.Tensor:
    """α-entmax of one row from its definition, τ found by bisection:
    p = max((α-1) z - τ, 0)^(1/(α-1)) summing to 1 (α = 2: sparsemax; 1.5: entmax-1.5)."""
    z = (alpha - 1) * z.double()
    lo, hi = z.max() - 1, z.max()
    for _ in range(200):
        tau = (lo + hi) / 2
        if (torch.clamp(z - tau, min=0) ** (1 / (alpha - 1))).sum() > 1:
            lo = tau
        else:
            hi = tau
    return (torch.clamp(z - (lo + hi) / 2, min=0) ** (1 / (alpha - 1))).float()


def test_sparse_normalisers_match_their_definitions_with_padding() -> None:
    """Every row of every normaliser equals its definition over the real items; 0 on pads."""
    torch.manual_seed(0)
    d, n, lengths = 16, 6, [6, 4, 2]
    wq, bq, wk, bk = (torch.randn(d, d) * 0.5, torch.randn(d), torch.randn(d, d) * 0.5,
                      torch.randn(d))
    model = compile_mechanism("sparse_normalisers")
    load_weights(model, {"nodes.q.proj.weight": wq, "nodes.q.proj.bias": bq,
                         "nodes.k.proj.weight": wk, "nodes.k.proj.bias": bk})
    x = torch.randn(3, n, d)
    mask = lengths_mask(lengths, n)
    got = model(x=x, x_mask=mask)
    s = (x @ wq.T + bq) @ (x @ wk.T + bk).transpose(1, 2) / math.sqrt(d)
    for b, real in enumerate(lengths):
        for i in range(n):
            row = s[b, i, :real]
            want = {"softmax": row.softmax(-1), "sparsemax": _bisect(row, 2.0),
                    "entmax": _bisect(row, 1.5)}
            top = row.topk(2)
            want["topk"] = torch.zeros(real).index_put((top.indices,), top.values.softmax(-1))
            for name, w in want.items():
                torch.testing.assert_close(got[name][b, i, :real], w, **TOL)
                assert (got[name][b, i, real:] == 0).all()
        z = got["entmax"][b, :, :real] @ x[b, :real]
        torch.testing.assert_close(got["z"][b], z, **TOL)
    assert (got["sparsemax"] == 0).sum() > (got["softmax"] == 0).sum()
