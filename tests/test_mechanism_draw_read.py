"""DRAW's read attention (Gregor et al. 2015) against its equations, written per filter
and pixel, on a non-square image."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, load_weights  # noqa: E402

A, B, N, HID = 9, 7, 3, 10


def _filterbank(g: float, delta: float, var: float, pixels: int) -> torch.Tensor:
    """F[i, a] = exp(−(a − μ_i)²/2σ²) / Z, μ_i = g + (i − N/2 − 0.5) δ, a, i from 1."""
    f = torch.zeros(N, pixels)
    for i in range(1, N + 1):
        mu = g + (i - N / 2 - 0.5) * delta
        row = [math.exp(-((a - mu) ** 2) / (2 * var)) for a in range(1, pixels + 1)]
        f[i - 1] = torch.tensor(row) / (sum(row) + 1e-8)
    return f


def _read(x: torch.Tensor, xhat: torch.Tensor, p: torch.Tensor) -> tuple[torch.Tensor, ...]:
    gx_, gy_, log_var, log_delta, log_gamma = p.tolist()
    gx, gy = (A + 1) / 2 * (gx_ + 1), (B + 1) / 2 * (gy_ + 1)
    delta = (max(A, B) - 1) / (N - 1) * math.exp(log_delta)
    fx = _filterbank(gx, delta, math.exp(log_var), A)
    fy = _filterbank(gy, delta, math.exp(log_var), B)
    gamma = math.exp(log_gamma)
    read = torch.cat([gamma * fy @ x[0] @ fx.T, gamma * fy @ xhat[0] @ fx.T], -1)
    return read[None], fx, fy


def test_draw_read_matches_the_paper() -> None:
    """The read of the image and the error image, and both filterbanks, equal the
    reference for several decoder states (centres off the image included)."""
    torch.manual_seed(0)
    w, b = torch.randn(5, HID) * 0.4, torch.randn(5) * 0.3
    model = compile_mechanism("draw_read")
    load_weights(model, {"nodes.params.weight": w, "nodes.params.bias": b})
    x, xhat, h = torch.rand(4, 1, B, A), torch.randn(4, 1, B, A), torch.randn(4, HID) * 2
    got = model(x=x, xhat=xhat, h=h)
    for k in range(4):
        read, fx, fy = _read(x[k], xhat[k], h[k] @ w.T + b)
        torch.testing.assert_close(got["read"][k], read, **TOL)
        torch.testing.assert_close(got["fx"][k], fx, **TOL)
        torch.testing.assert_close(got["fy"][k], fy, **TOL)
