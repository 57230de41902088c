"""What every scorer module shares: :class:`Scorer` (how a scorer node reads its query
and keys, :class:`QueryRead`, and scores them), and the parameters the functions make.
The functions' modules: :mod:`attngraph.lower.rules.scorers` (the lowering, dot
products, cosine, graph attention, positions), :mod:`attngraph.lower.rules.scorers_additive`
(tanh layers) and :mod:`attngraph.lower.rules.scorers_user` (a user's function)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import traits_of
from attngraph.kinds.scorers import score_heads
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["QueryRead", "Scorer", "key_type"]


def _param(heads: int | None, *shape: int, scale: float | None = None) -> nn.Parameter:
    """A parameter (heads, *shape) or (*shape), uniform in ±1/√fan_in."""
    full = ((heads,) if heads else ()) + shape
    bound = scale if scale is not None else 1.0 / math.sqrt(shape[0])
    return nn.Parameter(torch.empty(full).uniform_(-bound, bound))


def _vec(p: Tensor) -> Tensor:
    """A per-head vector (h, H) -> (h, 1, 1, H) so it broadcasts over (M, N)."""
    return p.unsqueeze(-2).unsqueeze(-2)


@dataclass(frozen=True)
class QueryRead:
    """How a scorer node reads its query.

    ``pairs``: all pairs or aligned (query i with key i); ``has_query``: whether
    there is one; ``vector_query``: one query vector ``[d]`` rather than ``[M, d]``;
    ``learned``: the size of a learned query vector (a parameter ``query``), or None;
    ``key``: the keys' type (for scorers that read positions).
    """

    pairs: str = "all"
    has_query: bool = True
    vector_query: bool = False
    learned: int | None = None
    heads: int | None = None
    key: TensorType | None = None
    #: query heads per key head (grouped-query attention), 1 otherwise
    groups: int = 1
    #: per-item features of the keys' items (an additive score's V f_i term)
    features: TensorType | None = None

    #: the keys arrive prepared (``U k``, computed once before a loop's steps)
    prepared: bool = False

    @classmethod
    def of(cls, ctx: LowerCtx) -> QueryRead:
        """How the scorer node of ``ctx`` reads its query."""
        s = ctx.spec
        learned = getattr(s.query, "learned", None)
        has = ctx.has("query")
        k, prepared = key_type(ctx)
        heads = score_heads(ctx.t("query") if has else None, k)
        return cls(pairs=s.pairs, has_query=learned is not None or has,
                   vector_query=learned is not None or (has and ctx.t("query").rank == 1),
                   learned=int(learned) if learned is not None else None,
                   heads=heads, key=k, groups=(heads or 1) // (k.heads or 1),
                   features=ctx.t("features") if ctx.has("features") else None,
                   prepared=prepared)


def key_type(ctx: LowerCtx) -> tuple[TensorType, bool]:
    """The type of the scorer's keys as the spec gives them, and whether they arrive
    prepared by a hoisted ``prepare`` node (a ``part`` of this node's work, whose input
    has that type)."""
    e = ctx.edge("key")
    src = ctx.graph.node(e.src)
    if traits_of(src).part and src.spec.of == ctx.node.id:
        inner = src.inputs[0]
        return ctx.graph.node(inner.src).types[inner.port], True
    return ctx.t("key"), False


class Scorer(NodeModule):
    """Base: reads the query as :class:`QueryRead` says; ``aligned`` defaults to the
    diagonal of ``all``. ``items(k)`` scores items without a query (fn mlp)."""

    #: whether ``all``/``aligned`` broadcast a batch-1 query against B keys (a
    #: learned query is then scored once, not once per batch row)
    broadcasts_batch = True

    def __init__(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                 read: QueryRead | None = None) -> None:
        super().__init__()
        read = read if read is not None else QueryRead()
        self.pairs = read.pairs
        self.has_query = read.has_query
        self.groups = read.groups
        self.prepared = read.prepared
        self.vector_query = read.vector_query
        self.make_params(dq, dk, hidden, heads, spec, read)
        # made after the function's own parameters (the order seeds depend on)
        self.query = _param(read.heads, read.learned) if read.learned is not None else None

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        """Create the function's parameters (none by default)."""

    def prepare(self, role: str, k: Tensor) -> Tensor:
        """The keys mapped alone (``ScorerInfo.prepares_key``), query heads expanded."""
        msg = f"{type(self).__name__} cannot prepare its {role} alone"
        raise NotImplementedError(msg)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        k = x["key"]  # (B, [h,] N, dk)
        if self.groups > 1 and not self.prepared:  # grouped-query: a key head per group
            k = k.repeat_interleave(self.groups, dim=1)
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
            return self.one(q, k)  # (B, [h,] N)
        if self.pairs == "aligned":
            return self.aligned(q, k)  # (B, [h,] N)
        return self.all(q, k)  # (B, [h,] M, N)

    def items(self, k: Tensor) -> Tensor:
        raise NotImplementedError

    def one(self, q: Tensor, k: Tensor) -> Tensor:
        """Scores of one query vector per row, (B, [h,] dq), against every key."""
        return self.all(q.unsqueeze(-2), k).squeeze(-2)  # (B, [h,] N)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        raise NotImplementedError

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return torch.diagonal(self.all(q, k), dim1=-2, dim2=-1)
