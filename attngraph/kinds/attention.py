"""The attention vocabulary: items, queries/keys/values, softmax, readout, and the
fused ``attention`` node of :mod:`attngraph.passes.fuse_attention`.

The scorer kind and its functions are in :mod:`attngraph.kinds.scorers`; a
policy (hard attention) in :mod:`attngraph.kinds.hard`. Lowered in
:mod:`attngraph.lower.rules.attention`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from attngraph.errors import did_you_mean
from attngraph.ir.graph import TensorType
from attngraph.kinds.activations import FEATURE_MAPS, ActivationName, FeatureMapName
from attngraph.kinds.base import KINDS, RuleCtx, Style, Work, WorkCtx, elementwise_work, kind
from attngraph.kinds.choices import named
from attngraph.kinds.fused import FusedAttentionSpec, LinearAttentionSpec  # noqa: F401
from attngraph.kinds.items import ItemsSpec, image_grid, items_shape  # noqa: F401 (re-exported)
from attngraph.kinds.mask import MaskSpec
from attngraph.kinds.normalisers import NORMALISERS, NormaliserName
from attngraph.kinds.projections import (  # noqa: F401 (re-exported)
    _PROJ,
    KeysSpec,
    QueriesSpec,
    ValuesSpec,
    keys_shape,
    queries_shape,
    values_shape,
)
from attngraph.kinds.scorers import SCORERS
from attngraph.spec.models import NodeModel, Ref, Scale, Size


class SoftmaxSpec(NodeModel):
    """Weights: softmax (sparsemax, entmax-1.5, top-k) of scores, masks applied, over
    the items (each query's weights sum to 1) or over the queries (each item's do)."""

    kind: Literal["softmax"]
    scores: Ref
    """The scores to normalise, with an items (last) axis: ``[N]`` or ``[M, N]``, with or without
    heads."""
    mask: MaskSpec | None = None
    """Extra masks on top of the inputs' padding, which is always applied."""
    temperature: Scale = 1.0
    """Scores are divided by it first: lower is sharper."""
    fn: NormaliserName = "softmax"
    """The normaliser over the real items, an entry of the normaliser registry: ``softmax``;
    ``sparsemax`` and ``entmax15`` (exact zeros for low scores); ``topk``, a softmax over the ``k``
    highest scores; ``sum``, kernel scores over their row sum (linear attention)."""
    k: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    """fn topk (a normaliser that keeps the k highest scores): how many of the highest scores keep
    weight (required for it, refused for the others)."""
    ties: Literal["first", "keep"] = "first"
    """fn topk (a normaliser that keeps the k highest scores): scores tied with the k-th highest.
    ``first`` keeps exactly k items, the first in item order among the tied (as ``torch.topk``);
    ``keep`` keeps every item whose score is at least the k-th highest, k or more, as papers write
    the top-k mask. Refused for the other fns.
    """
    axis: Literal["items", "queries"] = "items"
    """``items``: each query's weights sum to 1 over the items; ``queries``: each item's weights sum
    to 1 over the queries (slots compete; needs scores ``[M, N]``)."""


class FeatureMapSpec(NodeModel):
    """φ(x), a positive feature map of queries or keys for kernel (linear) attention."""

    kind: Literal["feature_map"]
    from_: Ref = Field(alias="from")
    """Queries or keys, ``[d]`` or ``[N, d]``, with or without heads."""
    fn: FeatureMapName = "elu1"
    """The feature map φ, an entry of the feature-map registry: ``elu1``, elu(x) + 1, always
    positive (Katharopoulos et al. 2020); ``relu``, max(x, 0)."""


class ReadoutSpec(NodeModel):
    """z = Σ_i p_i v_i: values read with weights; heads merged by ``combine``; then an optional
    ``out``, ``offset`` and ``act``."""

    kind: Literal["readout"]
    weights: Ref
    """Weights normalised over the items: a softmax, or a categorical policy's sample."""
    values: Ref
    """Items ``[N, d]`` over the same items as the weights."""
    combine: Literal["concat", "mean"] = "concat"
    """How heads merge: concatenated (``d·heads`` features) or averaged (``d``)."""
    out: Size | None = None
    """A final linear projection of the result to this size; a size."""
    bias: bool = True
    """Whether the ``out`` projection has a bias."""
    normalize: bool = False
    """Renormalise the weights over the real items first (a weighted mean, adding ``eps`` to each);
    needed for weights normalised over the queries."""
    distribution: bool = True
    """The weights are a distribution over the items (a softmax, a policy's sample). ``false``
    reads weights that are not, as they are: z = Σ_i w_i v_i over the real items (sigmoid or
    ReLU attention, A₁ − λA₂, a decayed sum); any per-item weights or scores are then taken."""
    eps: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 1e-8
    """normalize: the ε added to every real item's weight, so that a query no item chose reads the
    plain mean."""
    offset: bool = False
    """Add a learned vector b to the result after the heads merge: z + b (the bias of a graph
    attention layer, GAT's and ``GATConv``'s); not with ``out``, whose own ``bias`` does this."""
    act: ActivationName = "none"
    """The activation applied last, after ``out`` or ``offset`` (GAT's ELU between layers): an
    entry of the activation registry."""



