"""Banded (local) attention: each query attends only to keys within ``window``
positions, at a cost that grows with N·w instead of N².

The queries are cut into blocks of ``c`` rows; block ``b`` (rows ``b·c ..
b·c+c-1``) can only see keys ``b·c-w .. b·c+c-1+w``, a slice of ``c+2w`` keys
taken from the keys padded by ``w`` on both sides (``Tensor.unfold``, a view).
Each block is one small ``scaled_dot_product_attention`` with a
``(c, c+2w)`` mask: the band ``|i-j| <= w`` (and ``j <= i`` when causal), the
keys' padding, and the positions outside ``0..N-1``. Numbers equal the dense
masked computation's (rows with nothing to attend give zeros, as there).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["banded_attention", "band_block", "use_banded"]


def band_block(window: int) -> int:
    """Query rows per block for a window: about ``w``, at least 16, at most 128."""
    return max(16, min(int(window), 128))


def use_banded(m: int, n: int, window: int | None) -> bool:
    """Whether the banded path pays off: self-alignment (M = N) and a band that
    covers at most half the keys of a row."""
    if window is None or m != n:
        return False
    return 2 * (band_block(window) + 2 * window) <= n


def banded_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    window: int,
    *,
    scale: float,
    causal: bool = False,
    key_mask: Tensor | None = None,
    block: int | None = None,
) -> Tensor:
    """Attention of ``q`` over ``k``/``v`` restricted to ``|i - j| <= window``.

    Parameters
    ----------
    q, k, v : Tensor
        ``(B, [h,] N, d)`` (same N for all three).
    window : int
        Largest distance between a query and a key it may attend.
    scale : float
        Score scale (``1/√d`` for scaled dot, divided by the temperature).
    causal : bool, optional
        Also require ``j <= i``.
    key_mask : Tensor, optional
        ``(B, N)`` bool, True = a real key (padding mask).
    block : int, optional
        Query rows per block (default :func:`band_block`).

    Returns
    -------
    Tensor
        ``(B, [h,] N, d_v)``; rows with no key to attend are zero.
    """
    heads = q.dim() == 4
    if not heads:
        q, k, v = q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1)
    b, h, n, _ = q.shape
    w = int(window)
    c = int(block) if block is not None else band_block(w)
    nb = -(-n // c)
    tail = nb * c - n
    span = c + 2 * w
    qb = F.pad(q, (0, 0, 0, tail)).reshape(b, h * nb, c, q.shape[-1])  # (B, h·nb, c, d)

    def windows(t: Tensor) -> Tensor:
        tp = F.pad(t, (0, 0, w, w + tail))  # (B, h, nb·c + 2w, d)
        tw = tp.unfold(2, span, c).transpose(-1, -2)  # (B, h, nb, span, d)
        return tw.reshape(b, h * nb, span, t.shape[-1])

    kb, vb = windows(k), windows(v)
    mask = _band_mask(n, w, c, h, causal=causal, key_mask=key_mask, device=q.device)
    ok = mask.any(dim=-1, keepdim=True)  # rows with something to attend
    z = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask | ~ok, scale=scale)
    z = (z * ok.to(z.dtype)).reshape(b, h, nb * c, v.shape[-1])[:, :, :n]
    return z if heads else z.squeeze(1)


def _band_mask(n: int, w: int, c: int, h: int, *, causal: bool, key_mask: Tensor | None,
               device: torch.device) -> Tensor:
    """Which keys of its window each query row of a block may attend, ``(B|1, h·nb, c,
    c+2w)`` bool: the band ``|i - j| <= w`` (and ``j <= i`` when causal) among the real
    keys (``key_mask``, True = real; none outside ``0..n-1``)."""
    nb = -(-n // c)
    tail = nb * c - n
    span = c + 2 * w
    r = torch.arange(c, device=device)[:, None]
    s = torch.arange(span, device=device)[None, :]
    band = ((s - r) >= 0) & ((s - r) <= 2 * w)  # |i - j| <= w
    if causal:
        band = band & (s <= r + w)  # j <= i
    real = key_mask.to(torch.bool) if key_mask is not None else torch.ones(
        1, n, dtype=torch.bool, device=device)
    real = F.pad(real, (w, w + tail), value=False).unfold(1, span, c)  # (B|1, nb, span)
    mask = band & real.unsqueeze(-2)  # (B|1, nb, c, span)
    return mask.unsqueeze(1).expand(-1, h, -1, -1, -1).reshape(mask.shape[0], h * nb, c, span)
