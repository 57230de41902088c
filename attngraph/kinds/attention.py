"""The attention vocabulary: items, queries/keys/values, softmax, readout, and the
fused ``attention`` node of :mod:`attngraph.passes.fuse_attention`.

The scorer kind and its functions are in :mod:`attngraph.kinds.scorers`; a
policy (hard attention) in :mod:`attngraph.kinds.hard`. Lowered in
:mod:`attngraph.lower.attention`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from attngraph.errors import did_you_mean
from attngraph.ir.graph import TensorType
from attngraph.kinds.activations import FEATURE_MAPS, ActivationName, FeatureMapName
from attngraph.kinds.base import KINDS, RuleCtx, Style, Work, WorkCtx, elementwise_work, kind
from attngraph.kinds.choices import named
from attngraph.kinds.normalisers import NORMALISERS, NormaliserName
from attngraph.kinds.scorers import SCORERS
from attngraph.spec.models import Model, NodeModel, PosInt, Ref, Scale, Size


class ItemsSpec(NodeModel):
    """Items ``[N, d]``: embedded token ids, vectors, image pixels or patches, graph nodes."""

    kind: Literal["items"]
    from_: Ref = Field(alias="from")
    """What to turn into items: a tokens, vectors, image or graph input, or a node giving items
    ``[N, d]``."""
    embed: Size | None = None
    """Token ids: the size of the learned table ``[vocab, embed]`` they are looked up in (required
    for ids; ``from`` is then a tokens input); a size."""
    patches: tuple[PosInt, PosInt] | None = None
    """Image: cut it into tiles ``[ph, pw]``, each one item of size ``C·ph·pw`` (ph and pw divide
    the height and width); unset, each pixel is an item."""
    dim: Size | None = None
    """Project every item to this size with a linear map; a size."""
    bias: bool = True
    """Whether the ``dim`` projection has a bias."""


_PROJ = Style("#d9ead3", "box")


class _Proj(NodeModel):
    """A projection of items or a vector, optionally split into heads."""

    from_: Ref | None = Field(default=None, alias="from")
    """What to project: a vector ``[d]`` or items ``[N, d]`` (float, without heads)."""
    dim: Size | None = None
    """Output size (the input's size if unset); a size."""
    heads: Size | None = None
    """Split the output into this many heads of ``dim / heads`` features (it must divide ``dim``); a
    size."""
    proj: Literal["linear", "identity", "mlp"] = "linear"
    """The projection: ``linear`` W x + b, ``identity`` x itself (``dim`` must equal the input
    size), ``mlp`` a two-layer MLP through ``hidden``."""
    bias: bool = True
    """Whether the projection has a bias."""
    hidden: Size | None = None
    """proj mlp: the hidden size (``dim`` if unset); a size."""


class QueriesSpec(_Proj):
    """Queries ``[M, d]`` (or ``[d]``): a projection, or ``learned: K`` vectors."""

    kind: Literal["queries"]
    learned: Size | None = None
    """K learned query vectors ``[K, dim]`` of their own instead of a projection of ``from`` (needs
    ``dim``; not together with ``from``); a size."""


class KeysSpec(_Proj):
    """Keys ``[N, d]``: a projection of items."""

    kind: Literal["keys"]


class ValuesSpec(_Proj):
    """Values ``[N, d]``: a projection of items."""

    kind: Literal["values"]


class MaskSpec(Model):
    """Masks a softmax may apply on top of the inputs' padding."""

    causal: bool = False
    """Query i attends only to items j <= i (needs scores ``[M, N]``)."""
    window: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    """Query i attends only to items j with ``|i - j| <= window`` (needs scores ``[M, N]``)."""
    adjacency: Ref | None = None
    """A graph input (or a bool ``[N, N]`` value): query i attends only to the nodes j with
    ``adjacency[i, j]``, its in-neighbours (edges j → i)."""
    self_loops: bool = True
    """adjacency: each node also attends to itself, whether or not the graph has the loop."""


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


def _proj_dim(ctx: RuleCtx, d_in: int) -> int:
    """Output size of a projection; counts its parameters."""
    s = ctx.spec
    d_out = s.dim if s.dim is not None else d_in
    if s.proj == "identity":
        if d_out != d_in:
            ctx.fail(f"proj identity keeps the size {d_in}, but dim is {d_out}",
                     hint="drop 'dim', or use proj: linear", field="dim")
    elif s.proj == "linear":
        ctx.params += d_in * d_out + (d_out if s.bias else 0)
    else:
        h = s.hidden if s.hidden is not None else d_out
        ctx.params += d_in * h + h + h * d_out + (d_out if s.bias else 0)
    return d_out


def _items_work(ctx: WorkCtx) -> Work:
    """The projection (``dim``) once per item; a lookup or a copy per element."""
    out, src = ctx.out(), ctx.t("from")
    table = 0
    if src.dtype == "long":
        table = ctx.graph.node(ctx.edge("from").src).spec.vocab * ctx.spec.embed
    n = ctx.positions(out)
    # patches are cut into a tensor of their own before a projection (dim) reads them
    cut = ctx.elements(src) if src.rank == 3 and ctx.spec.dim is not None else 0
    # a table shared with another node (tied weights) is not counted in params here
    return Work(n * max(ctx.node.params - table, 0) + ctx.elements(out) + ctx.elements(src),
                inner=cut)


@kind("items", ItemsSpec, lowering="attngraph.lower.attention:Items",
      emit="attngraph.lower.emit.attention:emit_items", role="items",
      style=Style("#cfe2f3", "box"), work=_items_work)
def items_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]: embedded tokens, projected vectors, image patches, graph nodes."""
    s = ctx.spec
    t = ctx.t("from")
    if t.dtype == "long":
        if s.embed is None:
            ctx.fail(f"items from token ids {t} need 'embed: <size>'", "from",
                     "add embed: d to look the ids up in a learned table")
        if t.rank != 1:
            ctx.fail(f"items from ids need one items axis, got {t}", "from",
                     "read the tokens input itself")
        src = ctx.src("from")
        vocab = src.field("vocab") if src.is_input and src.spec is not None else None
        if vocab is None:
            ctx.fail("items with 'embed' need token ids from a tokens input (for its vocab)",
                     "from", "read a tokens input directly, or use an embedding node with "
                     "vocab: <size> (e.g. inside a block)")
        ctx.params += vocab * s.embed
        n, d = t.dims[0], s.embed
    elif t.rank == 3 and t.dtype == "float":
        c, h, w = (ctx.fixed(x, f"the {what} of image '{ctx.edge('from').ref}'", "from")
                   for x, what in zip(t.dims, ("channels", "height", "width"), strict=True))
        if s.patches is not None:
            ph, pw = s.patches
            if h % ph or w % pw:
                ctx.fail(f"patches {ph}x{pw} do not tile an image of {h}x{w}",
                         hint="choose patch sizes that divide the height and width",
                         field="patches")
            n, d = (h // ph) * (w // pw), c * ph * pw
        else:
            n, d = h * w, c
    elif t.rank == 2 and t.dtype == "float" and t.heads:
        ctx.fail(f"items are one set without heads, but '{ctx.edge('from').ref}' has {t}",
                 "from", "merge the heads in a readout (combine: concat) first")
    elif t.rank == 2 and t.dtype == "float":
        if s.embed is not None:
            ctx.fail("'embed' applies to token ids, but this input is vectors", "from",
                     "use dim: <size> to project vectors")
        n, d = t.dims[0], ctx.features("from")
    else:
        per_item = t.rank == 1 and isinstance(t.dims[0], str)
        ctx.fail(f"items need tokens, vectors [N, d], an image or a graph, got {t}", "from",
                 f"'{ctx.edge('from').ref}' is one number per item: kind conv (from: it, out: "
                 "k, kernel: 1 or more) makes per-item features [N, k]" if per_item else
                 "a single vector is one item: use kind 'queries' or 'linear' for it")
    if s.dim is not None:
        ctx.params += d * s.dim + (s.dim if s.bias else 0)
        d = s.dim
    return {"": TensorType((n, d))}


def _qkv_work(ctx: WorkCtx) -> Work:
    """Learned vectors are copied; a projection runs once per vector, before the heads split."""
    out = ctx.out()
    if getattr(ctx.spec, "learned", None) is not None:
        return Work(ctx.elements(out))
    vectors = ctx.elements(ctx.t("from")) // ctx.features("from")
    hidden = vectors * ctx.spec.hidden if ctx.spec.proj == "mlp" and ctx.spec.hidden else 0
    return Work(ctx.node.params * vectors + ctx.elements(out), inner=hidden)


def _qkv(ctx: RuleCtx, what: str) -> dict[str, TensorType]:
    s = ctx.spec
    if getattr(s, "learned", None) is not None:
        if ctx.has("from"):
            ctx.fail("give 'from' or 'learned', not both",
                     hint="drop 'learned' to project 'from', or drop 'from' for learned queries")
        if s.dim is None:
            ctx.fail("learned queries need 'dim: <size>'", hint="e.g. {learned: 4, dim: d}")
        k, d = s.learned, s.dim
        ctx.params += k * d
        lead: tuple = (k,)
    else:
        if not ctx.has("from"):
            ctx.fail(f"{what} need 'from: <node>' (or learned: K for queries)",
                     hint="add from: <items or vector>")
        t = ctx.t("from")
        if t.dtype != "float" or t.rank not in (1, 2) or t.heads:
            ctx.fail(f"{what} project vectors [d] or items [N, d], got {t}", "from",
                     "merge heads in the readout (combine: concat) first" if t.heads else
                     "give them float items [N, d] (ids become items with embed:) or a vector")
        lead = t.dims[:-1]
        d = _proj_dim(ctx, ctx.features("from"))
    h = s.heads
    if h:
        if d % h:
            lo, hi = h * (d // h), h * (d // h + 1)
            sizes = f"{lo} or {hi}" if lo else str(hi)
            ctx.fail(f"{h} heads do not divide size {d}",
                     hint=f"make the size a multiple of {h} (e.g. dim: {sizes})", field="heads")
        return {"": TensorType((*lead, d // h), heads=h)}
    return {"": TensorType((*lead, d))}


@kind("queries", QueriesSpec, lowering="attngraph.lower.attention:Proj",
      emit="attngraph.lower.emit.attention:emit_proj", role="projection",
      style=_PROJ, transparent=True, work=_qkv_work)
def queries_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[M, d] or [d]; with heads h, [M, d/h] per head."""
    return _qkv(ctx, "queries")


