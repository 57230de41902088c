"""The torch implementation of the formula function ``take`` (see
:mod:`attngraph.algebra.take`): one indexing of the table where it is, nothing copied
but the result."""

from __future__ import annotations

import torch
from torch import Tensor

from attngraph.lower.runtime.memo import tracing

__all__ = ["PositionError", "take"]


class PositionError(ValueError):
    """Positions a forward computed that are no entry of the table (outside its axis, or
    not whole numbers); ``hint`` says what to do (the located error shows it)."""

    def __init__(self, msg: str, hint: str) -> None:
        super().__init__(msg)
        self.hint = hint


def _check(index: Tensor, pos: Tensor, bad: Tensor, size: int) -> None:
    """Eager mode on the CPU: refuse positions outside ``0 .. size - 1`` or not whole,
    naming one (on an accelerator the gather itself fails on a position outside, and
    a fraction is truncated: a check there would wait for the device every forward)."""
    if index.is_floating_point():
        split = index != index.floor()
        if bool(split.any()):
            got = float(index[split].flatten()[0])
            msg = f"take's positions are whole numbers, but one is {got:g}"
            raise PositionError(msg, "make them whole: floor(...) the formula of the positions")
    if bool(bad.any()):
        got = int(pos[bad].flatten()[0])
        msg = (f"take's position {got} is outside the table's axis of {size} entries "
               f"(0 to {size - 1})")
        raise PositionError(msg, f"keep the positions in range: clamp(..., 0, {size - 1})")


def take(x: Tensor, index: Tensor | float, dim: int, xdims: tuple[int, ...],
         idims: tuple[int, ...]) -> Tensor:
    """``x (1 or B, ...)`` at the whole-number positions ``index (1 or B, ...)`` along
    dimension ``dim``; ``xdims``/``idims``: for each result dimension after the batch,
    the source dimension of ``x`` without ``dim`` (or of ``index``), 1-based, or -1.

    >>> table = torch.tensor([[[10.0, 11.0, 12.0]]])            # (1, h=1, 3)
    >>> take(table, torch.tensor([[2.0, 0.0]]), 2, (1, -1), (-1, 1))   # (1, h, 2)
    tensor([[[12., 10.]]])
    """
    moved = x.movedim(dim, -1)  # (B, *rest, A)
    size = moved.shape[-1]
    xa = moved.reshape([moved.shape[0]] + [moved.shape[d] if d > 0 else 1 for d in xdims]
                       + [size])
    if isinstance(index, Tensor) and index.dim() > 0:
        ia = index.reshape([index.shape[0]] + [index.shape[d] if d > 0 else 1 for d in idims])
    else:  # one position for every entry
        ia = torch.as_tensor(index, device=x.device).reshape([1] * (1 + len(idims)))
    full = torch.broadcast_shapes(tuple(xa.shape[:-1]), tuple(ia.shape))
    # one gather from the table where it is (flattened), at each result entry's offset
    # into it: its gradient is a tensor of the table's size (T5's bias: 4 x 32
    # numbers), not one of the result's times the taken length, which a gather over
    # the table expanded to the result's shape makes (B x h x N x N x 32)
    xa = xa.contiguous()
    pos = ia.long()
    at = pos
    for d, n in enumerate(xa.shape[:-1]):  # each axis of x at its own index
        at = at + torch.arange(n, device=x.device).reshape(
            [n if i == d else 1 for i in range(len(full))]) * xa.stride(d)
    # a position outside 0 .. size-1 is out of range, as for a gather along the axis
    # (not an entry of the next row)
    bad = (pos < 0) | (pos >= size)
    if ia.device.type == "cpu" and not tracing():  # (elsewhere: no sync every forward)
        _check(ia, pos, bad, size)
    at = torch.where(bad, xa.numel(), at)
    return xa.reshape(-1).gather(0, at.expand(full).reshape(-1)).reshape(full)
