"""The supporting kinds: linear, mlp, embedding, position, norm, add, mul, gain, pool,
concat, dropout.

Lowered in :mod:`attngraph.lower.support`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Annotated, Literal, NoReturn

from pydantic import Field

from attngraph.ir.graph import Edge, Node, TensorType
from attngraph.kinds.activations import ActivationName
from attngraph.kinds.base import MagnitudeCtx, RuleCtx, Work, WorkCtx, elementwise_work, kind
from attngraph.spec.models import Ident, NodeModel, Prob, Ref, Size


class LinearSpec(NodeModel):
    """A dense layer on the last axis, with an optional activation."""

    kind: Literal["linear"]
    from_: Ref = Field(alias="from")
    """Float features (no heads) to map."""
    out: Size
    """Output size; a size."""
    bias: bool = True
    """Whether the map has a bias."""
    act: ActivationName = "none"
    """The activation after the map: an entry of the activation registry."""
    tie: Ident | None = None
    """An embedding (or items with ``embed``) whose table ``[vocab, d]`` is this layer's weight:
    ``out`` must be the vocab and the input size d (tied input and output embeddings); the table is
    counted once."""


class MlpSpec(NodeModel):
    """A multi-layer perceptron on the last axis."""

    kind: Literal["mlp"]
    from_: Ref = Field(alias="from")
    """Float features."""
    hidden: Size
    """The hidden size; a size."""
    out: Size
    """Output size; a size."""
    act: ActivationName = "relu"
    """The hidden layers' activation: an entry of the activation registry."""
    layers: Annotated[int, Field(ge=1, le=16)] = 1
    """Number of hidden layers."""


class EmbeddingSpec(NodeModel):
    """A lookup table from ids to vectors."""

    kind: Literal["embedding"]
    from_: Ref = Field(alias="from")
    """Ids: a tokens or labels input, or ids fed to a loop body."""
    dim: Size
    """Size of each looked-up vector; a size."""
    vocab: Size | None = None
    """Number of ids in the table (the input's vocab or classes if unset; required when ``from`` is
    not an input); a size."""


class PositionSpec(NodeModel):
    """Position vectors of the items of ``from``: sinusoidal, learned, or patch centres."""

    kind: Literal["position"]
    from_: Ref = Field(alias="from")
    """Anything with an items (first) axis; for ``xy``, items cut from an image."""
    dim: Size | None = None
    """Vector size (even for sinusoidal; 2 for xy); a size."""
    encoding: Literal["sinusoidal", "learned", "xy"] = "sinusoidal"
    """Fixed sin/cos of the position, a learned vector per position, or the (x, y) centre of each
    image patch."""
    max_len: Size | None = None
    """learned: the number of positions, the longest N a forward may take (required when N is
    symbolic; N if unset); a size."""


class NormSpec(NodeModel):
    """Layer or RMS normalisation over features."""

    kind: Literal["norm"]
    from_: Ref = Field(alias="from")
    """Float features, normalised over their feature (last) axis."""
    fn: Literal["layer", "rms"] = "layer"
    """Layer norm (a learned scale and shift) or RMS norm (a learned scale)."""
    eps: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] | None = None
    """Added to the variance (mean square) before the square root (torch's default if unset: 1e-5
    for layer, the dtype's epsilon for rms)."""


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


class DropoutSpec(NodeModel):
    """Dropout with probability ``p`` in training; the identity in eval."""

    kind: Literal["dropout"]
    from_: Ref = Field(alias="from")
    """Any value; the same type comes out (weights stay weights)."""
    p: Prob = 0.1
    """The probability of zeroing each float value, in training only (what is kept is scaled
    by 1/(1 - p))."""


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


@kind("linear", LinearSpec, lowering="attngraph.lower.support:lower_linear",
      emit="attngraph.lower.emit.support:emit_linear", transparent=True)