@kind("keys", KeysSpec, lowering="attngraph.lower.attention:Proj",
      emit="attngraph.lower.emit.attention:emit_proj", role="projection",
      style=_PROJ, transparent=True, work=_qkv_work)
def keys_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]; with heads h, [N, d/h] per head."""
    return _qkv(ctx, "keys")


@kind("values", ValuesSpec, lowering="attngraph.lower.attention:Proj",
      emit="attngraph.lower.emit.attention:emit_proj", role="projection",
      style=_PROJ, transparent=True, work=_qkv_work)
def values_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]; with heads h, [N, d/h] per head."""
    return _qkv(ctx, "values")


@kind("softmax", SoftmaxSpec, lowering="attngraph.lower.attention:Softmax",
      emit="attngraph.lower.emit.attention:emit_softmax", role="weights",
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


@kind("feature_map", FeatureMapSpec, lowering="attngraph.lower.attention:FeatureMap",
      emit="attngraph.lower.emit.attention:emit_feature_map", role="projection", style=_PROJ,
      transparent=True, work=elementwise_work)
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


@kind("readout", ReadoutSpec, lowering="attngraph.lower.attention:lower_readout",
      emit="attngraph.lower.emit.attention:emit_readout", role="readout",
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


class FusedAttentionSpec(NodeModel):
    """A fused attention node: what the scorer, softmax and readout it replaces said."""

    kind: Literal["attention"] = "attention"
    fused: str
    mask: MaskSpec | None = None
    temperature: float = 1.0
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


@kind("attention", FusedAttentionSpec, lowering="attngraph.lower.attention:FusedAttention",
      emit="attngraph.lower.emit.attention:emit_attention",
      role="attention", style=Style("#ead1dc", "box"), internal=True, work=_attention_work)
def attention_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """softmax(q·k/√d) read out over the values, as one fused node: the readout's type."""
    q, k, v = ctx.t("query"), ctx.need_items("key", "fused attention"), ctx.t("values")
    if q.rank not in (1, 2) or q.dims[-1] != k.dims[-1] or (q.heads or 1) % (k.heads or 1):
        ctx.fail(f"fused attention needs queries of the keys' size and heads, got {q} and {k}",
                 "query")
    if v.rank != 2 or v.dims[0] != k.dims[0] or (q.heads or 1) % (v.heads or 1):
        ctx.fail(f"fused attention needs values over the keys' items, got {v} and {k}",
                 "values")
    s = ctx.spec
    d = ctx.features("values") * (q.heads if q.heads and s.combine == "concat" else 1)
    if s.out is not None:
        ctx.params += d * s.out + (s.out if s.bias else 0)
        d = s.out
    return {"": TensorType((*q.dims[:-1], d))}


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
      lowering="attngraph.lower.attention:LinearAttention", role="attention",
      style=Style("#ead1dc", "box"), internal=True, work=_linear_attention_work)
def linear_attention_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """The readout's type: [d] per query, heads merged by ``combine``."""
    q, k, v = ctx.t("query"), ctx.need_items("key", "linear attention"), ctx.t("values")
    if q.rank not in (1, 2) or q.dims[-1] != k.dims[-1] or (q.heads or 1) % (k.heads or 1):
        ctx.fail(f"linear attention needs queries of the keys' size and heads, got {q} and "
                 f"{k}", "query")
    if v.rank != 2 or v.dims[0] != k.dims[0] or (q.heads or 1) % (v.heads or 1):
        ctx.fail(f"linear attention needs values over the keys' items, got {v} and {k}",
                 "values")
    s = ctx.spec
    d = ctx.features("values") * (q.heads if q.heads and s.combine == "concat" else 1)
    if s.out is not None:
        ctx.params += d * s.out + (s.out if s.bias else 0)
        d = s.out
    return {"": TensorType((*q.dims[:-1], d))}
