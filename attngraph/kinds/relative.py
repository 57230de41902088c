"""Position inside scoring: relative position biases added to scores (ALiBi, T5
buckets) and rotary embeddings of queries and keys (RoPE). Lowered in
:mod:`attngraph.lower.rules.relative`.

Positions are item indices 0, 1, …: padding is trailing, so a real item's position
never depends on the padding after it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Literal

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, elementwise_work, kind
from attngraph.spec.models import NodeModel, PosInt, Ref, Scale

__all__ = ["PositionBiasSpec", "RotarySpec", "alibi_slopes", "BIAS_FORMULAS"]

#: What each ``fn`` of a position bias adds to the scores (``describe`` says it).
BIAS_FORMULAS = {"alibi": "ALiBi: −m_h·|i − j|, a fixed slope per head",
                 "t5": "T5: a learned scalar per head and bucket of j − i"}


class PositionBiasSpec(NodeModel):
    """Scores plus a bias that depends on the distance j − i of query i and item j."""

    kind: Literal["position_bias"]
    scores: Ref
    """Scores ``[M, N]`` (with or without heads) to add the bias to."""
    fn: Literal["alibi", "t5"]
    """``alibi``: -m_h·|i - j| with a fixed slope per head (Press et al. 2022); ``t5``: a learned
    scalar per head for each bucket of j - i (Raffel et al. 2020)."""
    buckets: Annotated[int, Field(ge=2, le=1024)] = 32
    """t5: the number of buckets (half per direction when bidirectional): exact distances first,
    then logarithmically wider."""
    max_distance: Annotated[int, Field(ge=2, le=1_000_000)] = 128
    """t5: distances from here on share the last bucket."""
    bidirectional: bool = True
    """t5: separate buckets for items after the query (an encoder); false for a causal decoder."""


class RotarySpec(NodeModel):
    """Queries or keys rotated by their position (RoPE, Su et al. 2021)."""

    kind: Literal["rotary"]
    from_: Ref = Field(alias="from")
    """Queries or keys over items ``[N, d]`` (per head), d even."""
    base: Scale | PosInt = 10000
    """The base of the angles: θ_i = base^(-2i/d) for the feature pairs i = 0 … d/2 - 1."""


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's slope per head: 2^(−8k/h) for k = 1 … h when h is a power of two; for
    other h, the slopes of the largest power of two n below h, then every other slope
    of 2n (the paper's rule, as its reference code computes it)."""
    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (k + 1) for k in range(n)]
    n = 1 << (heads.bit_length() - 1)
    if n == heads:
        return power_of_two(heads)
    return power_of_two(n) + power_of_two(2 * n)[0::2][: heads - n]


@kind("position_bias", PositionBiasSpec, lowering="attngraph.lower.rules.relative:PositionBias",
      emit="attngraph.lower.export.emit.relative:emit_position_bias",
      role="support", style=Style("#fff2cc", "box"), work=elementwise_work, sums=True,
      positions="bias", step="relative")
def position_bias_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """The scores' type; t5 learns ``buckets`` scalars per head."""
    s = ctx.spec
    t = ctx.t("scores")
    if t.dtype != "float" or t.rank != 2:
        ctx.fail(f"a relative position bias needs scores [M, N] of queries against items, "
                 f"got {t}", "scores", "give it the scores of a scorer with queries [M, d] "
                 "(pairs: all)")
    if t.weights:
        ctx.fail("a relative position bias is added to scores, not to weights", "scores",
                 "add it before the softmax")
    if s.fn == "t5":
        # the bucket rule divides by log(max_distance / exact): both must be in range
        exact = (s.buckets // 2 if s.bidirectional else s.buckets) // 2
        if exact < 1:
            ctx.fail(f"{s.buckets} buckets leave no bucket of exact distances",
                     field="buckets", hint=f"give at least {4 if s.bidirectional else 2} "
                     "buckets (32 in T5)")
        if s.max_distance <= exact:
            ctx.fail(f"max_distance {s.max_distance} must exceed the {exact} distances that "
                     "have a bucket each", field="max_distance",
                     hint=f"raise max_distance above {exact} (128 in T5), or use fewer buckets")
        ctx.params += s.buckets * (t.heads or 1)
    else:
        for name in ("buckets", "max_distance", "bidirectional"):
            if name in s.model_fields_set:
                ctx.fail(f"'{name}' applies to fn t5, not alibi", field=name,
                         hint="drop it, or use fn: t5")
    return {"": t}


@kind("rotary", RotarySpec, lowering="attngraph.lower.rules.relative:Rotary", role="projection",
      emit="attngraph.lower.export.emit.relative:emit_rotary",
      style=Style("#d9ead3", "box"), transparent=True, work=elementwise_work,
      positions="rotary", step="indexed")
def rotary_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """The same type: each pair of features rotated by position · θ_i (per head)."""
    t = ctx.t("from")
    if t.dtype != "float" or t.rank != 2:
        ctx.fail(f"rotary embeddings rotate queries or keys of items [N, d] by their position, "
                 f"got {t}", "from", "give it a queries or keys node over items")
    d = ctx.features("from")
    if d % 2:
        ctx.fail(f"rotary embeddings rotate pairs of features, but the size (per head) is {d}",
                 "from", "make the per-head size even")
    if ctx.spec.base <= 1:
        ctx.fail(f"a base of {ctx.spec.base:g} gives angles θ_i = base^(−2i/d) that do not "
                 "fall with i", field="base", hint="write a base above 1 (10000 in RoFormer)")
    # rotated values: whatever came in, they are not weights that sum to one any more
    return {"": replace(t, simplex=False, weights=False)}