def linear_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[..., d] -> [..., out]."""
    t = _float(ctx)
    _no_heads(ctx, t)
    d, out = ctx.features("from"), ctx.spec.out
    ctx.params += d * out + (out if ctx.spec.bias else 0)
    # new values: whatever the input was (weights that sum to one), these are features
    return {"": TensorType((*t.dims[:-1], out))}


def _mlp_work(ctx: WorkCtx) -> Work:
    """Its weights once per position; each layer's hidden vectors (and their activation)
    are tensors of their own."""
    out = ctx.out()
    hidden = ctx.positions(out) * ctx.spec.hidden
    return Work(ctx.node.params * ctx.positions(out) + ctx.elements(out), inner=hidden,
                kept=2 * ctx.spec.layers * hidden)


@kind("mlp", MlpSpec, lowering="attngraph.lower.support:lower_mlp",
      emit="attngraph.lower.emit.support:emit_mlp", transparent=True,
      work=_mlp_work)
def mlp_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[..., d] -> hidden (× layers) -> [..., out]."""
    t = _float(ctx)
    _no_heads(ctx, t)
    d, h, out = ctx.features("from"), ctx.spec.hidden, ctx.spec.out
    ctx.params += d * h + h + (ctx.spec.layers - 1) * (h * h + h) + h * out + out
    return {"": TensorType((*t.dims[:-1], out))}


@kind("embedding", EmbeddingSpec, lowering="attngraph.lower.support:lower_embedding",
      emit="attngraph.lower.emit.support:emit_embedding",
      work=elementwise_work)
def embedding_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Ids [...] -> [..., dim]."""
    t = ctx.t("from")
    if t.dtype != "long":
        ctx.fail(f"embedding looks up ids, but '{ctx.edge('from').ref}' is {t}", "from",
                 "give it token ids (a tokens or labels input, or a loop's fed ids); "
                 "vectors go through linear instead")
    src = ctx.src("from")
    ids = ctx.id_bound(ctx.edge("from"))
    vocab = ctx.spec.vocab
    if vocab is None and src.is_input and src.spec is not None:
        vocab = ids
    if vocab is None:
        ctx.fail("embedding needs 'vocab: <size>'", hint="add vocab: <number of ids>")
    if ids is not None and vocab < ids:
        ctx.fail(f"a table of vocab {vocab:,} rows cannot look up the ids of "
                 f"'{ctx.edge('from').ref}', which go up to {ids - 1:,}", hint=f"make vocab at "
                 f"least {ids:,} (the ids' vocab)", field="vocab")
    ctx.params += vocab * ctx.spec.dim
    return {"": TensorType((*t.dims, ctx.spec.dim))}


def image_grid(src: Node, type_of: Callable[[Edge], TensorType]) -> tuple[int, int]:
    """``(rows, cols)`` of the items an ``items`` node cuts from an image.

    ``src`` is the node that made the items; raises ``ValueError`` when it is not
    an ``items`` node reading an image (its pixels, or its ``patches``).
    """
    e = src.edge("from") if src.kind == "items" else None
    t = type_of(e) if e is not None else None
    if t is None or t.rank != 3 or t.dtype != "float":
        raise ValueError(src.id)
    h, w = t.dims[1], t.dims[2]
    if not isinstance(h, int) or not isinstance(w, int):
        raise ValueError(src.id)
    ph, pw = src.spec.patches if src.spec.patches is not None else (1, 1)
    return h // ph, w // pw


def _position_work(ctx: WorkCtx) -> Work:
    """A copy per element; a learned table of ``max_len`` rows caps the items' length."""
    s = ctx.spec
    if s.encoding == "learned" and s.max_len is not None:
        ctx.at_most(ctx.out().dims[0], s.max_len, "max_len")
    return elementwise_work(ctx)


@kind("position", PositionSpec, lowering="attngraph.lower.support:lower_position",
      emit="attngraph.lower.emit.support:emit_position",
      work=_position_work)
