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

The base and the functions of a tanh layer and a user's function live in
:mod:`~attngraph.lower.rules.scorers_base`, :mod:`~attngraph.lower.rules.scorers_additive`
and :mod:`~attngraph.lower.rules.scorers_user`; every name is importable from here,
where the kinds name them (``"attngraph.lower.rules.scorers:Additive"``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.errors import LoweringError
from attngraph.kinds.hooks import call_hook, instance_of, resolve_hook
from attngraph.kinds.scorers import SCORERS
from attngraph.lower.rules.masks import padding_mask
from attngraph.lower.rules.scorers_additive import Additive, MlpScore
from attngraph.lower.rules.scorers_base import QueryRead, Scorer, _param, key_type
from attngraph.lower.rules.scorers_user import UserScorer, _user_scorer
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = ["QueryRead", "Scorer", "lower_scorer", "key_type", "Dot", "ScaledDot", "General",
           "Additive", "Cosine", "MlpScore", "Gat", "Gatv2", "UserScorer", "Location",
           "Prepare"]


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
