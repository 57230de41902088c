"""The torch implementations of the built-in formula functions (registered, lazily, in
:mod:`attngraph.algebra.functions` under ``attngraph.lower.rules.algebra:<name>``, which
re-exports them), and the run-time helpers an expression's program and its Python
export (:mod:`attngraph.lower.rules.algebra_python`) call: padding masks along an axis,
lengths, positions.

Values are laid out ``(B, [h,] *axes)``; a value the same for every example (a
parameter, a value of the positions alone) may have batch 1, and broadcasts. Functions
over an axis see only the real entries of a padded length.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor

from attngraph.lower.rules.masks import masked_softmax as masks_softmax

if TYPE_CHECKING:
    from attngraph.lower.runtime.module import Runtime

__all__ = [
    "exp", "log", "sqrt", "sin", "cos", "tanh", "sigmoid", "sign", "floor", "relu", "elu",
    "softplus", "gelu", "silu", "logsigmoid", "minimum", "maximum", "where", "abs_",
    "relu2", "elu1", "clamp", "masked_sum", "masked_mean", "masked_amax", "masked_amin",
    "masked_logsumexp", "masked_norm", "masked_cumsum", "masked_softmax", "project", "mm",
    "axis_mask", "length_of", "positions", "real_only", "over_real", "zero_padding",
    "for_each_example",
]

exp, log, sqrt, sin, cos, tanh, sigmoid, sign, floor = (
    torch.exp, torch.log, torch.sqrt, torch.sin, torch.cos, torch.tanh, torch.sigmoid,
    torch.sign, torch.floor)
relu, elu, softplus, gelu, silu, logsigmoid = F.relu, F.elu, F.softplus, F.gelu, F.silu, \
    F.logsigmoid
minimum, maximum, where = torch.minimum, torch.maximum, torch.where


def abs_(x: Tensor) -> Tensor:
    return torch.abs(x)


def relu2(x: Tensor) -> Tensor:
    return torch.relu(x) ** 2


def elu1(x: Tensor) -> Tensor:
    return F.elu(x) + 1


def clamp(x: Tensor, lo: Tensor | float, hi: Tensor | float) -> Tensor:
    if isinstance(lo, Tensor) or isinstance(hi, Tensor):
        return torch.minimum(torch.maximum(x, torch.as_tensor(lo, dtype=x.dtype)),
                             torch.as_tensor(hi, dtype=x.dtype))
    return torch.clamp(x, lo, hi)


def _spread(x: Tensor, mask: Tensor) -> Tensor:
    """``x`` expanded to its shape broadcast with ``mask``: a value the same for every
    example (a position, a parameter: batch 1) reduced over an axis with padding
    has one result per example."""
    shape = torch.broadcast_shapes(x.shape, mask.shape)
    return x if tuple(x.shape) == tuple(shape) else x.expand(shape)


def masked_sum(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return (x if mask is None else _spread(x, mask).masked_fill(~mask, 0.0)).sum(dim)


def masked_mean(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return x.mean(dim)
    count = mask.sum(dim).to(x.dtype).clamp(min=1)
    return _spread(x, mask).masked_fill(~mask, 0.0).sum(dim) / count


def masked_amax(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return x.amax(dim)
    top = _spread(x, mask).masked_fill(~mask, torch.finfo(x.dtype).min).amax(dim)
    return torch.where(mask.any(dim), top, torch.zeros_like(top))


def masked_amin(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return -masked_amax(-x, dim, mask)


def masked_logsumexp(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    if mask is None:
        return torch.logsumexp(x, dim)
    out = torch.logsumexp(_spread(x, mask).masked_fill(~mask, torch.finfo(x.dtype).min),
                          dim)
    return torch.where(mask.any(dim), out, torch.zeros_like(out))


def masked_norm(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    sq = (x * x) if mask is None else _spread(x * x, mask).masked_fill(~mask, 0.0)
    return torch.sqrt(sq.sum(dim))


def masked_cumsum(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    return (x if mask is None else _spread(x, mask).masked_fill(~mask, 0.0)).cumsum(dim)


def masked_softmax(x: Tensor, dim: int, mask: Tensor | None) -> Tensor:
    """The softmax kind's normaliser (:func:`attngraph.lower.rules.masks.masked_softmax`) along
    dimension ``dim``: one implementation for the named kind and the formula."""
    if mask is None:
        return torch.softmax(x, dim)
    x = _spread(x, mask)
    last = x.movedim(dim, -1)
    m = mask.expand_as(x).movedim(dim, -1)
    return masks_softmax(last, m).movedim(-1, dim)


def project(w: Tensor, x: Tensor, dim: int) -> Tensor:
    """``w (1 or B, out, in)`` applied along dimension ``dim`` of ``x (B, ...)``: one
    matrix for the batch (a param) or one per example (a value a node made)."""
    moved = x.movedim(dim, -1)  # (B, ..., in)
    wt = w.transpose(-1, -2)  # (1 or B, in, out)
    if moved.dim() == 2:  # a vector per example
        return (moved.unsqueeze(-2) @ wt).squeeze(-2)
    wt = wt.reshape(wt.shape[0], *([1] * (moved.dim() - 3)), wt.shape[-2], wt.shape[-1])
    return (moved @ wt).movedim(-1, dim)


def mm(a: Tensor, b: Tensor, a_heads: bool, b_heads: bool, a_rank: int, b_rank: int) -> Tensor:
    """``a (B, [h,] [M,] K) @ b (B, [h,] K, [N])``: heads broadcast, vectors as rows or
    columns."""
    if b_heads and not a_heads:
        a = a.unsqueeze(1)
    if a_heads and not b_heads:
        b = b.unsqueeze(1)
    a2 = a if a_rank == 2 else a.unsqueeze(-2)
    b2 = b if b_rank == 2 else b.unsqueeze(-1)
    out = a2 @ b2
    if b_rank == 1:
        out = out.squeeze(-1)
    if a_rank == 1:
        out = out.squeeze(-2 if b_rank == 2 else -1)
    return out


# ----------------------------------------------------------------------------
# run-time helpers: padding along an axis, lengths, positions


def axis_mask(rt: Runtime, sym: str, ndim: int, dim: int) -> Tensor | None:
    """The padding mask of length ``sym`` shaped to broadcast along dimension ``dim``
    (negative: from the end) of a value of ``ndim`` dimensions, or None."""
    m = rt.masks.get(sym) if sym else None
    if m is None:
        return None
    shape = [m.shape[0]] + [1] * (ndim - 1)
    shape[dim % ndim] = m.shape[1]
    return m.reshape(shape)


def length_of(rt: Runtime, sym: str, like: Tensor | None = None, dim: int = 0) -> Tensor:
    """Per example, the real items of length ``sym``: its padding mask's count, else its
    size in the batch (else dimension ``dim`` of ``like``). ``(B,)``."""
    m = rt.masks.get(sym)
    if m is not None:
        return m.sum(-1).to(rt.dtype)
    n = rt.sizes[sym] if sym in rt.sizes or like is None else like.shape[dim]
    return torch.ones(rt.batch, dtype=rt.dtype, device=rt.device) * n


def positions(like: Tensor, dim: int) -> Tensor:
    """0, 1, ... along dimension ``dim`` of ``like``, as ``(1, L)``."""
    n = like.shape[dim]
    return torch.arange(n, device=like.device, dtype=like.dtype).reshape(1, n)


def real_only(x: Tensor, rt: Runtime, sym: str, dim: int) -> Tensor:
    """``x`` with 0 at the padded entries of its dimension ``dim`` (length ``sym``)."""
    m = axis_mask(rt, sym, x.dim(), dim)
    return x if m is None else _spread(x, m).masked_fill(~m, 0.0)


def over_real(fn: Any, x: Tensor, dim: int, rt: Runtime, sym: str) -> Tensor:
    """``fn(x, dim, mask)`` over the real entries of dimension ``dim`` (length ``sym``)."""
    return fn(x, dim, axis_mask(rt, sym, x.dim(), dim))


def zero_padding(y: Tensor, rt: Runtime, pads: tuple[tuple[str, int], ...]) -> Tensor:
    """``y`` with 0 at every padded position of its lengths ``(symbol, dimension)``."""
    for sym, d in pads:
        m = axis_mask(rt, sym, y.dim(), d)
        if m is not None:
            y = torch.where(m, y, torch.zeros((), dtype=y.dtype, device=y.device))
    return y


def for_each_example(y: Tensor, rt: Runtime) -> Tensor:
    """``y (1, ...)``, the same for every example, as ``(B, ...)``."""
    return y.expand(rt.batch, *y.shape[1:])
