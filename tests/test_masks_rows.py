"""The masked softmax without its product by the mask where no row can be fully masked:
the same numbers and gradients as with it, and a fully masked row still gives zeros
(eager, under torch.compile, in the fused SDPA path)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.lower import masks  # noqa: E402
from attngraph.lower.rules.masks import masked_softmax, no_empty_row  # noqa: E402


def _reference(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The softmax as it was: masked_fill, softmax, then the product by the mask."""
    low = torch.finfo(scores.dtype).min
    p = torch.softmax(scores.masked_fill(~mask, low), dim=-1)
    return p * mask.to(p.dtype)


def _causal(n: int) -> torch.Tensor:
    i = torch.arange(n)
    return i[None, :] <= i[:, None]


def _values_and_grads(fn, scores: torch.Tensor, mask: torch.Tensor,
                      weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = scores.clone().requires_grad_()
    p = fn(s, mask)
    (p * weight).sum().backward()
    assert s.grad is not None
    return p.detach(), s.grad


@pytest.mark.parametrize("kind", ["causal", "padding", "random"])
def test_no_empty_row_gives_the_same_numbers_and_gradients(kind: str) -> None:
    """Causal, padded (no example empty) and random masks with an item in every row:
    the fast path's weights and gradients equal the product form's, bit for bit."""
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(3, 2, 6, 6, generator=g) * 4
    weight = torch.randn(3, 2, 6, 6, generator=g)
    if kind == "causal":
        mask = _causal(6)
    elif kind == "padding":
        mask = (torch.arange(6)[None, :] < torch.tensor([6, 3, 1])[:, None])[:, None, None]
    else:
        mask = torch.rand(3, 1, 6, 6, generator=g) > 0.6
        mask[..., 0] = True  # an item in every row
    assert no_empty_row(mask)
    p, grad = _values_and_grads(masked_softmax, scores, mask, weight)
    p_ref, grad_ref = _values_and_grads(_reference, scores, mask, weight)
    assert torch.equal(p, p_ref)
    assert torch.equal(grad, grad_ref)


def test_a_fully_masked_row_gives_zeros() -> None:
    """A row without an item: zero weights and zero gradients, never NaN; the others as
    the product form gives them."""
    scores = torch.randn(2, 1, 4, 5, dtype=torch.float64)
    mask = torch.rand(2, 1, 4, 5) > 0.3
    mask[..., 0] = True
    mask[1, 0, 2] = False  # example 1, query 2: nothing to attend
    assert not no_empty_row(mask)
    weight = torch.randn(2, 1, 4, 5, dtype=torch.float64)
    p, grad = _values_and_grads(masked_softmax, scores, mask, weight)
    assert torch.equal(p[1, 0, 2], torch.zeros(5, dtype=torch.float64))
    assert torch.equal(grad[1, 0, 2], torch.zeros(5, dtype=torch.float64))
    p_ref, grad_ref = _values_and_grads(_reference, scores, mask, weight)
    torch.testing.assert_close(p, p_ref, rtol=0, atol=0)
    torch.testing.assert_close(grad, grad_ref, rtol=0, atol=0)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.trace
def test_no_empty_row_is_not_known_off_the_cpu_or_while_tracing() -> None:
    """Where the check would stall the host (a device) or branch on data (a trace), it
    answers "not known" (False), and the softmax keeps the product by the mask."""
    assert not no_empty_row(torch.ones(2, 3, dtype=torch.bool, device="meta"))
    seen: list[bool] = []

    def f(mask: torch.Tensor) -> torch.Tensor:
        seen.append(no_empty_row(mask))
        return mask.float()

    torch.jit.trace(f, (torch.ones(2, 3, dtype=torch.bool),), check_trace=False)
    assert seen == [False]


def test_under_torch_compile_a_fully_masked_row_gives_zeros() -> None:
    """The branch-free form under torch.compile: the same weights as eager, zeros for a
    fully masked row."""
    scores = torch.randn(2, 3, 4)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[0, 1] = False
    compiled = torch.compile(masked_softmax, backend="eager", fullgraph=True)
    out = compiled(scores, mask)
    assert torch.equal(out[0, 1], torch.zeros(4))
    torch.testing.assert_close(out, masked_softmax(scores, mask), rtol=0, atol=0)


def test_the_fast_path_is_taken_for_a_causal_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """A causal mask has its first item in every row: the product is skipped (no
    multiplication of the weights by the mask)."""
    calls: list[bool] = []
    real = masks.no_empty_row

    def spy(mask: torch.Tensor) -> bool:
        calls.append(real(mask))
        return calls[-1]

    monkeypatch.setattr(masks, "no_empty_row", spy)
    masked_softmax(torch.randn(1, 5, 5), _causal(5))
    assert calls == [True]


SPEC = """
attngraph: 1
name: padded
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
nodes:
  q: {kind: queries, from: x, dim: d, heads: 2}
  k: {kind: keys, from: x, dim: d, heads: 2}
  v: {kind: values, from: x, dim: d, heads: 2}
  s: {kind: scorer, fn: scaled_dot, query: q, key: k}
  p: {kind: softmax, scores: s, mask: {window: 1}}
  z: {kind: readout, weights: p, values: v, out: d}
outputs: {z: z}
"""


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("empty", [True, False])
@pytest.mark.parametrize("mask", ["{window: 1}", "{causal: true}"])
def test_models_with_and_without_an_empty_row(fuse: bool, empty: bool, mask: str) -> None:
    """A window or causal mask over a padded batch, with and without a fully padded
    example, through the fused SDPA and the explicit path: finite outputs and gradients,
    the same numbers either way. (A causal row keeps its first item, so without an empty
    example no row is empty and both paths take their fast form; the window's padded
    queries have empty rows.)"""
    spec = SPEC.replace("{window: 1}", mask)
    model = attngraph.compile(spec, seed=0, fuse=fuse)
    plain = attngraph.compile(spec, seed=0, fuse=False)
    x = torch.randn(3, 5, 8)
    lengths = torch.tensor([5, 2, 0 if empty else 1])
    m = torch.arange(5)[None, :] < lengths[:, None]
    out = model(x=x, x_mask=m)["z"]
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, plain(x=x, x_mask=m)["z"], atol=1e-5, rtol=1e-5)
    out.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