@kind("softmax", SoftmaxSpec, lowering="attngraph.lower.rules.attention:Softmax",
      emit="attngraph.lower.export.emit.attention:emit_softmax", role="weights",
      style=Style("#fce5cd", "box"), work=elementwise_work)
def softmax_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Weights of the scores' shape, summing to one over the last (items) axis."""
    s = ctx.spec
    t = ctx.t("scores")
    if t.rank == 0 or t.dtype != "float":
        ctx.fail(f"softmax over nothing: scores '{ctx.edge('scores').ref}' are {t}, with no "
                 "items axis", "scores", "feed it the scores of a scorer ([N] or [M, N])")
    info = NORMALISERS.get(s.fn)
    if info is None:
        ctx.fail(f"unknown normaliser fn '{s.fn}'", hint=did_you_mean(s.fn, NORMALISERS),
                 field="fn")
    if info.needs_k and s.k is None:
        ctx.fail(f"fn {s.fn} keeps the k highest scores, but 'k' is missing", field="fn",
                 hint="add k: <how many>, e.g. k: 4")
    for name in ("k", "ties"):
        if name in s.model_fields_set and not info.needs_k:
            with_k = " or ".join(n for n, i in NORMALISERS.items() if i.needs_k)
            ctx.fail(f"'{name}' applies to fn {with_k}, not {s.fn}", field=name,
                     hint=f"drop '{name}', or set fn: {with_k}")
    if info.kernel:
        _check_kernel_scores(ctx)
    if s.axis == "queries" and t.rank != 2:
        ctx.fail(f"a softmax over the queries needs scores [M, N] (M queries), got {t}",
                 "scores", "score several queries against the items (queries [M, d], pairs: "
                 "all), or normalise over the items (drop 'axis')")
    if s.mask is not None:
        m = s.mask
        if (m.causal or m.window is not None) and t.rank != 2:
            what = "causal" if m.causal else "window"
            ctx.fail(f"a {what} mask relates query i to item j, so it needs scores [M, N], "
                     f"got {t}", "scores",
                     "give the scorer one query per item (query: a node of [M, d], pairs: "
                     f"all) so that its scores are [M, N], or drop the {what} mask")
        if m.adjacency is not None:
            adj_e = ctx.edge("mask.adjacency")
            src = ctx.done[adj_e.src]
            # a graph input's adjacency port, or any bool [N, N] (e.g. a block input
            # bound to g.adjacency, so graph attention rounds can live in a block)
            adj = src.types.get(adj_e.port or "adjacency", src.types.get(adj_e.port))
            if adj is None or adj.dtype != "bool":
                ctx.fail(f"adjacency '{adj_e.ref}' is not a graph input", "mask.adjacency",
                         "declare an input {type: graph, dim: d} and name it here")
            if t.rank != 2 or tuple(t.dims) != tuple(adj.dims):
                ctx.fail(f"adjacency mask {adj} does not fit scores {t}", "mask.adjacency",
                         "score all pairs of the graph's nodes (pairs: all, queries from them)")
    return {"": TensorType(t.dims, heads=t.heads, simplex=s.axis == "items", weights=True)}


def _check_kernel_scores(ctx: RuleCtx) -> None:
    """A kernel normaliser (``fn: sum``) divides by the row sum, which needs scores that
    cannot be negative: a dot product of two positive feature maps (kernel attention)."""
    src = ctx.src("scores")
    scorer = named(src.spec, SCORERS)
    ok = scorer is not None and scorer.dot_product
    if ok:
        for role in ("query", "key"):
            e = src.edge(role)
            phi = named(ctx.done[e.src].spec, FEATURE_MAPS) if e is not None else None
            ok = ok and phi is not None and phi.positive
    if not ok:
        dots = " or ".join(n for n, i in SCORERS.items() if i.dot_product)
        maps = " or ".join(n for n, i in FEATURE_MAPS.items() if i.positive)
        ctx.fail(f"fn {ctx.spec.fn} divides the scores by their row sum, so they must not be "
                 f"negative: '{ctx.edge('scores').ref}' is not a dot product of positive "
                 "feature maps", "scores",
                 f"score φ(q)·φ(k): a scorer fn {dots} whose query and key are feature_map "
                 f"nodes of a positive fn ({maps}) (linear attention), or use fn softmax")


