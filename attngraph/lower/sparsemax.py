"""Sparsemax (Martins & Astudillo, 2016): the Euclidean projection of the scores
onto the simplex; sparse weights that still sum to one over the real items."""

from __future__ import annotations

import torch
from torch import Tensor

from attngraph.lower.masks import masked_fill_scores

__all__ = ["sparsemax", "masked_sparsemax"]


def sparsemax(z: Tensor) -> Tensor:
    """Sparsemax over the last axis: max(z - τ, 0) with τ chosen so rows sum to 1."""
    zs, _ = torch.sort(z, dim=-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    cums = zs.cumsum(-1)
    support = (1 + k * zs) > cums  # (.., N) True for the top-k(z) items
    k_z = support.sum(-1, keepdim=True).clamp(min=1)
    tau = (cums.gather(-1, k_z - 1) - 1) / k_z.to(z.dtype)
    return torch.clamp(z - tau, min=0)


def masked_sparsemax(z: Tensor, mask: Tensor | None) -> Tensor:
    """Sparsemax ignoring masked items; fully masked rows give zeros."""
    if mask is None:
        return sparsemax(z)
    # a low but finite fill: cumulative sums of it must not overflow
    p = sparsemax(masked_fill_scores(z, mask, fill=-1e9 if z.dtype != torch.float16 else -1e4))
    return p * mask.to(p.dtype)
