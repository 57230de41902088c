"""The kinds that combine values: add, mul (elementwise, broadcasting), gain (a learned
scale), pool (over an axis) and concat (on the features). Lowered in
:mod:`attngraph.lower.rules.support`; re-exported by :mod:`attngraph.kinds.support`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Annotated, Literal, NoReturn

from pydantic import Field

from attngraph.ir.graph import Edge, TensorType
from attngraph.kinds.base import MagnitudeCtx, RuleCtx, elementwise_work, kind
from attngraph.spec.models import NodeModel, Ref

__all__ = ["AddSpec", "MulSpec", "GainSpec", "PoolSpec", "ConcatSpec", "is_image",
           "trailing_ones"]


class AddSpec(NodeModel):
    """The sum of its inputs (a residual); a vector broadcasts over items, or over an
    image's channels."""

    kind: Literal["add"]
    from_: Annotated[list[Ref], Field(min_length=2, max_length=64)] = Field(alias="from")
    """Two or more float inputs of one shape and heads, summed: a vector ``[d]`` broadcasts over
    items ``[N, d]``, a vector ``[C]`` over the channels of an image ``[C, H, W]``, and an axis of
    size 1 stretches."""


class MulSpec(NodeModel):
    """The elementwise product of its inputs (a gate σ(W h) ⊙ z); broadcasts like add."""

    kind: Literal["mul"]
    from_: Annotated[list[Ref], Field(min_length=2, max_length=64)] = Field(alias="from")
    """Two or more float inputs of one shape and heads, multiplied elementwise; they broadcast as
    add's do (a vector over items, a vector ``[C]`` over an image's channels, an axis of size 1
    stretches)."""


class GainSpec(NodeModel):
    """γ·x with one learned scalar γ that starts at ``init`` (SAGAN's γ = 0)."""

    kind: Literal["gain"]
    from_: Ref = Field(alias="from")
    """Float values, scaled by a learned scalar γ (weights scaled so are no longer a distribution
    a readout takes)."""
    init: Annotated[float, Field(ge=-1000.0, le=1000.0, allow_inf_nan=False)] = 1.0
    """The initial value of γ."""


class PoolSpec(NodeModel):
    """Items [N, d] pooled over the real items into one vector [d]."""

    kind: Literal["pool"]
    from_: Ref = Field(alias="from")
    """Float items ``[N, d]`` without heads, pooled over the real items into ``[d]``."""
    fn: Literal["mean", "max", "sum"] = "mean"
    """The reduction over the items."""


class ConcatSpec(NodeModel):
    """Its inputs joined on the feature axis."""

    kind: Literal["concat"]
    from_: Annotated[list[Ref], Field(min_length=2, max_length=64)] = Field(alias="from")
    """Two or more inputs without heads, joined on the feature (last) axis; the other axes match."""


def _float(ctx: RuleCtx, role: str = "from") -> TensorType:
    t = ctx.t(role)
    if t.dtype != "float" or t.rank == 0:
        ctx.fail(f"'{ctx.edge(role).ref}' is {t}; this kind needs float features", role,
                 "token ids become vectors through items (embed:) or embedding")
    return t


def _no_heads(ctx: RuleCtx, t: TensorType, role: str = "from") -> None:
    if t.heads:
        ctx.fail(f"'{ctx.edge(role).ref}' still has {t.heads} heads", role,
                 "merge heads in the readout (combine: concat) first")


def is_image(t: TensorType) -> bool:
    """Whether ``t`` is an image ``[C, H, W]``: three fixed axes, no heads, its features
    (the channels) first, as ``conv``, ``items`` and ``glimpse`` read it."""
    return (t.rank == 3 and not t.heads and t.dtype == "float"
            and all(isinstance(d, int) for d in t.dims))


def trailing_ones(t: TensorType, others: list[TensorType]) -> int:
    """How many axes of size 1 follow ``t``'s own when it broadcasts against ``others``:
    2 for a vector ``[C]`` against an image ``[C, H, W]`` (one value per channel, the
    image's features), 0 otherwise (shapes meet at their last axis: features last)."""
    if t.rank == 1 and t.dims != (1,) and any(is_image(o) for o in others):
        return 2
    return 0