@kind("feature_map", FeatureMapSpec, lowering="attngraph.lower.rules.attention:FeatureMap",
      emit="attngraph.lower.export.emit.attention:emit_feature_map", role="projection", style=_PROJ,
      transparent=True, work=elementwise_work, step="pointwise")
def feature_map_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """φ(x) of queries or keys: the same type, every entry positive (elu1) or >= 0."""
    t = ctx.t("from")
    if t.dtype != "float" or t.rank not in (1, 2):
        ctx.fail(f"a feature map applies to queries or keys ([d] or [N, d]), got {t}", "from",
                 "give it the output of a queries or keys node")
    return {"": t}


def _check_value_groups(ctx: RuleCtx, w: TensorType, v: TensorType) -> None:
    """Values have the weights' heads, or a divisor of them (grouped-query attention)."""
    hw, hv = w.heads or None, v.heads or None
    if hw == hv:
        return
    if hw is None or hv is None or hw % hv:
        ctx.fail(f"weights have {hw or 1} head(s) but values have {hv or 1}", "values",
                 "give values the same 'heads' as the keys (the queries' heads, or a "
                 "divisor of them for grouped-query attention)")


def _per_item(ctx: RuleCtx, w: TensorType) -> bool:
    """Whether ``w`` is per item (and per query): scores or weights, not features."""
    from attngraph.algebra.axes import axes_of, is_scores

    src = ctx.src("weights")
    names = axes_of(w, scores=KINDS[src.kind].role in ("scorer", "weights")
                    if src.kind in KINDS else False)
    return names is not None and is_scores(names)


def _readout_work(ctx: WorkCtx) -> Work:
    """Each weight times a value vector, then the ``out`` projection once per result."""
    out = ctx.out()
    weighted = ctx.elements(ctx.t("weights")) * ctx.features("values")
    return Work(weighted + ctx.node.params * ctx.positions(out) + ctx.elements(out))


@kind("readout", ReadoutSpec, lowering="attngraph.lower.rules.attention:lower_readout",
      emit="attngraph.lower.export.emit.attention:emit_readout", role="readout",
      style=Style("#ead1dc", "box"), work=_readout_work)
def readout_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """z = Σ_i p_i v_i: [d] per query; heads merged by ``combine``; optional ``out``."""
    s = ctx.spec
    w = ctx.t("weights")
    v = ctx.t("values")
    wref = ctx.edge("weights").ref
    if not s.distribution:
        if s.normalize:
            ctx.fail("normalize: true makes the weights a distribution, but distribution: false "
                     "reads them as they are", "normalize", "drop one of the two")
        if w.dtype != "float" or w.rank not in (1, 2) or not _per_item(ctx, w):
            ctx.fail(f"distribution: false reads per-item weights [N] or [M, N], but "
                     f"'{wref}' is {w}", "weights",
                     "give it scores or weights over the values' items (an expression over "
                     "scores, a normaliser's output)")
    elif not w.simplex and not (s.normalize and w.weights):
        if w.weights:
            ctx.fail(f"weights '{wref}' do not sum to one over the items (they are normalised "
                     "over the queries, or not at all, as a window's)",
                     "weights", "to read them as they are (z = Σ w_i v_i), add distribution: "
                     "false; to renormalise them over the items first (a weighted mean, as "
                     "Slot Attention does), add normalize: true")
        ctx.fail(f"weights '{wref}' are not normalised over items", "weights",
                 "feed the readout a softmax (or a policy's sample); to read weights that are "
                 "not a distribution as they are (sigmoid attention), add distribution: false")
    if w.rank not in (1, 2):
        ctx.fail(f"weights '{wref}' are {w}: a readout reads weights over the items [N], or "
                 "a row of them per query [M, N]", "weights",
                 "reduce the other axes first (an expression's sum or mean over them), or "
                 "give the formula that made them fewer axes")
    if v.rank != 2 or v.dtype != "float":
        ctx.fail(f"values must be items [N, d], got {v}", "values",
                 "give it the items (or their values projection) the weights range over")
    if w.dims[-1] != v.dims[0]:
        ctx.fail(f"weights '{wref}' are normalised over {w.dims[-1]} items, but values "
                 f"'{ctx.edge('values').ref}' have {v.dims[0]}", "values",
                 "weights and values must range over the same items")
    _check_value_groups(ctx, w, v)
    d = ctx.features("values")
    if w.heads and s.combine == "concat":
        d *= w.heads
    if s.out is not None:
        if s.offset:
            ctx.fail("offset adds a learned vector after the heads merge, but 'out' projects "
                     "the result with its own bias", "offset",
                     "drop 'offset' (out's bias: true does the same), or drop 'out'")
        ctx.params += d * s.out + (s.out if s.bias else 0)
        d = s.out
    if s.offset:
        ctx.params += d
    return {"": TensorType((*w.dims[:-1], d))}
