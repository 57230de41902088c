"""The ``scorer`` kind's lowering: each scorer function of :mod:`attngraph.kinds.scorers`
as a module, ``all(q, k)`` scoring every query against every key.

``q`` is ``(B, [h,] M, dq)``, ``k`` is ``(B, [h,] N, dk)``; ``all`` returns
``(B, [h,] M, N)`` and ``aligned(q, k)`` (M = N) returns ``(B, [h,] N)``.
Parameters carry a leading head axis only when the scorer works per head, so the
matmuls below broadcast the same way with and without heads. A module is built
as ``cls(dq, dk, hidden, heads, spec, read)``: subclasses make their parameters
in :meth:`Scorer.make_params`; :class:`QueryRead` says how the node reads its
query. A user-registered :class:`~attngraph.kinds.scorers.ScorerInfo` with
``make`` is wrapped in :class:`UserScorer`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.errors import LoweringError
from attngraph.ir.graph import TensorType
from attngraph.kinds.hooks import call_hook, hook_name, instance_of, resolve_hook
from attngraph.kinds.scorers import SCORERS, score_heads, scorer_count
from attngraph.lower.rules.masks import padding_mask
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["QueryRead", "Scorer", "lower_scorer"]


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
    prepared by a hoisted ``prepare`` node (whose input has that type)."""
    e = ctx.edge("key")
    src = ctx.graph.node(e.src)
    if src.kind == "prepare" and src.spec.of == ctx.node.id:
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


class Dot(Scorer):
    """q·k."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        self.scale = 1.0

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        s = q @ k.transpose(-1, -2)  # (B, h, M, N)
        return s if self.scale == 1.0 else s * self.scale

    def one(self, q: Tensor, k: Tensor) -> Tensor:
        if q.dim() == 2 and k.dim() == 3 and k.stride(0) == 0:
            # keys shared by the batch (learned items, positions): one matrix product
            s = q @ k[0].transpose(0, 1)  # (B, N)
            return s if self.scale == 1.0 else s * self.scale
        return super().one(q, k)

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return (q * k).sum(-1) * self.scale  # (B, h, N)


class ScaledDot(Dot):
    """q·k/√d."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        self.scale = 1.0 / math.sqrt(dk)


class General(Scorer):
    """qᵀ W k (Luong): ``W`` ([h,] dq, dk)."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        self.W = _param(heads, dq, dk)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        return (q @ self.W) @ k.transpose(-1, -2)  # (B, h, M, N)

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return ((q @ self.W) * k).sum(-1)


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


class Cosine(Scorer):
    """β·cos(q, k); β fixed or a learned ``beta``."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        beta = getattr(spec, "beta", None)
        self.beta_value = 1.0 if beta in (None, "learned") else float(beta)
        # a learned β per head: () without heads, (h, 1) with
        shape = (heads, 1) if heads else ()
        self.beta = nn.Parameter(torch.ones(shape)) if beta == "learned" else None

    def _b(self, rows: bool) -> Tensor | float:
        """β shaped to scale (B, [h,] [M,] N) scores; ``rows`` when there is an M axis."""
        if self.beta is None:
            return self.beta_value
        return self.beta.unsqueeze(-1) if rows and self.beta.dim() else self.beta

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        qn = F.normalize(q, dim=-1, eps=1e-8)
        kn = F.normalize(k, dim=-1, eps=1e-8)
        return self._b(True) * (qn @ kn.transpose(-1, -2))

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return self._b(False) * F.cosine_similarity(q, k, dim=-1, eps=1e-8)


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


class Gat(Scorer):
    """LeakyReLU_0.2(aᵀ[q_i ‖ k_j]) (graph attention): ``a_q`` (dq), ``a_k`` (dk)."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
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


class Gatv2(Scorer):
    """aᵀ LeakyReLU_0.2(q_i + k_j) (GATv2, Brody et al. 2022): with q = W_r h_i and
    k = W_l h_j projected by the spec, this is aᵀ LeakyReLU(W [h_i ‖ h_j]); ``a`` ([h,] d)."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        self.a = _param(heads, dk)

    def _score(self, e: Tensor, pairs: int) -> Tensor:
        """aᵀ over the last axis of ``e`` (B, [h,] *pairs-axes, d), ``a`` per head."""
        a = self.a if self.a.dim() == 1 else self.a.reshape(
            self.a.shape[0], *([1] * pairs), self.a.shape[1])
        return (F.leaky_relu(e, 0.2) * a).sum(-1)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        return self._score(q.unsqueeze(-2) + k.unsqueeze(-3), 2)  # (B, [h,] M, N)

    def aligned(self, q: Tensor, k: Tensor) -> Tensor:
        return self._score(q + k, 1)  # (B, [h,] N)


