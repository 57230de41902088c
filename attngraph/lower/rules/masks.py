"""Masks at run time: padding from the inputs, causal, window and adjacency masks,
and a masked softmax whose fully masked rows give zeros, never NaN.

Every mask is a bool tensor, True = the item may be attended, broadcastable to
the scores it masks: ``(B, [h,] [M,] N)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from attngraph.lower.runtime.memo import shared, tracing

if TYPE_CHECKING:
    from attngraph.ir.graph import TensorType
    from attngraph.lower.runtime.module import Runtime

__all__ = [
    "padding_mask", "attention_mask", "combine", "masked_softmax", "masked_fill_scores",
    "row_any", "no_empty_row", "expand_to",
]


def expand_to(x: Tensor, t: TensorType, *, lead: int = 0) -> Tensor:
    """View ``x (B, *tail)`` with singleton axes so it broadcasts against type ``t``.

    ``tail`` matches the last axes of ``t``'s runtime tensor ``(B, [h,] *dims)``;
    ``lead`` extra leading axes of ``x`` after batch are kept (none by default).
    """
    full = 1 + (1 if t.heads else 0) + t.rank
    missing = full - x.dim()
    if missing <= 0:
        return x
    return x.reshape(x.shape[0], *([1] * missing), *x.shape[1:])


def padding_mask(rt: Runtime, t: TensorType, axis: int = -1) -> Tensor | None:
    """The padding mask of the items axis ``axis`` of a value of type ``t``, or None.

    Returned as ``(B, 1, ..., L, 1, ...)`` broadcastable to the value ``(B, [h,] *dims)``.
    """
    if not t.dims:
        return None
    ax = axis % t.rank
    sym = t.dims[ax]
    if not isinstance(sym, str) or sym not in rt.masks:
        return None
    m = rt.masks[sym]
    before = (1 if t.heads else 0) + ax
    after = t.rank - ax - 1
    return m.reshape(m.shape[0], *([1] * before), m.shape[1], *([1] * after))


def combine(*masks: Tensor | None) -> Tensor | None:
    """AND of the given masks (None means no mask)."""
    out: Tensor | None = None
    for m in masks:
        if m is None:
            continue
        out = m if out is None else out & m
    return out


def attention_mask(
    t: TensorType,
    rt: Runtime,
    *,
    causal: bool = False,
    window: int | None = None,
    adjacency: Tensor | None = None,
    self_loops: bool = True,
    m: int | None = None,
    n: int | None = None,
    device: torch.device | None = None,
) -> Tensor | None:
    """All masks of scores of type ``t``: padding over the items axis, causal,
    window and adjacency. ``m``, ``n`` are the runtime query and item counts.

    A mask with a causal, window or adjacency part depends on nothing a layer
    computes: it is made once per forward and shared by every softmax and attention
    that asks for the same one (:func:`attngraph.lower.runtime.memo.shared`, keyed by the
    padding and adjacency tensors it reads, the sizes and the device).
    """
    if not causal and window is None and adjacency is None:
        return padding_mask(rt, t)  # a view of the input's mask: nothing to share
    if (causal or window is not None) and (m is None or n is None):
        msg = "causal and window masks need the query and item counts"
        raise ValueError(msg)
    sym = t.dims[-1] if t.dims else None
    pad = rt.masks.get(sym) if isinstance(sym, str) else None

    def key() -> tuple[object, ...]:
        return (bool(t.heads), t.rank, pad, causal, window, adjacency, self_loops, m, n,
                device)

    def make() -> Tensor:
        return _made_mask(t, rt, causal=causal, window=window, adjacency=adjacency,
                          self_loops=self_loops, m=m, n=n, device=device)

    return shared(rt, "attention_mask", key, make)


def _made_mask(t: TensorType, rt: Runtime, *, causal: bool, window: int | None,
               adjacency: Tensor | None, self_loops: bool, m: int | None, n: int | None,
               device: torch.device | None) -> Tensor:
    """The masks :func:`attention_mask` combines, computed."""
    masks: list[Tensor | None] = [padding_mask(rt, t)]
    if causal or window is not None:
        i = torch.arange(m, device=device)[:, None]  # type: ignore[arg-type]
        j = torch.arange(n, device=device)[None, :]  # type: ignore[arg-type]
        if causal:
            masks.append(j <= i)
        if window is not None:
            masks.append((i - j).abs() <= window)
    if adjacency is not None:
        adj = adjacency.to(torch.bool)
        if self_loops:
            eye = torch.eye(adj.shape[-1], dtype=torch.bool, device=adj.device)
            adj = adj | eye
        if t.heads:
            adj = adj.unsqueeze(1)
        masks.append(adj)
    out = combine(*masks)
    assert out is not None  # (a causal, window or adjacency part is there)
    return out


def row_any(mask: Tensor) -> Tensor:
    """True where a row (last axis) has at least one attendable item."""
    return mask.any(dim=-1, keepdim=True)


def no_empty_row(mask: Tensor) -> bool:
    """Whether every row (last axis) of ``mask`` is known to hold an attendable item.

    Checked on the mask itself (``(B, 1, M, N)`` or smaller, bools: a small pass beside
    the scores it masks), and only where that costs no more: in eager mode on the CPU.
    On an accelerator the answer would stall the host until the device catches up, and
    under torch.compile, torch.export, torch.jit.trace or an FX trace it would be a
    branch on data; there the answer is False ("not known"), and callers keep their
    branch-free form, which is right whatever the rows hold.
    """
    if not isinstance(mask, Tensor) or mask.device.type != "cpu" or tracing():
        return False  # (an FX trace's mask is a Proxy, not a Tensor)
    return bool(mask.any(dim=-1).all())


def masked_fill_scores(scores: Tensor, mask: Tensor | None, fill: float | None = None) -> Tensor:
    """Scores with masked items at a very low value; fully masked rows become 0."""
    if mask is None:
        return scores
    low = torch.finfo(scores.dtype).min if fill is None else fill
    filled = scores.masked_fill(~mask, low)
    return torch.where(row_any(mask), filled, torch.zeros_like(filled))


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last axis ignoring masked items; fully masked rows give 0.

    Masked items take the lowest finite score (one ``where``: a single pass over the
    scores, and one over the gradient, where ``masked_fill`` copies first). A row with
    a real item then gives its masked items exactly 0 (``exp`` of the lowest score
    less the row's largest underflows), so nothing more is needed when no row is
    fully masked (:func:`no_empty_row`: a causal mask always has its first item, an
    unpadded batch has no mask at all). Otherwise the result is multiplied by the
    mask: a fully masked row (every score the same) is uniform before that product and
    zeros after it, never NaN. Either way the numbers and gradients are the same
    (:func:`masked_fill_scores`' zeroed rows give them too, at more passes over the
    scores).
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    low = torch.finfo(scores.dtype).min
    p = torch.softmax(torch.where(mask, scores, low), dim=-1)
    if no_empty_row(mask):
        return p
    return p * mask.to(p.dtype)
