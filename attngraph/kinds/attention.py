"""Shape rules of the attention vocabulary: items, queries/keys/values, scorer,
softmax, readout and policy; and the built-in scorer functions."""

from __future__ import annotations

from attngraph.ir.graph import Dim, TensorType
from attngraph.ir.shapes import RuleCtx
from attngraph.kinds.registry import SCORERS, ScorerInfo, register_scorer, shape_rule

for _info in (
    ScorerInfo("dot", "q·k", same_size=True),
    ScorerInfo("scaled_dot", "q·k/√d", same_size=True),
    ScorerInfo("general", "qᵀ W k", params=lambda dq, dk, h: dq * dk),
    ScorerInfo("additive", "vᵀ tanh(W q + U k)",
               params=lambda dq, dk, h: dq * h + dk * h + h + h),
    ScorerInfo("cosine", "β · cos(q, k)", same_size=True),
    ScorerInfo("mlp", "vᵀ tanh(W k)", needs_query=False, params=lambda dq, dk, h: dk * h + h + h),
    ScorerInfo("location", "s_i = w_i (learned per position), or "
               "-(i - p)²/(2σ²) with p = N·sigmoid(vᵀ tanh(W q))",
               needs_query=False, content=False),
    ScorerInfo("gat", "LeakyReLU_0.2(aᵀ[q ‖ k]) (graph attention)",
               params=lambda dq, dk, h: dq + dk),
):
    register_scorer(_info)


def _proj_dim(ctx: RuleCtx, d_in: int) -> int:
    """Output size of a projection; counts its parameters."""
    s = ctx.spec
    d_out = int(s.dim) if s.dim is not None else d_in
    if s.proj == "identity":
        if d_out != d_in:
            ctx.fail(f"proj identity keeps the size {d_in}, but dim is {d_out}",
                     hint="drop 'dim', or use proj: linear", field="dim")
    elif s.proj == "linear":
        ctx.params += d_in * d_out + (d_out if s.bias else 0)
    else:
        h = int(s.hidden) if s.hidden is not None else d_out
        ctx.params += d_in * h + h + h * d_out + (d_out if s.bias else 0)
    return d_out


@shape_rule("items")
def items_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]: embedded tokens, projected vectors, image patches, graph nodes."""
    s = ctx.spec
    t = ctx.t("from")
    if t.dtype == "long":
        if s.embed is None:
            ctx.fail(f"items from token ids {t} need 'embed: <size>'", "from",
                     "add embed: d to look the ids up in a learned table")
        if t.rank != 1:
            ctx.fail(f"items from ids need one items axis, got {t}", "from")
        src = ctx.src("from")
        vocab = src.field("vocab") if src.is_input and src.spec is not None else None
        if vocab is None:
            ctx.fail("items with 'embed' need token ids from a tokens input (for its vocab)",
                     "from")
        ctx.params += int(vocab) * int(s.embed)
        n, d = t.dims[0], int(s.embed)
    elif t.rank == 3:
        c, h, w = (int(x) for x in t.dims)
        if s.patches is not None:
            ph, pw = s.patches
            if h % ph or w % pw:
                ctx.fail(f"patches {ph}x{pw} do not tile an image of {h}x{w}",
                         hint="choose patch sizes that divide the height and width",
                         field="patches")
            n, d = (h // ph) * (w // pw), c * ph * pw
        else:
            n, d = h * w, c
    elif t.rank == 2 and t.dtype == "float":
        if s.embed is not None:
            ctx.fail("'embed' applies to token ids, but this input is vectors", "from",
                     "use dim: <size> to project vectors")
        n, d = t.dims[0], int(t.dims[1])
    else:
        ctx.fail(f"items need tokens, vectors [N, d], an image or a graph, got {t}", "from",
                 "a single vector is one item: use kind 'queries' or 'linear' for it")
    if s.dim is not None:
        ctx.params += d * int(s.dim) + (int(s.dim) if s.bias else 0)
        d = int(s.dim)
    return {"": TensorType((n, d))}


def _qkv(ctx: RuleCtx, what: str) -> dict[str, TensorType]:
    s = ctx.spec
    if getattr(s, "learned", None) is not None:
        if ctx.has("from"):
            ctx.fail("give 'from' or 'learned', not both")
        if s.dim is None:
            ctx.fail("learned queries need 'dim: <size>'", hint="e.g. {learned: 4, dim: d}")
        k, d = int(s.learned), int(s.dim)
        ctx.params += k * d
        lead: tuple = (k,)
    else:
        if not ctx.has("from"):
            ctx.fail(f"{what} need 'from: <node>' (or learned: K for queries)")
        t = ctx.t("from")
        if t.dtype != "float" or t.rank not in (1, 2) or t.heads:
            ctx.fail(f"{what} project vectors [d] or items [N, d], got {t}", "from")
        lead = t.dims[:-1]
        d = _proj_dim(ctx, int(t.dims[-1]))
    h = s.heads
    if h:
        if d % h:
            lo, hi = h * (d // h), h * (d // h + 1)
            sizes = f"{lo} or {hi}" if lo else str(hi)
            ctx.fail(f"{h} heads do not divide size {d}",
                     hint=f"make the size a multiple of {h} (e.g. dim: {sizes})", field="heads")
        return {"": TensorType((*lead, d // h), heads=h)}
    return {"": TensorType((*lead, d))}


@shape_rule("queries")
def queries_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[M, d] or [d]; with heads h, [M, d/h] per head."""
    return _qkv(ctx, "queries")


