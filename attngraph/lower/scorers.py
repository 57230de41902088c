"""Scorer functions as modules: ``all(q, k)`` scores every query against every key.

``q`` is ``(B, [h,] M, dq)``, ``k`` is ``(B, [h,] N, dk)``; ``all`` returns
``(B, [h,] M, N)`` and ``aligned(q, k)`` (M = N) returns ``(B, [h,] N)``.
Parameters carry a leading head axis only when the scorer works per head, so the
matmuls below broadcast the same way with and without heads. A user-registered
:class:`~attngraph.kinds.registry.ScorerInfo` with ``make`` is wrapped in
:class:`UserScorer`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.lower.module import NodeModule, Runtime

__all__ = ["Scorer", "SCORER_MODULES", "make_scorer"]


def _param(heads: int | None, *shape: int, scale: float | None = None) -> nn.Parameter:
    """A parameter (heads, *shape) or (*shape), uniform in ±1/√fan_in."""
    full = ((heads,) if heads else ()) + shape
    bound = scale if scale is not None else 1.0 / math.sqrt(shape[0])
    return nn.Parameter(torch.empty(full).uniform_(-bound, bound))


def _vec(p: Tensor) -> Tensor:
    """A per-head vector (h, H) -> (h, 1, 1, H) so it broadcasts over (M, N)."""
    return p.unsqueeze(-2).unsqueeze(-2)


class Scorer(NodeModule):
    """Base: reads the query as the node's spec says; ``aligned`` defaults to the
    diagonal of ``all``. ``items(k)`` scores items without a query (fn mlp)."""

    def __init__(self) -> None:
        super().__init__()
        self.pairs = "all"
        self.has_query = True
        self.vector_query = False
        self.query: nn.Parameter | None = None

    #: whether ``all``/``aligned`` broadcast a batch-1 query against B keys (a
    #: learned query is then scored once, not once per batch row)
    broadcasts_batch = True

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        k = x["key"]  # (B, [h,] N, dk)
        if not self.has_query:
            return self.items(k)  # (B, [h,] N)
        if "query" in x:
            q = x["query"]
        elif self.query is not None:
            q = self.query.unsqueeze(0)  # learned: (1, [h,] dq), W q computed once
            if not self.broadcasts_batch:
                q = q.expand(k.shape[0], *self.query.shape)  # (B, [h,] dq)
        else:
            msg = "the scorer has neither a query input nor a learned query"
            raise ValueError(msg)
        if self.vector_query:
            return self.all(q.unsqueeze(-2), k).squeeze(-2)  # (B, [h,] N)
        if self.pairs == "aligned":
            return self.aligned(q, k)  # (B, [h,] N)
        return self.all(q, k)  # (B, [h,] M, N)

    def items(self, k: Tensor) -> Tensor:
        raise NotImplementedError

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        raise NotImplementedError

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return torch.diagonal(self.all(q, k), dim1=-2, dim2=-1)


class Dot(Scorer):
    """q·k."""

    def __init__(self, dq: int, dk: int, hidden: int, heads: int | None, spec: object) -> None:
        super().__init__()
        self.scale = 1.0

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ k.transpose(-1, -2)) * self.scale  # (B, h, M, N)

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return (q * k).sum(-1) * self.scale  # (B, h, N)


class ScaledDot(Dot):
    """q·k/√d."""

    def __init__(self, dq: int, dk: int, hidden: int, heads: int | None, spec: object) -> None:
        super().__init__(dq, dk, hidden, heads, spec)
        self.scale = 1.0 / math.sqrt(dk)


class General(Scorer):
    """qᵀ W k (Luong): ``W`` ([h,] dq, dk)."""

    def __init__(self, dq: int, dk: int, hidden: int, heads: int | None, spec: object) -> None:
        super().__init__()
        self.W = _param(heads, dq, dk)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ self.W) @ k.transpose(-1, -2)  # (B, h, M, N)

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return ((q @ self.W) * k).sum(-1)


class Additive(Scorer):
    """vᵀ tanh(W q + U k + b) (Bahdanau): ``W`` (dq, H), ``U`` (dk, H), ``b``, ``v`` (H)."""

    def __init__(self, dq: int, dk: int, hidden: int, heads: int | None, spec: object) -> None:
        super().__init__()
        self.W = _param(heads, dq, hidden)
        self.U = _param(heads, dk, hidden)
        self.b = nn.Parameter(torch.zeros(((heads,) if heads else ()) + (hidden,)))
        self.v = _param(heads, hidden)

    def _contract(self, e: Tensor) -> Tensor:
        """vᵀ e over the hidden axis as a matmul: (B, [h,] ..., H) -> (B, [h,] ...)."""
        if self.v.dim() == 1:
            return e @ self.v
        # per head: v (h, H) -> (h, 1, .., H, 1), one batched matmul
        v = self.v.reshape(self.v.shape[0], *([1] * (e.dim() - 4)), self.v.shape[1], 1)
        return (e @ v).squeeze(-1)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        # the bias joins the small W q term, not the (M, N, H) sum
        wq = (q @ self.W + self.b.unsqueeze(-2)).unsqueeze(-2)  # (B, h, M, 1, H)
        uk = (k @ self.U).unsqueeze(-3)  # (B, h, 1, N, H)
        return self._contract(torch.tanh(wq + uk))  # (B, h, M, N)

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        e = torch.tanh(q @ self.W + k @ self.U + self.b.unsqueeze(-2))  # (B, h, N, H)
        return self._contract(e)


class Cosine(Scorer):
    """β·cos(q, k); β fixed or a learned ``beta``."""

    def __init__(self, dq: int, dk: int, hidden: int, heads: int | None, spec: object) -> None:
        super().__init__()
        beta = getattr(spec, "beta", None)
        self.beta_value = 1.0 if beta in (None, "learned") else float(beta)
        self.beta = nn.Parameter(torch.ones(())) if beta == "learned" else None

    def _b(self) -> Tensor | float:
        return self.beta if self.beta is not None else self.beta_value

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        qn = F.normalize(q, dim=-1, eps=1e-8)
        kn = F.normalize(k, dim=-1, eps=1e-8)
        return self._b() * (qn @ kn.transpose(-1, -2))

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return self._b() * F.cosine_similarity(q, k, dim=-1, eps=1e-8)


class MlpScore(Scorer):
    """vᵀ tanh(W k + b): each item scored alone; ``W`` (dk, H), ``b``, ``v`` (H)."""

    def __init__(self, dq: int, dk: int, hidden: int, heads: int | None, spec: object) -> None:
        super().__init__()
        self.W = _param(heads, dk, hidden)
        self.b = nn.Parameter(torch.zeros(((heads,) if heads else ()) + (hidden,)))
        self.v = _param(heads, hidden)

    def items(self, k: Tensor) -> Tensor:
        e = torch.tanh(k @ self.W + self.b.unsqueeze(-2))  # (B, h, N, H)
        return (e * self.v.unsqueeze(-2)).sum(-1)  # (B, h, N)


class Gat(Scorer):
    """LeakyReLU_0.2(aᵀ[q_i ‖ k_j]) (graph attention): ``a_q`` (dq), ``a_k`` (dk)."""

    def __init__(self, dq: int, dk: int, hidden: int, heads: int | None, spec: object) -> None:
        super().__init__()
        self.a_q = _param(heads, dq)
        self.a_k = _param(heads, dk)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        sq = (q * self.a_q.unsqueeze(-2)).sum(-1)  # (B, h, M)
        sk = (k * self.a_k.unsqueeze(-2)).sum(-1)  # (B, h, N)
        return F.leaky_relu(sq.unsqueeze(-1) + sk.unsqueeze(-2), 0.2)  # (B, h, M, N)

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        sq = (q * self.a_q.unsqueeze(-2)).sum(-1)
        sk = (k * self.a_k.unsqueeze(-2)).sum(-1)
        return F.leaky_relu(sq + sk, 0.2)


class UserScorer(Scorer):
    """A user's scorer module (``ScorerInfo.make``) whose forward(q, k) gives all pairs."""

    broadcasts_batch = False

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        return self.inner(q, k)


SCORER_MODULES: dict[str, Callable[..., Scorer]] = {
    "dot": Dot, "scaled_dot": ScaledDot, "general": General, "additive": Additive,
    "cosine": Cosine, "mlp": MlpScore, "gat": Gat,
}


def make_scorer(fn: str, dq: int, dk: int, hidden: int, heads: int | None,
                spec: object) -> Scorer | None:
    """The module of a content scorer ``fn``, or None when it has no built-in module."""
    from attngraph.kinds.registry import SCORERS

    cls = SCORER_MODULES.get(fn)
    if cls is not None:
        return cls(dq, dk, hidden, heads, spec)
    info = SCORERS.get(fn)
    if info is not None and info.make is not None:
        return UserScorer(info.make(dq, dk, hidden))
    return None
