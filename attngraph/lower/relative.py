"""Lowerings of :mod:`attngraph.kinds.relative`: ALiBi and T5 biases, rotary embeddings."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attngraph.kinds.relative import alibi_slopes
from attngraph.lower.module import LowerCtx, NodeModule, Runtime

__all__ = ["PositionBias", "Rotary", "t5_bucket"]


def t5_bucket(rel: Tensor, bidirectional: bool, buckets: int, max_distance: int) -> Tensor:
    """T5's bucket of each relative position ``rel = j − i`` (long): exact buckets for
    small distances, then logarithmically wider ones up to ``max_distance``; with
    ``bidirectional``, half the buckets for items after the query."""
    out = torch.zeros_like(rel)
    n = -rel
    if bidirectional:
        buckets //= 2
        out = out + (n < 0).to(rel.dtype) * buckets
        n = n.abs()
    else:
        n = n.clamp(min=0)
    exact = buckets // 2
    small = n < exact
    large = exact + (torch.log(n.float().clamp(min=1) / exact)
                     / math.log(max_distance / exact) * (buckets - exact)).to(rel.dtype)
    large = large.clamp(max=buckets - 1)
    return out + torch.where(small, n, large)


class PositionBias(NodeModule):
    """scores + bias[h, i, j]: −m_h·|i − j| (ALiBi) or a learned scalar per bucket of
    j − i and head (T5)."""

    slopes: Tensor

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        s = ctx.spec
        t = ctx.t("scores")
        self.heads = t.heads
        self.fn: str = s.fn
        h = t.heads or 1
        self.h = h
        if s.fn == "alibi":
            self.register_buffer("slopes", torch.tensor(alibi_slopes(h)), persistent=False)
        else:
            self.buckets, self.max_distance = int(s.buckets), int(s.max_distance)
            self.bidirectional = bool(s.bidirectional)
            self.table = nn.Embedding(self.buckets, h)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        scores = x["scores"]  # (B, [h,] M, N)
        m, n = scores.shape[-2], scores.shape[-1]
        i = torch.arange(m, device=scores.device)[:, None]
        j = torch.arange(n, device=scores.device)[None, :]
        if self.fn == "alibi":
            dist = (i - j).abs().to(scores.dtype)  # (M, N)
            # a float64 model gets the slopes in float64, not float32's values cast
            slopes = torch.tensor(alibi_slopes(self.h), dtype=scores.dtype,
                                  device=scores.device) \
                if scores.dtype == torch.float64 else self.slopes.to(scores.dtype)
            bias = -slopes[:, None, None] * dist  # (h, M, N)
        else:
            bucket = t5_bucket(j - i, self.bidirectional, self.buckets, self.max_distance)
            bias = self.table(bucket).permute(2, 0, 1).to(scores.dtype)  # (h, M, N)
        if not self.heads:
            bias = bias[0]
        return scores + bias


class Rotary(NodeModule):
    """RoPE: features (2i, 2i+1) of the item at position n rotated by n·θ_i,
    θ_i = base^(−2i/d), per head (the pairs are adjacent, as in RoFormer)."""

    theta: Tensor

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        d = ctx.features("from")
        self.base, self.d = float(ctx.spec.base), d
        theta = self.base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        self.register_buffer("theta", theta.float(), persistent=False)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        v = x["from"]  # (B, [h,] N, d)
        n = v.shape[-2]
        if v.dtype == torch.float64:  # the angles in float64, not float32's values cast
            theta = self.base ** (-torch.arange(0, self.d, 2, device=v.device,
                                                dtype=torch.float64) / self.d)
            angle = torch.arange(n, device=v.device, dtype=torch.float64)[:, None] * theta
        else:
            angle = torch.arange(n, device=v.device, dtype=torch.float32)[:, None] * self.theta
        cos, sin = angle.cos().to(v.dtype), angle.sin().to(v.dtype)  # (N, d/2)
        a, b = v[..., 0::2], v[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
