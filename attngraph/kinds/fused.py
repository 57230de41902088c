"""The fused attention kinds the passes make, never written in a spec: ``attention``
(:mod:`attngraph.passes.fuse_attention`: scorer, softmax and readout in one SDPA
call) and ``linear_attention`` (:mod:`attngraph.passes.linear_attention`). Lowered
in :mod:`attngraph.lower.rules.attention`; re-exported by :mod:`attngraph.kinds.attention`.
"""

from __future__ import annotations

from typing import Literal

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, Work, WorkCtx, kind
from attngraph.kinds.mask import MaskSpec
from attngraph.spec.models import NodeModel

__all__ = ["FusedAttentionSpec", "LinearAttentionSpec"]


class FusedAttentionSpec(NodeModel):
    """A fused attention node: what the scorer, softmax and readout it replaces said."""

    kind: Literal["attention"] = "attention"
    fused: str
    mask: MaskSpec | None = None
    temperature: float = 1.0
    #: the scores divided q·k by √d (a ``scaled_dot`` scorer; False: ``dot``, q·k)
    scaled: bool = True
    combine: Literal["concat", "mean"] = "concat"
    out: int | None = None
    bias: bool = True


def _attention_work(ctx: WorkCtx) -> Work:
    """Scores and the weighted sum of every (query, key) pair; the scores are a tensor."""
    q, k = ctx.t("query"), ctx.t("key")
    pairs = (q.heads or 1) * ctx.n(k.dims[0]) * (ctx.n(q.dims[0]) if q.rank == 2 else 1)
    out = ctx.out()
    macs = pairs * (ctx.features("key") + ctx.features("values"))
    return Work(macs + ctx.node.params * ctx.positions(out), inner=pairs)


def _readout_type(ctx: RuleCtx, what: str) -> dict[str, TensorType]:
    """The readout's type of an attention node that takes queries, keys and values
    (``what`` names it in the errors): [d] per query, heads merged by ``combine``,
    then the ``out`` projection's size."""
    q, k, v = ctx.t("query"), ctx.need_items("key", what), ctx.t("values")
    if q.rank not in (1, 2) or q.dims[-1] != k.dims[-1] or (q.heads or 1) % (k.heads or 1):
        ctx.fail(f"{what} needs queries of the keys' size and heads, got {q} and {k}",
                 "query")
    if v.rank != 2 or v.dims[0] != k.dims[0] or (q.heads or 1) % (v.heads or 1):
        ctx.fail(f"{what} needs values over the keys' items, got {v} and {k}", "values")
    s = ctx.spec
    d = ctx.features("values") * (q.heads if q.heads and s.combine == "concat" else 1)
    if s.out is not None:
        ctx.params += d * s.out + (s.out if s.bias else 0)
        d = s.out
    return {"": TensorType((*q.dims[:-1], d))}


@kind("attention", FusedAttentionSpec, lowering="attngraph.lower.rules.attention:FusedAttention",
      emit="attngraph.lower.export.emit.attention:emit_attention",
      role="attention", style=Style("#ead1dc", "box"), internal=True, work=_attention_work)
def attention_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """softmax(q·k/√d) read out over the values, as one fused node: the readout's type."""
    return _readout_type(ctx, "fused attention")


class LinearAttentionSpec(NodeModel):
    """A kernel attention chain (φ(q)·φ(k) → sum → readout) run in linear time."""

    kind: Literal["linear_attention"] = "linear_attention"
    fused: str
    mask: MaskSpec | None = None
    combine: Literal["concat", "mean"] = "concat"
    out: int | None = None
    bias: bool = True


def _linear_attention_work(ctx: WorkCtx) -> Work:
    """Σ_j φ(k_j) v_jᵀ once (or a running one per item), then one read per query."""
    q, k = ctx.t("query"), ctx.t("key")
    h = q.heads or 1
    dk, dv = ctx.features("key"), ctx.features("values")
    n = ctx.n(k.dims[0])
    m = ctx.n(q.dims[0]) if q.rank == 2 else 1
    causal = bool(ctx.spec.mask and ctx.spec.mask.causal)
    held = h * n * dk * dv if causal else h * dk * dv
    out = ctx.out()
    return Work(h * (n + m) * dk * dv + ctx.node.params * ctx.positions(out), inner=held)


@kind("linear_attention", LinearAttentionSpec,
      emit="attngraph.lower.export.emit.attention:emit_linear_attention",
      lowering="attngraph.lower.rules.attention:LinearAttention", role="attention",
      style=Style("#ead1dc", "box"), internal=True, work=_linear_attention_work)
def linear_attention_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """The readout's type: [d] per query, heads merged by ``combine``."""
    return _readout_type(ctx, "linear attention")