def _broadcast(ctx: RuleCtx, what: str) -> tuple:
    """The common shape of the inputs of ``from``, by meaning: a vector ``[d]``
    broadcasts over items ``[N, d]`` (shapes meet at their features, the last axis), a
    vector ``[C]`` over an image ``[C, H, W]`` one value per channel (its features,
    first), and an axis of size 1 stretches (a gate ``[1]`` scales every feature)."""
    edges = list(ctx.node.edges("from"))
    ts = [ctx.type_of(e) for e in edges]
    placed: list[tuple] = []
    for e, t in zip(edges, ts, strict=True):
        image = next((o for o in ts if is_image(o)), None)
        trail = trailing_ones(t, ts)
        if trail and image is not None and t.dims[0] != image.dims[0]:
            c, h, w = image.dims
            ctx.fail(f"'{e.ref}' {t} cannot {what} an image {image}: a vector is one value "
                     f"per channel (an image's features come first), and it has {c} "
                     "channels", str(e.role),
                     f"give a vector of the {c} channels (e.g. a linear with out: {c}); to "
                     f"weight the positions, give a map [{h}, {w}]")
        placed.append((*t.dims, *([1] * trail)))
    dims: list = []
    for shape in sorted(placed, key=lambda x: -len(x)):
        for i, d in enumerate(reversed(shape)):
            if i >= len(dims):
                dims.insert(0, d)
            elif d == 1:
                continue
            elif dims[-1 - i] == 1:
                dims[-1 - i] = d
            elif dims[-1 - i] != d:
                _mismatch(ctx, what, edges, ts, placed, i)
    return tuple(dims)


def _mismatch(ctx: RuleCtx, what: str, edges: list[Edge], ts: list[TensorType],
              placed: list[tuple], i: int) -> NoReturn:
    """Fail for inputs that differ at axis ``i`` from the end (of their ``placed``
    shapes), with a hint that can be followed: a linear changes a fixed feature size;
    nothing changes a length."""
    msg = f"{what} needs inputs of one shape, got {', '.join(str(t) for t in ts)}"
    at = [(e, t, p[-1 - i]) for e, t, p in zip(edges, ts, placed, strict=True)
          if len(p) > i and p[-1 - i] != 1]
    (e0, t0, a), (e1, t1, b) = next((x, y) for x in at for y in at if x[2] != y[2])
    if isinstance(a, int) and isinstance(b, int):
        if i == 0 and not any(is_image(t) for t in ts):
            # features of two fixed sizes: a linear maps one to the other
            e, t, size = (e1, t1, a) if not t1.heads else (e0, t0, b)
            if t.heads:
                ctx.fail(msg, hint=f"give both the same size per head ({a} and {b} now)")
            ctx.fail(msg, hint=f"project '{e.ref}' to {size} features with a linear "
                     f"({{kind: linear, from: {e.ref}, out: {size}}}) and {what} that")
        ctx.fail(msg, hint="give the inputs one shape: only an axis of size 1 stretches (a "
                 "vector [d] broadcasts over items [N, d], a vector [C] over the channels of "
                 "an image [C, H, W])")
    lengths = [x for x in (a, b) if isinstance(x, str)]
    msg += (f"; {' and '.join(lengths)} {'is a length' if len(lengths) == 1 else 'are lengths'}"
            ", known only when a batch arrives, which no linear can change")
    if i > 0:
        # items of two lengths (or a length and a fixed count): one of them pooled into a
        # vector [d] broadcasts over the other's items
        e, t = (e0, t0) if isinstance(a, int) else (e1, t1)
        if t.rank == 2 and not t.heads:
            same = (f"if '{e0.ref}' and '{e1.ref}' hold the same items, declare one length "
                    "on both inputs (length: ...); otherwise " if len(lengths) == 2 else "")
            ctx.fail(msg, hint=f"{same}pool '{e.ref}' into one vector [d] ({{kind: pool, "
                     f"from: {e.ref}}}), which broadcasts over the items")
    ctx.fail(msg, hint="shapes meet at their last axis (the features) and only an axis of "
             "size 1 stretches, so one value per item [N] cannot scale items [N, d]; a "
             "readout (weights: <a softmax over the items>, values: <the items>) sums "
             "weighted items")


@kind("add", AddSpec, lowering="attngraph.lower.rules.support:Add",
      emit="attngraph.lower.export.emit.support:emit_add", transparent=True,
      magnitude=lambda ctx: sum(ctx.ins), sums=True, step="pointwise")