@shape_rule("keys")
def keys_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]; with heads h, [N, d/h] per head."""
    return _qkv(ctx, "keys")


@shape_rule("values")
def values_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """[N, d]; with heads h, [N, d/h] per head."""
    return _qkv(ctx, "values")


@shape_rule("scorer")
def scorer_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Scores [N] (one query), [M, N] (all pairs) or [N] (aligned pairs)."""
    from attngraph.errors import did_you_mean

    s = ctx.spec
    info = SCORERS.get(s.fn)
    if info is None:
        ctx.fail(f"unknown scorer fn '{s.fn}'", hint=did_you_mean(s.fn, SCORERS), field="fn")
    k = ctx.need_items("key", f"scorer fn '{s.fn}'")
    n, dk = k.dims[0], int(k.dims[1])
    learned_q = getattr(s.query, "learned", None)
    if learned_q is not None:
        q = TensorType((int(learned_q),), heads=k.heads)
        ctx.params += int(learned_q) * (k.heads or 1)
        qname = "learned"
    elif ctx.has("query"):
        q = ctx.t("query")
        qname = ctx.edge("query").ref
        if q.dtype != "float" or q.rank not in (1, 2):
            ctx.fail(f"a query is a vector [d] or queries [M, d], got {q}", "query")
    else:
        q = None
        qname = ""
    if s.fn == "mlp" and q is not None:
        ctx.fail("fn 'mlp' scores each item alone (vᵀtanh(W k)) and takes no query",
                 "query", "drop 'query', or use fn 'additive' to score against a query")
    if info.needs_query and q is None:
        ctx.fail(f"scorer fn '{s.fn}' needs a query",
                 hint="add query: <node>, or query: {learned: d} for a learned vector")
    if q is not None and (q.heads or None) != (k.heads or None):
        ctx.fail(f"query has {q.heads or 1} head(s) but key has {k.heads or 1}", "query",
                 "give queries and keys the same 'heads'")
    if s.fn == "location":
        return _location(ctx, q, k)
    dq = int(q.dims[-1]) if q is not None else dk
    if info.same_size and dq != dk:
        ctx.fail(
            f"scorer fn '{s.fn}' needs query and key of one size "
            f"(query {qname}: {dq}, key {ctx.edge('key').ref}: {dk})",
            hint="make both dims equal, or use fn 'general' (q^T W k), which maps between sizes",
        )
    hidden = int(s.hidden) if s.hidden is not None else dk
    ctx.params += info.params(dq, dk, hidden) * (k.heads or 1)
    if s.fn == "cosine" and s.beta == "learned":
        ctx.params += 1
    return {"": _pairs(ctx, q, k, n)}


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
        return TensorType((n,), heads=k.heads)
    if q is None or q.rank == 1:
        return TensorType((n,), heads=k.heads)
    return TensorType((q.dims[0], n), heads=k.heads)


