"""The supporting kinds: linear, mlp, embedding, position, norm, dropout; the kinds
that combine values (add, mul, gain, pool, concat) are in :mod:`attngraph.kinds.combine`.

Lowered in :mod:`attngraph.lower.rules.support`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.activations import ActivationName
from attngraph.kinds.base import RuleCtx, Work, WorkCtx, elementwise_work, kind
from attngraph.kinds.combine import (  # noqa: F401 (re-exported)
    AddSpec,
    ConcatSpec,
    GainSpec,
    MulSpec,
    PoolSpec,
    _float,
    _no_heads,
    is_image,
    trailing_ones,
)
from attngraph.kinds.items import image_grid
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


class DropoutSpec(NodeModel):
    """Dropout with probability ``p`` in training; the identity in eval."""

    kind: Literal["dropout"]
    from_: Ref = Field(alias="from")
    """Any value; the same type comes out (weights stay weights)."""
    p: Prob = 0.1
    """The probability of zeroing each float value, in training only (what is kept is scaled
    by 1/(1 - p))."""


@kind("linear", LinearSpec, lowering="attngraph.lower.rules.support:lower_linear",
      emit="attngraph.lower.export.emit.support:emit_linear", transparent=True,
      phrase="a linear projection", step="pointwise")
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


@kind("mlp", MlpSpec, lowering="attngraph.lower.rules.support:lower_mlp",
      emit="attngraph.lower.export.emit.support:emit_mlp", transparent=True,
      work=_mlp_work, phrase="an mlp", step="pointwise")
def mlp_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[..., d] -> hidden (× layers) -> [..., out]."""
    t = _float(ctx)
    _no_heads(ctx, t)
    d, h, out = ctx.features("from"), ctx.spec.hidden, ctx.spec.out
    ctx.params += d * h + h + (ctx.spec.layers - 1) * (h * h + h) + h * out + out
    return {"": TensorType((*t.dims[:-1], out))}


@kind("embedding", EmbeddingSpec, lowering="attngraph.lower.rules.support:lower_embedding",
      emit="attngraph.lower.export.emit.support:emit_embedding",
      work=elementwise_work, table=lambda n: (int(n.params) // int(n.spec.dim), int(n.spec.dim)),
      step="pointwise")
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


def _position_work(ctx: WorkCtx) -> Work:
    """A copy per element; a learned table of ``max_len`` rows caps the items' length."""
    s = ctx.spec
    if s.encoding == "learned" and s.max_len is not None:
        ctx.at_most(ctx.out().dims[0], s.max_len, "max_len")
    return elementwise_work(ctx)


@kind("position", PositionSpec, lowering="attngraph.lower.rules.support:lower_position",
      emit="attngraph.lower.export.emit.support:emit_position",
      work=_position_work, positions="vectors", step="indexed")
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


@kind("norm", NormSpec, lowering="attngraph.lower.rules.support:lower_norm",
      emit="attngraph.lower.export.emit.support:emit_norm", transparent=True,
      magnitude=lambda ctx: 1.0, step="pointwise")  # unit scale, whatever comes in
def norm_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Same shape; learned scale (and shift for layer norm)."""
    t = _float(ctx)
    ctx.params += ctx.features("from") * (2 if ctx.spec.fn == "layer" else 1)
    return {"": TensorType(t.dims, heads=t.heads)}


@kind("dropout", DropoutSpec, lowering="attngraph.lower.rules.support:lower_dropout",
      emit="attngraph.lower.export.emit.support:emit_dropout", transparent=True,
      pure=False, passthrough=True, step="pointwise")
def dropout_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Same type (attention weights stay weights)."""
    t = ctx.t("from")
    if t.dtype != "float":
        ctx.fail(f"dropout zeroes numbers, but '{ctx.edge('from').ref}' is {t}", "from",
                 "drop ids after they become vectors (items with embed:, or embedding)")
    return {"": t}
