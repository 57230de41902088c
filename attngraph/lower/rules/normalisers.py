"""The normalisers of a ``softmax`` node besides softmax itself, all mask-safe.

- sparsemax (Martins & Astudillo, 2016): the Euclidean projection of the scores onto
  the simplex, ``max(z - τ, 0)``;
- entmax-1.5 (Peters, Niculae & Martins, 2019): ``max(z/2 - τ, 0)²``, between softmax
  and sparsemax, computed exactly by sorting (their Algorithm 2);
- top-k: a softmax over the k highest scores, zero elsewhere (ties: the first k in
  item order, or every score tied with the k-th);
- sum: the scores over their row sum, for non-negative scores (kernel attention).

Each takes scores ``(.., N)`` and a bool mask broadcastable to them (True = may be
attended) or None, and normalises over the last axis: masked items get exactly 0,
weights of a row sum to one over its real items, and a fully masked row is zeros.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attngraph.lower.rules.masks import masked_softmax, row_any

__all__ = ["masked_sparsemax", "masked_entmax15", "masked_topk", "masked_ratio",
           "sorted_scores"]


def sorted_scores(z: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Scores sorted high to low, each row's real items first; ``(zs, rank, real)``.

    Masked items are filled with the row's lowest real score minus one before sorting,
    a finite value that cumulative sums (and their squares) take in their stride, and
    ``real`` (``rank <= count of real items``) keeps them out of any support.
    """
    zs, _ = torch.sort(_filled(z, mask), dim=-1, descending=True)
    rank = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    if mask is None:
        real = torch.ones_like(zs, dtype=torch.bool)
    else:
        real = rank <= mask.sum(-1, keepdim=True).to(z.dtype)
    return zs, rank, real


def _filled(z: Tensor, mask: Tensor | None) -> Tensor:
    """``z`` with masked items at the row's lowest real score minus one (finite)."""
    if mask is None:
        return z
    low = z.masked_fill(~mask.expand_as(z), torch.inf).amin(-1, keepdim=True)
    low = torch.where(torch.isfinite(low), low, torch.zeros_like(low))
    return torch.where(mask, z, low - 1)


def _finish(p: Tensor, mask: Tensor | None) -> Tensor:
    return p if mask is None else p * mask.to(p.dtype)


def masked_sparsemax(z: Tensor, mask: Tensor | None) -> Tensor:
    """Sparsemax over the last axis: ``max(z - τ, 0)`` with τ chosen so rows sum to 1."""
    zs, k, real = sorted_scores(z, mask)
    cums = zs.cumsum(-1)
    support = ((1 + k * zs) > cums) & real  # the top k(z) items
    k_z = support.sum(-1, keepdim=True).clamp(min=1)
    tau = (cums.gather(-1, k_z - 1) - 1) / k_z.to(z.dtype)
    return _finish(torch.clamp(_filled(z, mask) - tau, min=0), mask)


def masked_entmax15(z: Tensor, mask: Tensor | None) -> Tensor:
    """Entmax-1.5 over the last axis: ``max(z/2 - τ, 0)²``, rows summing to 1.

    τ solves Σ max(z_i/2 - τ, 0)² = 1; with the support the top ρ scores it is
    ``mean - sqrt((1 - ρ·(mean of squares - mean²)) / ρ)`` over them.
    """
    z = z / 2
    z = z - _filled(z, mask).amax(-1, keepdim=True)  # the highest real score is 0
    zs, rho, real = sorted_scores(z, mask)
    mean = zs.cumsum(-1) / rho
    mean_sq = (zs * zs).cumsum(-1) / rho
    delta = ((1 - rho * (mean_sq - mean * mean)) / rho).clamp(min=0)
    tau = mean - delta.sqrt()
    support = ((tau <= zs) & real).sum(-1, keepdim=True).clamp(min=1)
    tau_star = tau.gather(-1, support - 1)
    return _finish(torch.clamp(_filled(z, mask) - tau_star, min=0) ** 2, mask)


def masked_topk(z: Tensor, mask: Tensor | None, k: int, ties: str = "first") -> Tensor:
    """Softmax over the ``k`` highest real scores of each row; 0 elsewhere.

    With ``ties="first"`` exactly ``k`` items are kept, the first in item order among
    the scores tied with the k-th highest (``torch.topk`` picks among them as it
    likes); with ``ties="keep"`` every real item whose score is at least the k-th
    highest, so tied items all keep weight; every real item when a row has fewer
    than ``k``.
    """
    filled = _filled(z, mask)
    k = min(k, z.shape[-1])
    kth = filled.topk(k, dim=-1).values[..., -1:]  # (.., 1): the k-th highest score
    above, tied = filled > kth, filled == kth  # (.., N)
    if ties == "keep":
        keep = above | tied
    else:  # as many of the tied as the k places left, in item order
        left = k - above.sum(-1, keepdim=True)
        keep = above | (tied & (tied.cumsum(-1) <= left))
    if mask is not None:
        keep = keep & mask
    p = masked_softmax(z, keep)
    return p * row_any(keep).to(p.dtype)


def masked_ratio(z: Tensor, mask: Tensor | None) -> Tensor:
    """``z_i / Σ_j z_j`` over the real items, for scores that are never negative
    (φ(q)·φ(k)); a row whose sum is 0 gives zeros."""
    if mask is not None:
        z = z * mask.to(z.dtype)
    total = z.sum(-1, keepdim=True)
    return z / torch.where(total > 0, total, torch.ones_like(total))
