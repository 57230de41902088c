"""Attention heads: split a projection into heads, merge them back, and grouped-query
attention's key and value heads, each read by a group of query heads (Ainslie et al.
2023), either repeated per query head or read in place."""

from __future__ import annotations

from torch import Tensor

from attngraph.ir.graph import TensorType

__all__ = ["group_heads", "grouped_matmul", "merge_heads", "split_heads"]


def split_heads(v: Tensor, heads: int) -> Tensor:
    """(B, [L,] d) -> (B, h, [L,] d/h)."""
    if v.dim() == 2:
        return v.reshape(v.shape[0], heads, -1)  # (B, h, d/h)
    b, n, d = v.shape
    return v.reshape(b, n, heads, d // heads).transpose(1, 2)  # (B, h, N, d/h)


def group_heads(x: Tensor, t: TensorType, heads: int | None) -> Tensor:
    """Keys or values ``x`` of type ``t`` with a head per query head: grouped-query
    attention's h_kv heads, each repeated for its group of ``heads / h_kv`` query heads."""
    if heads and t.heads and t.heads != heads:
        return x.repeat_interleave(heads // t.heads, dim=1)
    return x


def grouped_matmul(w: Tensor, v: Tensor) -> Tensor:
    """``w (B, h, M, N) @ v (B, h_kv, N, d)`` where query head ``j`` reads value head
    ``j // (h / h_kv)`` (:func:`group_heads`' order), without a copy of the values per
    query head: each group's weights as one ``(h / h_kv · M, N)`` matrix (a view of
    contiguous weights). ``(B, h, M, d)``."""
    b, h, m, n = w.shape
    kv = v.shape[1]
    z = w.reshape(b, kv, (h // kv) * m, n) @ v  # (B, h_kv, h/h_kv · M, d)
    return z.reshape(b, h, m, z.shape[-1])


def merge_heads(z: Tensor, combine: str) -> Tensor:
    """(B, h, [M,] d) -> (B, [M,] h·d) for concat, (B, [M,] d) for mean."""
    if combine == "mean":
        return z.mean(1)
    if z.dim() == 3:
        return z.reshape(z.shape[0], -1)  # (B, h·d)
    return z.transpose(1, 2).flatten(2)  # (B, M, h·d)
