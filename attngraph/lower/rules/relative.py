"""Lowerings of :mod:`attngraph.kinds.relative`: ALiBi and T5 biases, rotary embeddings."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attngraph.kinds.relative import alibi_slopes
from attngraph.lower.runtime.memo import shared, tracing
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

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


def _as_built(buffer: Tensor, *made_of: object) -> object:
    """A key part for a buffer that is a function of ``made_of`` as built: those, its
    dtype and device, so that the nodes of the same sizes share what is made of it;
    the buffer itself (compared by identity) once it has been changed in place."""
    return (*made_of, buffer.dtype, buffer.device) if buffer._version == 0 else buffer


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
        dt, dev = scores.dtype, scores.device
        # what depends on the positions alone is made once per forward (shared by the
        # layers); the slopes as built are a function of the number of heads
        if self.fn == "alibi":
            bias = shared(rt, "alibi", lambda: (m, n, dt, dev, _as_built(self.slopes, self.h)),
                          lambda: self.alibi(m, n, dt, dev))
        else:
            bucket = shared(rt, "t5_bucket", lambda: (m, n, self.bidirectional, self.buckets,
                                                      self.max_distance, dev),
                            lambda: self.bucket(m, n, dev))
            bias = self.table(bucket).permute(2, 0, 1).to(dt)  # (h, M, N)
        if not self.heads:
            bias = bias[0]
        return scores + bias

    def alibi(self, m: int, n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """ALiBi's bias −m_h·|i − j|, ``(h, M, N)``."""
        i = torch.arange(m, device=device)[:, None]
        j = torch.arange(n, device=device)[None, :]
        dist = (i - j).abs().to(dtype)  # (M, N)
        # a float64 model gets the slopes in float64, not float32's values cast
        slopes = torch.tensor(alibi_slopes(self.h), dtype=dtype, device=device) \
            if dtype == torch.float64 else self.slopes.to(dtype)
        return -slopes[:, None, None] * dist  # (h, M, N)

    def bucket(self, m: int, n: int, device: torch.device) -> Tensor:
        """T5's bucket of each pair's j − i, ``(M, N)``."""
        i = torch.arange(m, device=device)[:, None]
        j = torch.arange(n, device=device)[None, :]
        return t5_bucket(j - i, self.bidirectional, self.buckets, self.max_distance)


class Rotary(NodeModule):
    """RoPE: features (2i, 2i+1) of the item at position n rotated by n·θ_i,
    θ_i = base^(−2i/d), per head (the pairs are adjacent, as in RoFormer).

    The rotation is ``v ⊙ C + swap(v) ⊙ S``, ``swap`` exchanging the features of each
    pair, with the tables C = (cos, cos) and S = (−sin, sin) of each pair's angle:
    the pair (a, b) becomes (a·cos − b·sin, b·cos + a·sin). In eager mode, on float32
    or float64 values, the same rotation is one complex multiply, (a + ib)(cos + i·sin)
    (see :func:`_as_complex`). The tables depend on the positions alone: they are made
    once per forward and read by every rotary node of the same size and base, the
    queries' and the keys' of every layer (:func:`attngraph.lower.runtime.memo.shared`).
    """

    theta: Tensor

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        d = ctx.features("from")
        self.base, self.d = float(ctx.spec.base), d
        theta = self.base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        self.register_buffer("theta", theta.float(), persistent=False)

    def angles(self, n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """Each pair's angle n·θ_i over ``n`` positions, ``(N, d/2)``: in float64 for
        float64 (not float32's values cast), else in float32."""
        if dtype == torch.float64:
            theta = self.base ** (-torch.arange(0, self.d, 2, device=device,
                                                dtype=torch.float64) / self.d)
            return torch.arange(n, device=device, dtype=torch.float64)[:, None] * theta
        return torch.arange(n, device=device, dtype=torch.float32)[:, None] * self.theta

    def tables(self, n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """C and S over ``n`` positions, ``(2, N, d)`` in ``dtype``."""
        angle = self.angles(n, dtype, device)
        cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)  # (N, d/2)
        c = torch.stack((cos, cos), dim=-1).flatten(-2)  # (N, d): (cos_i, cos_i) per pair
        s = torch.stack((-sin, sin), dim=-1).flatten(-2)  # (N, d): (−sin_i, sin_i)
        return torch.stack((c, s))

    def turns(self, n: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        """cos + i·sin of each pair's angle over ``n`` positions, ``(N, d/2)`` complex
        (of ``dtype``'s precision)."""
        angle = self.angles(n, dtype, device).to(dtype)
        return torch.polar(torch.ones_like(angle), angle)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        v = x["from"]  # (B, [h,] N, d)
        n = v.shape[-2]

        def key() -> tuple[object, ...]:
            return (n, self.d, self.base, v.dtype, v.device,
                    _as_built(self.theta, self.d, self.base))

        if _as_complex(v):
            # each pair (a, b) as a + ib times cos + i·sin: one complex multiply, in
            # and back, where the real form is a swap of the pairs, two multiplies and
            # a sum (a third of the time, forward and backward, on the CPU)
            turn = shared(rt, "rotary_turns", key, lambda: self.turns(n, v.dtype, v.device))
            return torch.view_as_real(torch.view_as_complex(v.unflatten(-1, (-1, 2)))
                                      * turn).flatten(-2)
        cs = shared(rt, "rotary", key, lambda: self.tables(n, v.dtype, v.device))
        swapped = v.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)  # (b, a) for each pair (a, b)
        return v * cs[0] + swapped * cs[1]


def _as_complex(v: Tensor) -> bool:
    """Whether :class:`Rotary` turns ``v``'s pairs as complex numbers: float32 or float64
    values whose pairs lie side by side (a complex view of them exists), on the CPU or a
    CUDA device, in eager mode (ONNX and some export paths have no complex tensors; half
    precisions and some devices no complex multiply)."""
    return (not tracing() and v.dtype in (torch.float32, torch.float64)
            and v.device.type in ("cpu", "cuda")
            and v.stride(-1) == 1 and v.storage_offset() % 2 == 0
            and all(s % 2 == 0 for s in v.stride()[:-1]))
