"""The rotary node's two forms: in eager mode a float32 or float64 input whose pairs lie
side by side turns each pair (a, b) as the complex number a + ib times cos + i·sin; the
real form (the pairs swapped, two multiplies and a sum) stays for half precisions,
views a complex view cannot read, and tracing. Both give the same rotation, outputs
and gradients, on the strided views a stacked projection hands the rotary node."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.lower.rules import relative  # noqa: E402
from attngraph.lower.rules.relative import Rotary  # noqa: E402

SPEC = """attngraph: 1
name: rope
dims: {d: 32}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q: {kind: queries, from: x, heads: 2}
  k: {kind: keys, from: x, heads: 2}
  v: {kind: values, from: x, heads: 2}
  rq: {kind: rotary, from: q, base: 500}
  rk: {kind: rotary, from: k, base: 500}
  s: {kind: scorer, fn: scaled_dot, query: rq, key: rk}
  p: {kind: softmax, scores: s, mask: {causal: true}}
  z: {kind: readout, weights: p, values: v, out: d}
outputs: {z: z, attention: p}
"""


def _rotary() -> Rotary:
    model = attngraph.compile(SPEC, seed=0)
    return next(m for m in model.modules() if isinstance(m, Rotary))


def _views(dtype: torch.dtype) -> torch.Tensor:
    """(B, h, N, d/h) queries as the stacked projection gives them: a strided view."""
    g = torch.Generator().manual_seed(3)
    y = torch.randn(3, 9, 3 * 32, generator=g, dtype=torch.float64).to(dtype)
    return y[..., :32].unflatten(-1, (2, 16)).transpose(1, 2)


def _real_form(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(relative, "_as_complex", lambda v: False)


def _run(rot: Rotary, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    v = v.detach().requires_grad_()
    out = rot({"from": v}, None)  # type: ignore[arg-type]
    (out * torch.linspace(-1, 1, out.shape[-1], dtype=out.dtype)).sum().backward()
    assert v.grad is not None
    return out.detach(), v.grad


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-6), (torch.float64, 1e-12)])
def test_the_complex_form_equals_the_real_one(dtype: torch.dtype, tol: float,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """On a strided view of a stacked projection the complex form is taken and gives
    the real form's rotation and gradient."""
    rot, v = _rotary(), _views(dtype)
    assert not v.is_contiguous() and relative._as_complex(v)
    got = _run(rot, v)
    _real_form(monkeypatch)
    want = _run(rot, v)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == dtype
        torch.testing.assert_close(a, b, atol=tol, rtol=0)


def test_the_complex_form_rotates_each_pair_by_its_angle() -> None:
    """(a, b) at position n becomes (a·cos − b·sin, b·cos + a·sin) of n·θ_i,
    θ_i = base^(−2i/d), written out here in float64."""
    rot, v = _rotary(), _views(torch.float64)
    out, _ = _run(rot, v)
    n = torch.arange(v.shape[-2], dtype=torch.float64)[:, None]
    angle = n * 500.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    a, b = v[..., 0::2], v[..., 1::2]
    want = torch.stack((a * angle.cos() - b * angle.sin(),
                        b * angle.cos() + a * angle.sin()), -1).flatten(-2)
    torch.testing.assert_close(out, want, atol=1e-12, rtol=0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precisions_take_the_real_form(dtype: torch.dtype) -> None:
    """No complex multiply for them: the real form, equal to float32's within the
    precision's rounding."""
    rot, v = _rotary(), _views(dtype)
    assert not relative._as_complex(v)
    out, _ = _run(rot.to(dtype), v)
    want, _ = _run(_rotary(), v.float())
    torch.testing.assert_close(out.float(), want, atol=3e-2, rtol=0)


def test_views_no_complex_view_reads_take_the_real_form() -> None:
    """An odd offset or an odd stride (the pairs not side by side in memory) goes the
    real way and still rotates right."""
    rot, v = _rotary(), _views(torch.float32)
    base = torch.randn(3, 2, 9, 17)
    odd = base[..., 1:]  # offset 1, strides odd
    assert not relative._as_complex(odd)
    got, _ = _run(rot, odd)
    want, _ = _run(rot, odd.contiguous())
    assert relative._as_complex(odd.contiguous())
    torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
    assert v.shape[-1] == odd.shape[-1]