def position_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Context vectors from positions: [N, dim] for the items of ``from``; for
    ``encoding: xy``, the (x, y) centre of each image patch, [N, 2]."""
    t = ctx.t("from")
    if t.rank == 0:
        ctx.fail("position vectors need something with an items axis", "from",
                 "give it items [N, d] (or tokens)")
    n = t.dims[0]
    s = ctx.spec
    if s.encoding == "xy":
        try:
            image_grid(ctx.src("from"), ctx.type_of)
        except ValueError:
            ctx.fail(f"xy positions are the centres of image patches, but "
                     f"'{ctx.edge('from').ref}' is not items cut from an image", "from",
                     "read items made by {kind: items, from: <image>, patches: [h, w]}")
        if s.dim is not None and s.dim != 2:
            ctx.fail(f"xy positions are (x, y) pairs: dim is 2, not {s.dim}",
                     hint="drop 'dim' (it is 2)", field="dim")
        return {"": TensorType((n, 2))}
    if s.dim is None:
        ctx.fail(f"{s.encoding} positions need 'dim: <size>'", hint="e.g. dim: d")
    if s.encoding == "learned":
        max_len = s.max_len or (n if isinstance(n, int) else None)
        if max_len is None:
            ctx.fail("learned positions need 'max_len'", hint="add max_len: <longest N>")
        if isinstance(n, int) and n > max_len:
            ctx.fail(f"a table of max_len {max_len} positions cannot cover the {n} items of "
                     f"'{ctx.edge('from').ref}'", hint=f"raise max_len to {n}, or drop it "
                     f"(the items are a fixed {n})", field="max_len")
        ctx.params += max_len * s.dim
    elif s.dim % 2:
        ctx.fail(f"sinusoidal positions need an even dim, got {s.dim}", field="dim",
                 hint=f"use dim: {s.dim + 1} (sin and cos come in pairs)")
    return {"": TensorType((n, s.dim))}


@kind("norm", NormSpec, lowering="attngraph.lower.support:lower_norm",
      emit="attngraph.lower.emit.support:emit_norm", transparent=True,
      magnitude=lambda ctx: 1.0)  # unit scale, whatever comes in
def norm_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Same shape; learned scale (and shift for layer norm)."""
    t = _float(ctx)
    ctx.params += ctx.features("from") * (2 if ctx.spec.fn == "layer" else 1)
    return {"": TensorType(t.dims, heads=t.heads)}


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


@kind("add", AddSpec, lowering="attngraph.lower.support:Add",
      emit="attngraph.lower.emit.support:emit_add", transparent=True,
      magnitude=lambda ctx: sum(ctx.ins))
def add_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Residual sum; shapes must match (a vector broadcasts over items)."""
    ts = [ctx.type_of(e) for e in ctx.node.edges("from")]
    heads = {t.heads for t in ts}
    if len(heads) > 1 or any(t.dtype != "float" for t in ts):
        ctx.fail("add needs float inputs with the same heads",
                 hint="token ids become vectors through items (embed:) or embedding; merge "
                 "heads in the readout (combine: concat)")
    return {"": TensorType(_broadcast(ctx, "add"), heads=ts[0].heads)}


@kind("mul", MulSpec, lowering="attngraph.lower.support:Add",
      emit="attngraph.lower.emit.support:emit_add", transparent=True,
      work=elementwise_work, magnitude=lambda ctx: math.prod(ctx.ins))
def mul_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Elementwise product; shapes must match (a vector or a [1] gate broadcasts)."""
    ts = [ctx.type_of(e) for e in ctx.node.edges("from")]
    if len({t.heads for t in ts}) > 1 or any(t.dtype != "float" for t in ts):
        ctx.fail("mul needs float inputs with the same heads",
                 hint="token ids become vectors through items (embed:) or embedding")
    return {"": TensorType(_broadcast(ctx, "mul"), heads=ts[0].heads)}


@kind("gain", GainSpec, lowering="attngraph.lower.support:Gain",
      emit="attngraph.lower.emit.support:emit_gain", transparent=True,
      work=elementwise_work, magnitude=lambda ctx: abs(ctx.node.spec.init) * ctx.most())
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


@kind("pool", PoolSpec, lowering="attngraph.lower.support:Pool",
      emit="attngraph.lower.emit.support:emit_pool", transparent=True,
      work=elementwise_work, magnitude=_pool_magnitude)
def pool_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d] -> [d]: the mean, max or sum over the real items."""
    t = ctx.t("from")
    if t.dtype != "float" or t.rank != 2 or t.heads:
        ctx.fail(f"pool reduces items [N, d] to one vector [d], got {t}", "from",
                 "merge heads in the readout first" if t.heads else
                 "give it float items [N, d]")
    return {"": TensorType(t.dims[1:])}


@kind("concat", ConcatSpec, lowering="attngraph.lower.support:Concat",
      emit="attngraph.lower.emit.support:emit_concat", transparent=True)
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


@kind("dropout", DropoutSpec, lowering="attngraph.lower.support:lower_dropout",
      emit="attngraph.lower.emit.support:emit_dropout", transparent=True,
      pure=False)
def dropout_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Same type (attention weights stay weights)."""
    t = ctx.t("from")
    if t.dtype != "float":
        ctx.fail(f"dropout zeroes numbers, but '{ctx.edge('from').ref}' is {t}", "from",
                 "drop ids after they become vectors (items with embed:, or embedding)")
    return {"": t}