def add_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Residual sum; shapes must match (a vector broadcasts over items)."""
    ts = [ctx.type_of(e) for e in ctx.node.edges("from")]
    heads = {t.heads for t in ts}
    if len(heads) > 1 or any(t.dtype != "float" for t in ts):
        ctx.fail("add needs float inputs with the same heads",
                 hint="token ids become vectors through items (embed:) or embedding; merge "
                 "heads in the readout (combine: concat)")
    return {"": TensorType(_broadcast(ctx, "add"), heads=ts[0].heads)}


@kind("mul", MulSpec, lowering="attngraph.lower.rules.support:Add",
      emit="attngraph.lower.export.emit.support:emit_add", transparent=True,
      work=elementwise_work, magnitude=lambda ctx: math.prod(ctx.ins), step="pointwise")
def mul_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Elementwise product; shapes must match (a vector or a [1] gate broadcasts)."""
    ts = [ctx.type_of(e) for e in ctx.node.edges("from")]
    if len({t.heads for t in ts}) > 1 or any(t.dtype != "float" for t in ts):
        ctx.fail("mul needs float inputs with the same heads",
                 hint="token ids become vectors through items (embed:) or embedding")
    return {"": TensorType(_broadcast(ctx, "mul"), heads=ts[0].heads)}


@kind("gain", GainSpec, lowering="attngraph.lower.rules.support:Gain",
      emit="attngraph.lower.export.emit.support:emit_gain", transparent=True,
      work=elementwise_work, magnitude=lambda ctx: abs(ctx.node.spec.init) * ctx.most(),
      step="pointwise")
def gain_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """γ·x: the input's shape, one parameter."""
    t = ctx.t("from")
    if t.dtype != "float":
        ctx.fail(f"gain multiplies float values, got {t}", "from",
                 "token ids become vectors through items (embed:) or embedding")
    ctx.params += 1
    # γ·p of weights p is weights that sum to γ, not to one: no longer a distribution
    return {"": replace(t, simplex=False)}


def _pool_magnitude(ctx: MagnitudeCtx) -> float:
    """A sum over N items is up to N times an item; a mean or max is an item."""
    t = ctx.in_types[0] if ctx.in_types else None
    if ctx.node.spec.fn != "sum" or t is None or not t.dims:
        return ctx.most()
    return ctx.most() * ctx.n(t.dims[0])


@kind("pool", PoolSpec, lowering="attngraph.lower.rules.support:Pool",
      emit="attngraph.lower.export.emit.support:emit_pool", transparent=True,
      work=elementwise_work, magnitude=_pool_magnitude)
def pool_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d] -> [d]: the mean, max or sum over the real items."""
    t = ctx.t("from")
    if t.dtype != "float" or t.rank != 2 or t.heads:
        ctx.fail(f"pool reduces items [N, d] to one vector [d], got {t}", "from",
                 "merge heads in the readout first" if t.heads else
                 "give it float items [N, d]")
    return {"": TensorType(t.dims[1:])}


@kind("concat", ConcatSpec, lowering="attngraph.lower.rules.support:Concat",
      emit="attngraph.lower.export.emit.support:emit_concat", transparent=True, step="pointwise")
def concat_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Join on the feature axis; other axes must match."""
    ts = [ctx.type_of(e) for e in ctx.node.edges("from")]
    for e, t in zip(ctx.node.edges("from"), ts, strict=True):
        if t.dtype != "float":
            ctx.fail(f"concat joins float features, but '{e.ref}' is {t}", str(e.role),
                     "token ids become vectors through items (embed:) or embedding")
    lead = {t.dims[:-1] for t in ts}
    if len(lead) > 1 or any(t.rank == 0 or t.heads for t in ts):
        shapes = ", ".join(str(t) for t in ts)
        ctx.fail(f"concat joins features of the same items, got {shapes}",
                 hint="concat inputs with the same items axes and no heads (merge heads in "
                 "the readout first)")
    d = sum(ctx.fixed(ctx.type_of(e).dims[-1], f"the feature size of '{e.ref}'", str(e.role))
            for e in ctx.node.edges("from"))
    return {"": TensorType((*ts[0].dims[:-1], d))}
