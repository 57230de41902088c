"""The ``scorer`` kind and its scorer functions, one :class:`ScorerInfo` each.

A scorer turns a query and keys into scores: ``[N]`` for one query, ``[M, N]`` for
all pairs, ``[N]`` for aligned pairs (query i with key i). Which function it
applies is ``fn:``, an entry of :data:`SCORERS`. A definition holds what every
part of attngraph needs of the function: its formula (``describe``, diagrams),
whether it needs a query and one size for query and key, its parameter count,
whether it reads content or positions only, and its module: ``module`` for the
built-ins (a lazy ``"attngraph.lower.rules.scorers:Name"`` reference, so nothing imports
torch before compiling) or ``make`` for a user's (see :func:`register_scorer`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from attngraph.errors import AttnGraphError, ShapeError, SpecError, did_you_mean
from attngraph.ir.graph import Dim, Graph, Node, TensorType
from attngraph.kinds.base import RuleCtx, Style, Work, WorkCtx, kind
from attngraph.kinds.choices import Registered
from attngraph.kinds.hooks import call_hook, count, port_types
from attngraph.registry import Registry
from attngraph.spec.models import Ident, LearnedQuery, NodeModel, Ref, Scale, Size, check_scale

__all__ = ["ScorerInfo", "SCORERS", "register_scorer", "ScorerSpec", "ScorerName", "score_heads",
           "scorer_count"]


@dataclass(frozen=True)
class ScorerInfo:
    """A scorer function: formula text, what it needs, its parameters and module.

    ``same_size`` means query and key must have one size; ``params(dq, dk, hidden)``
    counts its parameters (per head); ``content`` is False for scores of positions
    only; ``takes_query`` is False for a function that scores each item alone and
    refuses a query. ``module`` names the built-in module class (constructed as
    ``cls(dq, dk, hidden, heads, spec, read)``); ``make`` (optional) builds the
    torch module of a user-registered function: ``make(dq, dk, hidden) -> nn.Module``
    whose ``forward(q, k)`` returns scores for ``q [.., M, dq]`` and ``k [.., N, dk]``.
    """

    name: str
    formula: str
    needs_query: bool = True
    same_size: bool = False
    params: Callable[[int, int, int], int] = lambda dq, dk, h: 0
    content: bool = True
    make: Callable[..., Any] | None = None
    module: str | None = None
    takes_query: bool = True
    #: parameters that depend on the spec's settings (a learned temperature)
    spec_params: Callable[[Any], int] = lambda spec: 0
    #: elements the function makes per score besides the score (``hidden`` for
    #: additive: the ``tanh(W q + U k)`` of every pair), ``inner(dq, dk, hidden)``
    inner: Callable[[int, int, int], int] = lambda dq, dk, h: 0
    #: whom the parameters apply to, once each: every query (``W`` of ``general``),
    #: every key (``mlp``), or both (``additive``'s ``W q`` and ``U k``, and a user's)
    applies: Literal["query", "key", "each"] = "each"
    #: a shape rule of its own, ``shape(ctx, query type or None, key type)``, for
    #: functions whose scores are not one per (query, key) pair of content
    shape: Callable[[RuleCtx, TensorType | None, TensorType], dict[str, TensorType]] | None \
        = None
    #: the function first maps each key alone with its parameters (``U k`` of
    #: additive), so a loop whose keys do not change computes that once (the module
    #: then has ``prepare("key", k)`` and takes the prepared keys in their place)
    prepares_key: bool = False
    #: the parameters of a bias inside the function, ``bias(dq, dk, hidden)`` (``b`` in
    #: additive's tanh), which ``bias: false`` drops; None: it has none to drop
    bias: Callable[[int, int, int], int] | None = None
    #: the scores are c·(q·k) for a constant c > 0 and no parameters: of two positive
    #: feature maps, a kernel score that a ``sum`` normaliser may take (linear attention)
    dot_product: bool = False
    #: the scores are exactly q·k/√d (a dot product), or q·k where ``scaled`` is False:
    #: scorer → softmax → readout may run as one ``scaled_dot_product_attention`` call
    #: (the fusion pass)
    fusable: bool = False
    #: with ``fusable``: the scores divide q·k by √d (False: they are q·k itself)
    scaled: bool = True
    #: the function reads per-item ``features`` f_i inside the score (additive's V f_i)
    takes_features: bool = False
    #: the docs table: its parameters in words, and notes (a paper, what it is for)
    parameters: str = ""
    doc: str = ""


#: Every scorer function by name; ``fn: <name>`` in a spec refers to an entry.
SCORERS: Registry[ScorerInfo] = Registry("scorer fn")


def register_scorer(info: ScorerInfo) -> ScorerInfo:
    """Add a scorer function; ``fn: <info.name>`` in specs then refers to it.

    Raises
    ------
    RegistryError
        When a function of that name is registered already.
    """
    SCORERS.register(info.name, info)
    return info


def _mod(name: str) -> str:
    return f"attngraph.lower.rules.scorers:{name}"


for _info in (
    ScorerInfo("dot", "q·k", same_size=True, module=_mod("Dot"), dot_product=True,
               fusable=True, scaled=False, parameters="none"),
    ScorerInfo("scaled_dot", "q·k/√d", same_size=True, module=_mod("ScaledDot"),
               dot_product=True, fusable=True, parameters="none",
               doc="the transformer score"),
    ScorerInfo("general", "qᵀ W k", params=lambda dq, dk, h: dq * dk, module=_mod("General"),
               applies="query", parameters="W: d_q × d_k",
               doc="Luong's \"general\"; maps between sizes"),
    ScorerInfo("additive", "vᵀ tanh(W q + U k)",
               params=lambda dq, dk, h: dq * h + dk * h + h + h, module=_mod("Additive"),
               inner=lambda dq, dk, h: h, prepares_key=True, bias=lambda dq, dk, h: h,
               takes_features=True,
               parameters="W: hidden × d_q, U: hidden × d_k, bias b: hidden (none with "
               "`bias: false`), v: hidden",
               doc="Bahdanau: vᵀ tanh(W q + U k_i + b); `bias: false` for the score without "
               "b; per-item `features` f_i add V f_i inside the tanh"),
    ScorerInfo("cosine", "β · cos(q, k)", same_size=True, module=_mod("Cosine"),
               spec_params=lambda spec: 1 if spec.beta == "learned" else 0,
               parameters="β if `beta: learned`", doc="content addressing (NTM key strength β)"),
    ScorerInfo("mlp", "vᵀtanh(W k)", needs_query=False, takes_query=False,
               params=lambda dq, dk, h: dk * h + h + h, module=_mod("MlpScore"),
               inner=lambda dq, dk, h: h, applies="key", bias=lambda dq, dk, h: h,
               parameters="W: hidden × d_k, bias b: hidden (none with `bias: false`), "
               "v: hidden", doc="relevance of each item alone: vᵀ tanh(W k_i + b)"),
    ScorerInfo("gat", "LeakyReLU_0.2(aᵀ[q ‖ k]) (graph attention)",
               params=lambda dq, dk, h: dq + dk, module=_mod("Gat"),
               parameters="a_q: d_q, a_k: d_k",
               doc="graph attention (GAT): LeakyReLU_0.2(a_qᵀ q_j + a_kᵀ k_i); use with an "
               "adjacency mask; a_q is `GATConv`'s `att_dst` (the attending node), a_k its "
               "`att_src`"),
    ScorerInfo("gatv2", "aᵀ LeakyReLU_0.2(q + k) (GATv2: a after the nonlinearity)",
               same_size=True, params=lambda dq, dk, h: dk, module=_mod("Gatv2"),
               inner=lambda dq, dk, h: dk, applies="query", parameters="a: d_k",
               doc="GATv2 (Brody et al. 2022): with q = W_r h_j and k = W_l h_i from "
               "`queries`/`keys`, this is aᵀ LeakyReLU(W [h_j ‖ h_i]); read out the keys as "
               "values"),
):
    register_scorer(_info)

#: A field naming a scorer function (checked against :data:`SCORERS`).
ScorerName = Annotated[Ident, Registered(SCORERS, "a scorer function")]


class ScorerSpec(NodeModel):
    """Scores of a query against keys by a scorer function ``fn`` (see :data:`SCORERS`)."""

    kind: Literal["scorer"]
    fn: ScorerName
    """The scorer function that compares the query with each key: a built-in one, or one a
    package registered (an entry of the scorer registry)."""
    query: Ref | LearnedQuery | None = None
    """The query: a vector ``[d]``, queries ``[M, d]``, or ``{learned: size}`` for one learned query
    vector (per head); ``mlp`` and learned ``location`` take none."""
    key: Ref | None = None
    """The keys: items ``[N, d]`` (float; may have heads)."""
    pairs: Literal["all", "aligned"] = "all"
    """``all``: every query against every key, scores ``[M, N]``; ``aligned``: query i with key i
    only, scores ``[N]`` (queries of the keys' length)."""
    hidden: Size | None = None
    """additive, mlp, location (gaussian): the hidden size (the key size, or the query size for
    location, if unset); a size."""
    beta: Scale | Literal["learned"] | None = None
    """cosine: the sharpness β that multiplies the similarities (1 if unset); ``learned`` makes it a
    parameter."""
    mode: Literal["learned", "gaussian"] | None = None
    """location: a learned score per position, or a Gaussian window around a predicted position
    (gaussian with a query, learned without, if unset)."""
    max_len: Size | None = None
    """location (learned): the number of positions, the longest N a forward may take (N when N is
    fixed, if unset); a size."""
    sigma: Scale | None = None
    """location (gaussian): the width σ of the window, in positions (1 if unset)."""
    features: Ref | None = None
    """additive: per-item features f_i ``[N, k]`` (or ``[N]``) inside the score,
    vᵀ tanh(W q + U k_i + V f_i): a coverage, or features of the previous alignment."""
    bias: bool = True
    """additive, mlp: whether the sum inside the tanh has a learned bias b (``hidden`` parameters
    per head); false drops it, vᵀ tanh(W q + U k_i), as Bahdanau et al. and pointer networks
    write it. Refused for a function without such a bias."""

    @field_validator("beta", mode="before")
    @classmethod
    def _beta_range(cls, v: Any) -> Any:
        # checked before the union, so that the range is the one error shown (YAML 1.1
        # reads 1.0e9, without a sign in the exponent, as text)
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            try:
                number = float(v)
            except ValueError:
                return v
            check_scale(number)
        return v


def _scorer_work(ctx: WorkCtx) -> Work:
    """Every score costs the key's size (and what the function makes per score); the
    function's parameters apply once per query and once per key."""
    s = ctx.spec
    info = SCORERS[s.fn]
    k = ctx.t("key")
    scores = ctx.elements(ctx.out())
    dk = ctx.features("key")
    if getattr(s.query, "learned", None) is not None:
        dq, nq = s.query.learned, k.heads or 1
    elif ctx.has("query"):
        q = ctx.t("query")
        dq, nq = ctx.features("query"), ctx.positions(q)
    else:
        dq, nq = dk, 0
        if s.max_len is not None:  # location scores learned per position
            ctx.at_most(k.dims[0], s.max_len, "max_len")
    hidden = s.hidden if s.hidden is not None else dk
    per = scorer_count(ctx.node, info, "inner", dq, dk, hidden, error=SpecError)
    # positions(k) counts every head's keys: each head applies its own parameters
    vectors = {"query": nq, "key": ctx.positions(k), "each": nq + ctx.positions(k)}[info.applies]
    params = scorer_count(ctx.node, info, "params", dq, dk, hidden, error=SpecError)
    return Work(scores * (dk + per) + params * vectors,
                inner=scores * per)


def scorer_count(node: Node[Any], info: ScorerInfo, hook: str, *args: Any,
                 error: type[AttnGraphError] = ShapeError) -> int:
    """``info.<hook>(*args)`` (params, spec_params, inner, bias): a count, through
    :func:`~attngraph.kinds.hooks.call_hook` (located at the node's ``fn``)."""
    shown = ", ".join(repr(a) if isinstance(a, int) else "spec" for a in args)
    return int(call_hook(getattr(info, hook), *args, node=node, error=error, expect=count,
                         what=f"scorer fn '{info.name}': {hook}({shown})",
                         loc=node.where("fn")))


def _scorer_pure(node: Node[Any]) -> bool:
    """Built-in functions are pure; a registered one's module may sample."""
    info = SCORERS.get(node.spec.fn)
    return info is not None and info.module is not None


def _scorer_hoist(node: Node[Any], graph: Graph) -> tuple[str, TensorType] | None:
    """The keys, for a function that maps them alone first: [N, hidden] per query head."""
    s = node.spec
    info = SCORERS.get(s.fn)
    ek, eq = node.edge("key"), node.edge("query")
    if info is None or not info.prepares_key or info.module is None or ek is None:
        return None
    k = graph.node(ek.src).types[ek.port]
    q = graph.node(eq.src).types[eq.port] if eq is not None else None
    hidden = int(s.hidden) if s.hidden is not None else int(k.dims[-1])
    return "key", TensorType((*k.dims[:-1], hidden), heads=score_heads(q, k))


@kind("scorer", ScorerSpec, lowering="attngraph.lower.rules.scorers:lower_scorer",
      emit="attngraph.lower.export.emit.scorers:emit_scorer", role="scorer",
      style=Style("#fff2cc", "box"), work=_scorer_work, pure=_scorer_pure, hoist=_scorer_hoist)
def scorer_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Scores [N] (one query), [M, N] (all pairs) or [N] (aligned pairs)."""
    s = ctx.spec
    info = SCORERS.get(s.fn)
    if info is None:
        ctx.fail(f"unknown scorer fn '{s.fn}'", hint=did_you_mean(s.fn, SCORERS), field="fn")
    k = ctx.need_items("key", f"scorer fn '{s.fn}'")
    n, dk = k.dims[0], ctx.features("key")
    learned_q = getattr(s.query, "learned", None)
    if learned_q is not None:
        q = TensorType((learned_q,), heads=k.heads)
        ctx.params += learned_q * (k.heads or 1)
        qname = "learned"
    elif ctx.has("query"):
        q = ctx.t("query")
        qname = ctx.edge("query").ref
        if q.dtype != "float" or q.rank not in (1, 2):
            ctx.fail(f"a query is a vector [d] or queries [M, d], got {q}", "query",
                     "give it a float state vector or items, or query: {learned: d}")
    else:
        q = None
        qname = ""
    if not info.takes_query and q is not None:
        ctx.fail(f"fn '{s.fn}' scores each item alone ({info.formula}) and takes no query",
                 "query", "drop 'query', or use fn 'additive' to score against a query")
    if info.needs_query and q is None:
        ctx.fail(f"scorer fn '{s.fn}' needs a query",
                 hint="add query: <node>, or query: {learned: d} for a learned vector")
    if q is not None:
        _check_groups(ctx, q, k)
    if info.shape is not None:
        return call_hook(info.shape, ctx, q, k, node=ctx.node, what=f"scorer fn '{s.fn}': shape",
                         error=ShapeError, expect=port_types, loc=ctx.node.where("fn"))
    if learned_q is not None:
        dq = learned_q
    elif q is not None:
        dq = ctx.features("query")
    else:
        dq = dk
    if info.same_size and dq != dk:
        ctx.fail(
            f"scorer fn '{s.fn}' needs query and key of one size "
            f"(query {qname}: {dq}, key {ctx.edge('key').ref}: {dk})",
            hint="make both dims equal, or use fn 'general' (q^T W k), which maps between sizes",
        )
    hidden = s.hidden if s.hidden is not None else dk
    heads = score_heads(q, k)
    if ctx.has("features"):
        ctx.params += _features(ctx, k, hidden) * (heads or 1)
    ctx.params += (scorer_count(ctx.node, info, "params", dq, dk, hidden)
                   + scorer_count(ctx.node, info, "spec_params", s)) * (heads or 1)
    if not s.bias:
        if info.bias is None:
            ctx.fail(f"fn '{s.fn}' ({info.formula}) has no bias to drop", field="bias",
                     hint="drop 'bias: false'; fn additive and mlp have a bias inside the tanh")
        ctx.params -= scorer_count(ctx.node, info, "bias", dq, dk, hidden) * (heads or 1)
    return {"": _pairs(ctx, q, k, n)}


def _features(ctx: RuleCtx, k: TensorType, hidden: int) -> int:
    """Check per-item features [N, c] or [N] of an additive scorer; their weights V."""
    s = ctx.spec
    if not SCORERS[s.fn].takes_features:
        with_f = " or ".join(n for n, i in SCORERS.items() if i.takes_features)
        ctx.fail(f"per-item features enter the additive score (vᵀ tanh(W q + U k_i + V f_i)), "
                 f"not fn {s.fn}", "features", f"use fn: {with_f}, or drop 'features'")
    f = ctx.t("features")
    if f.dtype != "float" or f.heads or f.rank not in (1, 2) or f.dims[0] != k.dims[0]:
        ctx.fail(f"features must be one vector per key item, [{k.dims[0]}, c] or "
                 f"[{k.dims[0]}], got {f}", "features",
                 "give it per-item features of the keys' items, e.g. a conv of the previous "
                 "weights, or a coverage [N]")
    c = 1 if f.rank == 1 else ctx.features("features")
    return c * hidden


def score_heads(q: TensorType | None, k: TensorType) -> int | None:
    """Heads of the scores: the queries' (grouped-query attention has fewer key heads)."""
    return (q.heads or None) if q is not None and q.heads else (k.heads or None)


def _check_groups(ctx: RuleCtx, q: TensorType, k: TensorType) -> None:
    """Query heads equal the key heads, or are a multiple of them (grouped-query
    attention: each key head serves a group of query heads; multi-query: one)."""
    hq, hk = q.heads or None, k.heads or None
    if hq == hk:
        return
    if hq is None or hk is None:
        ctx.fail(f"query has {hq or 1} head(s) but key has {hk or 1}", "query",
                 "give queries and keys 'heads' (the same number, or for grouped-query "
                 "attention keys with a divisor of the queries' heads, e.g. heads: 1)")
    if hq % hk:
        ctx.fail(f"query has {hq} heads but key has {hk}, which does not divide them",
                 "query", f"give the keys a number of heads that divides {hq} (grouped-query "
                 "attention: each key head serves an equal group of query heads)")


def _pairs(ctx: RuleCtx, q: TensorType | None, k: TensorType, n: Dim) -> TensorType:
    s = ctx.spec
    if s.pairs == "aligned":
        if q is None or q.rank != 2:
            ctx.fail("pairs: aligned scores query i with key i, so it needs queries [N, d]",
                     "query", "use pairs: all for a single query vector")
        if q.dims[0] != n:
            ctx.fail(f"pairs: aligned needs as many queries as keys "
                     f"(queries {q.dims[0]}, keys {n})", "query",
                     "use pairs: all to score every query against every key")
        return TensorType((n,), heads=score_heads(q, k))
    if q is None or q.rank == 1:
        return TensorType((n,), heads=score_heads(q, k))
    return TensorType((q.dims[0], n), heads=score_heads(q, k))


class PrepareSpec(NodeModel):
    """Made by the hoisting pass: the part of node ``of``'s work that reads only its
    input ``role`` (an additive score's ``U k``), computed once before a loop's steps."""

    kind: Literal["prepare"]
    of: str
    """The node whose parameters prepare the value (any node id)."""
    role: str
    """The input of that node that it prepares."""
    from_: Ref = Field(alias="from")
    """The value prepared: that node's input of ``role``."""
    dim: int
    """Features of the prepared value."""
    heads: int | None = None
    """Heads of the prepared value."""


@kind("prepare", PrepareSpec, lowering="attngraph.lower.rules.scorers:Prepare",
      emit="attngraph.lower.export.emit.scorers:emit_prepare", role="scorer",
      style=Style("#fff2cc", "box"), internal=True, part=True, step="pointwise")
def prepare_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """The prepared value: the input's items, each mapped to ``dim`` (per head)."""
    t = ctx.t("from")
    return {"": TensorType((*t.dims[:-1], ctx.spec.dim), heads=ctx.spec.heads)}