class UserScorer(Scorer):
    """A user's scorer module (``ScorerInfo.make``) whose ``forward(q, k)`` gives the
    scores of all pairs; it may also take ``mask`` (the keys' padding, (B, N) bool,
    True = real) and ``positions`` (the keys' item indices, (N,)) by keyword. What it
    raises, and scores of another shape than declared, fail naming the function (the
    run-time wrapper adds the node and its line)."""

    broadcasts_batch = False

    def __init__(self, inner: nn.Module, read: QueryRead, name: str) -> None:
        super().__init__(0, 0, 0, None, None, read)
        self.inner = inner
        self.fn = name
        self.key_type = read.key
        takes = _keywords(inner.forward)
        self.wants = {w for w in ("mask", "positions") if w in takes or "**" in takes}

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        self._extra: dict[str, Tensor | None] = {}
        k = x["key"]
        if "mask" in self.wants and self.key_type is not None:
            m = padding_mask(rt, self.key_type.with_dims(self.key_type.dims[0]))
            self._extra["mask"] = m
        if "positions" in self.wants:
            self._extra["positions"] = torch.arange(k.shape[-2], device=k.device)
        return super().forward(x, rt)

    def all(self, q: Tensor, k: Tensor) -> Tensor:
        try:
            out = self.inner(q, k, **getattr(self, "_extra", {}))
        except Exception as exc:  # noqa: BLE001 - the user's code: name it, keep the cause
            msg = f"scorer fn '{self.fn}' raised {type(exc).__name__}: {exc}"
            raise RuntimeError(msg) from exc
        want = (*torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
        if not isinstance(out, Tensor) or tuple(out.shape) != tuple(want):
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            msg = (f"scorer fn '{self.fn}' returned scores of shape {got}, but scores of "
                   f"{q.shape[-2]} queries against {k.shape[-2]} keys are {tuple(want)}")
            raise ValueError(msg)
        return out


def _keywords(fn: Any) -> set[str]:
    """The parameter names ``fn`` takes (``**`` when it takes any keyword)."""
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    return {"**" if p.kind is p.VAR_KEYWORD else p.name for p in params}


class Location(Scorer):
    """Position scores: a learned score per position, or a Gaussian window around
    p = L·sigmoid(vᵀ tanh(W q)) where L is each row's number of real items."""

    def make_params(self, dq: int, dk: int, hidden: int, heads: int | None, spec: Any,
                    read: QueryRead) -> None:
        s = spec
        if read.key is None:
            msg = "a location scorer needs the keys' type"
            raise ValueError(msg)
        k = read.key
        self.gaussian = (s.mode or ("gaussian" if read.has_query else "learned")) == "gaussian"
        self.sigma = float(s.sigma) if s.sigma is not None else 1.0
        self.key_type = k
        if self.gaussian:
            hid = int(s.hidden) if s.hidden is not None else dq
            self.W = _param(None, dq, hid)
            self.v = _param(None, hid)
        else:
            n = k.dims[0]
            max_len = s.max_len if s.max_len is not None else n
            self.weight = nn.Parameter(torch.zeros(int(max_len)))

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        k = x["key"]
        n = k.shape[-2]
        if not self.gaussian:
            if n > self.weight.shape[0]:
                # the run-time wrapper names the node and its line
                msg = (f"the learned scores cover max_len {self.weight.shape[0]} positions, "
                       f"but this input has {n} items")
                raise ValueError(msg)
            return self.weight[:n].expand(k.shape[0], n)  # (B, N)
        q = x.get("query")  # (B, [M,] dq)
        if q is None:  # a learned query: one position predicted for every row
            if self.query is None:
                msg = "a gaussian location scorer needs a query"
                raise ValueError(msg)
            q = self.query.unsqueeze(0).expand(k.shape[0], *self.query.shape)  # (B, dq)
        p = torch.sigmoid(torch.tanh(q @ self.W) @ self.v)  # (B, [M])
        mask = padding_mask(rt, self.key_type.with_dims(self.key_type.dims[0]))
        if mask is not None:
            length = mask.sum(-1).to(q.dtype)  # (B,) real items per row
        else:
            length = torch.full((q.shape[0],), float(n), dtype=q.dtype, device=q.device)
        centre = (length.reshape(-1, *([1] * (p.dim() - 1))) * p).unsqueeze(-1)  # (B, [M,] 1)
        i = torch.arange(n, device=k.device, dtype=q.dtype)
        return -((i - centre) ** 2) / (2 * self.sigma**2)  # (B, [M,] N)


def lower_scorer(ctx: LowerCtx) -> NodeModule:
    """Scores [N] or [M, N] by the registered scorer function ``fn``."""
    s = ctx.spec
    info = SCORERS[s.fn]
    k, _ = key_type(ctx)
    dk = int(k.dims[-1])
    read = QueryRead.of(ctx)
    if read.learned is not None:
        dq = read.learned
    elif ctx.has("query"):
        dq = int(ctx.t("query").dims[-1])
    else:
        dq = dk
    hidden = int(s.hidden) if s.hidden is not None else dk
    if info.module is not None:
        what = f"scorer fn '{s.fn}': module"
        cls = resolve_hook(info.module, node=ctx.node, what=what, error=LoweringError,
                           loc=ctx.node.where("fn"))
        return call_hook(cls, dq, dk, hidden, read.heads, s, read,  # type: ignore[no-any-return]
                         node=ctx.node, what=f"{what} {info.module}(...)", error=LoweringError,
                         expect=instance_of(NodeModule, "a NodeModule"),
                         loc=ctx.node.where("fn"))
    if info.make is not None:
        return _user_scorer(ctx, info, dq, dk, hidden, read)
    ctx.fail(f"scorer fn '{s.fn}' has no module",
             hint="give its ScorerInfo a make(dq, dk, hidden) -> nn.Module")


def _user_scorer(ctx: LowerCtx, info: Any, dq: int, dk: int, hidden: int,
                 read: QueryRead) -> NodeModule:
    """Build a registered function's module: told the head count when its ``make``
    takes ``heads``; what ``make`` raises, and a parameter count other than it
    declared, are located errors at the node."""
    where = hook_name(info.make)
    takes = _keywords(info.make)
    heads = read.heads
    declared = scorer_count(ctx.node, info, "params", dq, dk, hidden, error=LoweringError)
    if heads and heads > 1 and "heads" not in takes and "**" not in takes and declared:
        ctx.fail(f"scorer fn '{info.name}' has parameters but its make() takes no head count, "
                 f"so it cannot give each of the {heads} heads its own",
                 hint=f"give {where} a 'heads' parameter: make(dq, dk, hidden, heads) and "
                 "parameters with a leading head axis")
    kw = {"heads": heads} if "heads" in takes or "**" in takes else {}
    inner = call_hook(info.make, dq, dk, hidden, **kw, node=ctx.node, error=LoweringError,
                      what=f"scorer fn '{info.name}': make({dq}, {dk}, {hidden})",
                      expect=instance_of(nn.Module, "an nn.Module"), loc=ctx.node.where("fn"))
    declared *= heads or 1
    has = sum(p.numel() for p in inner.parameters())
    if has != declared:
        ctx.fail(f"scorer fn '{info.name}' declares {declared:,} parameters "
                 f"(params({dq}, {dk}, {hidden})" + (f" × {heads} heads" if heads else "")
                 + f"), but its module has {has:,}",
                 hint="make its ScorerInfo params(dq, dk, hidden) count the module's "
                 "parameters (per head), so that validate and the resource guard are true")
    return UserScorer(inner, read, info.name)


class Prepare(NodeModule):
    """A ``prepare`` node: its owner's :meth:`Scorer.prepare` of one input. The owner
    holds the parameters; it is kept outside the module tree (a plain list), so that
    state dicts and ``parameters()`` list them once, under the owner."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        self.role = str(ctx.spec.role)
        self._owner: list[Scorer] = []

    def bind(self, owner: nn.Module) -> None:
        """Use ``owner``'s parameters (called once the graph's nodes are lowered)."""
        if not isinstance(owner, Scorer):
            msg = f"a prepared {self.role} needs a scorer, not {type(owner).__name__}"
            raise TypeError(msg)
        self._owner = [owner]

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return self._owner[0].prepare(self.role, x["from"])  # (B, [h,] N, H)
