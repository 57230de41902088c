"""The scorers of a tanh layer: :class:`Additive` (Bahdanau's vᵀ tanh(W q + U k + b),
with per-item features) and :class:`MlpScore` (vᵀ tanh(W k + b), each item alone)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.lower.rules.scorers_base import QueryRead, Scorer, _param
from attngraph.lower.runtime.module import Runtime

__all__ = ["Additive", "MlpScore"]


def _bias(heads: int | None, hidden: int, spec: Any) -> nn.Parameter | None:
    """The bias inside the tanh, ([h,] H) zeros; None with ``bias: false``."""
    if not getattr(spec, "bias", True):
        return None
    return nn.Parameter(torch.zeros(((heads,) if heads else ()) + (hidden,)))


class Additive(Scorer):
    """vᵀ tanh(W q + U k + V f + b) (Bahdanau; with per-item features f, Chorowski's
    location-aware and See's coverage scores): ``W`` (dq, H), ``U`` (dk, H), ``V``
    (c, H) when there are features, ``b`` unless ``bias: false``, ``v`` (H)."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        self.W = _param(heads, dq, hidden)
        self.U = _param(heads, dk, hidden)
        self.b = _bias(heads, hidden, spec)
        self.v = _param(heads, hidden)
        f = read.features
        self.V = _param(heads, 1 if f.rank == 1 else int(f.dims[-1]), hidden) \
            if f is not None else None
        self.feature_vector = f is not None and f.rank == 1
        self.decoder_step = (read.prepared and read.vector_query and heads is None
                             and read.learned is None and read.has_query)

    def prepare(self, role: str, k: Tensor) -> Tensor:
        """U k_i for every key: (B, [h,] N, H), query heads expanded."""
        if self.groups > 1:
            k = k.repeat_interleave(self.groups, dim=1)
        return k @ self.U

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        f = x.get("features")
        if self.decoder_step and f is None:
            # a decoder's step (the loop's hot path): vᵀ tanh(W s + b + U h_j), U h_j
            # prepared once; one query vector per row, no heads
            q, uk = x["query"], x["key"]  # (B, dq), (B, N, H)
            return torch.tanh(self._query(q).unsqueeze(-2) + uk) @ self.v
        if f is not None:
            k = x["key"]  # (B, [h,] N, dk), or U k (B, [h,] N, H) when prepared
            if self.feature_vector:
                f = f.unsqueeze(-1)  # (B, N, 1)
            if k.dim() == 4:
                f = f.unsqueeze(1).expand(-1, k.shape[1], -1, -1)  # (B, h, N, c)
            f = f.to(k.dtype)
            if self.prepared and self.V is not None:  # U k_i + V f_i
                x = {**x, "key": k + f @ self.V}
            else:  # [k_i ‖ f_i] against [U; V]: U k_i + V f_i in one matmul
                x = {**x, "key": torch.cat([k, f], -1)}
        return super().forward(x, rt)

    def _keys(self, k: Tensor) -> Tensor:
        """U k_i, or [U; V] [k_i ‖ f_i] with features: (B, [h,] N, H); the keys as
        they are when they arrive prepared."""
        if self.prepared:
            return k
        if self.V is None:
            return k @ self.U
        return k @ torch.cat([self.U, self.V], -2)

    def _contract(self, e: Tensor) -> Tensor:
        """vᵀ e over the hidden axis as a matmul: (B, [h,] ..., H) -> (B, [h,] ...)."""
        if self.v.dim() == 1:
            return e @ self.v
        # per head: v (h, H) -> (h, 1, .., H, 1), one batched matmul
        v = self.v.reshape(self.v.shape[0], *([1] * (e.dim() - 4)), self.v.shape[1], 1)
        return (e @ v).squeeze(-1)

    def _query(self, q: Tensor) -> Tensor:
        """W q + b: (B, [h,] [M,] H)."""
        if self.W.dim() == 2:
            if q.dim() == 2 and self.b is not None:
                return torch.addmm(self.b, q, self.W)  # one query per row: one op
            return F.linear(q, self.W.T, self.b)
        wq = q @ self.W
        return wq if self.b is None else wq + self.b.unsqueeze(-2)

    def one(self, q: Tensor, k: Tensor) -> Tensor:
        if q.dim() == 2:  # (B, dq) against (B, N, dk): no head axis
            return self._contract(torch.tanh(self._query(q).unsqueeze(-2) + self._keys(k)))
        return super().one(q, k)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        # the bias joins the small W q term, not the (M, N, H) sum
        wq = self._query(q).unsqueeze(-2)  # (B, h, M, 1, H)
        uk = self._keys(k).unsqueeze(-3)  # (B, h, 1, N, H)
        return self._contract(torch.tanh(wq + uk))  # (B, h, M, N)

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        e = torch.tanh(self._query(q) + self._keys(k))  # (B, h, N, H)
        return self._contract(e)


class MlpScore(Scorer):
    """vᵀ tanh(W k + b): each item scored alone; ``W`` (dk, H), ``b`` unless ``bias:
    false``, ``v`` (H)."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        self.W = _param(heads, dk, hidden)
        self.b = _bias(heads, hidden, spec)
        self.v = _param(heads, hidden)

    def items(self, k: Tensor) -> Tensor:
        if self.W.dim() == 2:  # one linear with its bias, then vᵀ as a matmul
            return torch.tanh(F.linear(k, self.W.T, self.b)) @ self.v  # (B, N)
        wk = k @ self.W
        e = torch.tanh(wk if self.b is None else wk + self.b.unsqueeze(-2))  # (B, h, N, H)
        return (e * self.v.unsqueeze(-2)).sum(-1)  # (B, h, N)