def _location(ctx: RuleCtx, q: TensorType | None, k: TensorType) -> dict[str, TensorType]:
    s = ctx.spec
    n = k.dims[0]
    mode = s.mode or ("gaussian" if q is not None else "learned")
    if mode == "learned":
        max_len = s.max_len if s.max_len is not None else (n if isinstance(n, int) else None)
        if max_len is None:
            ctx.fail("location scores learned per position need 'max_len'",
                     hint="add max_len: <longest N>")
        ctx.params += int(max_len)
        if q is not None:
            ctx.fail("location mode 'learned' takes no query", "query",
                     "use mode: gaussian to center a window on a position predicted from it")
        return {"": TensorType((n,))}
    if q is None:
        ctx.fail("location mode 'gaussian' predicts its position from a query",
                 hint="add query: <decoder state>")
    hidden = int(s.hidden) if s.hidden is not None else int(q.dims[-1])
    ctx.params += int(q.dims[-1]) * hidden + hidden
    return {"": TensorType((n,) if q.rank == 1 else (q.dims[0], n))}


@shape_rule("softmax")
def softmax_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Weights of the scores' shape, summing to one over the last (items) axis."""
    s = ctx.spec
    t = ctx.t("scores")
    if t.rank == 0 or t.dtype != "float":
        ctx.fail(f"softmax over nothing: scores '{ctx.edge('scores').ref}' are {t}, with no "
                 "items axis", "scores", "feed it the scores of a scorer ([N] or [M, N])")
    if s.mask is not None:
        m = s.mask
        if (m.causal or m.window is not None) and t.rank != 2:
            what = "causal" if m.causal else "window"
            ctx.fail(f"a {what} mask relates query i to item j, so it needs scores [M, N], "
                     f"got {t}", "scores")
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
    return {"": TensorType(t.dims, heads=t.heads, simplex=True)}


@shape_rule("readout")
def readout_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """z = Σ_i p_i v_i: [d] per query; heads merged by ``combine``; optional ``out``."""
    s = ctx.spec
    w = ctx.t("weights")
    v = ctx.t("values")
    wref = ctx.edge("weights").ref
    if not w.simplex:
        ctx.fail(f"weights '{wref}' are not normalised over items", "weights",
                 "feed the readout a softmax (or a policy's sample), not raw scores")
    if v.rank != 2 or v.dtype != "float":
        ctx.fail(f"values must be items [N, d], got {v}", "values")
    if w.dims[-1] != v.dims[0]:
        ctx.fail(f"weights '{wref}' are normalised over {w.dims[-1]} items, but values "
                 f"'{ctx.edge('values').ref}' have {v.dims[0]}", "values",
                 "weights and values must range over the same items")
    if (w.heads or None) != (v.heads or None):
        ctx.fail(f"weights have {w.heads or 1} head(s) but values have {v.heads or 1}",
                 "values", "give values the same 'heads' as queries and keys")
    d = int(v.dims[1])
    if v.heads and s.combine == "concat":
        d *= v.heads
    if s.out is not None:
        ctx.params += d * int(s.out) + (int(s.out) if s.bias else 0)
        d = int(s.out)
    return {"": TensorType((*w.dims[:-1], d))}


@shape_rule("policy")
def policy_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Ports: sample (default), log_prob, entropy, baseline."""
    s = ctx.spec
    if s.dist == "categorical":
        if not ctx.has("scores") or ctx.has("mean"):
            ctx.fail("a categorical policy samples from 'scores' (and takes no 'mean')",
                     hint="give scores: <scorer>, or use dist: gaussian with mean: <node>")
        t = ctx.t("scores")
        if t.rank == 0:
            ctx.fail("a categorical policy needs scores over items", "scores")
        sample = TensorType(t.dims, heads=t.heads, simplex=True)
        lp = TensorType(t.dims[:-1], heads=t.heads)
    else:
        if not ctx.has("mean") or ctx.has("scores"):
            ctx.fail("a gaussian policy samples around 'mean' (and takes no 'scores')",
                     hint="give mean: <node> (e.g. a location predicted by a linear)")
        if s.estimator == "gumbel":
            ctx.fail("estimator 'gumbel' relaxes categorical choices, not gaussian ones",
                     hint="use reinforce for gaussian locations", field="estimator")
        t = ctx.t("mean")
        if t.rank != 1:
            ctx.fail(f"a gaussian policy's mean is a vector [k], got {t}", "mean")
        sample = TensorType(t.dims)
        lp = TensorType(())
    if isinstance(s.baseline, bool):
        ctx.params += 1 if s.baseline else 0
    else:
        b = ctx.t("baseline")
        if b.rank != 1:
            ctx.fail(f"the baseline reads a vector [d], got {b}", "baseline")
        ctx.params += int(b.dims[0]) + 1
    return {"": sample, "sample": sample, "log_prob": lp, "entropy": lp,
            "baseline": TensorType(())}
