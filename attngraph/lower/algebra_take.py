"""The torch implementation of the formula function ``take`` (see
:mod:`attngraph.algebra.take`): one ``gather``, nothing copied but the result."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["take"]


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
    ids = ia.expand(full).long().unsqueeze(-1)
    return xa.expand(*full, size).gather(-1, ids).squeeze(-1)
