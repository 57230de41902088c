"""Find the attention sites of a graph and place each on every axis, with the reason.

An *attention site* is a readout whose weights come (directly, or through a
dropout or an NTM ``address``) from a softmax or a categorical policy; weights of a
normaliser (a node of role ``weights``) that no readout reads, over any axis: a
pointer over the items, or a softmax over the features of a vector whose weights
scale something (``mul``); or a ``glimpse`` that crops an image at a location, a
DRAW ``filterbank`` or Graves' soft ``window``. Sites inside block, repeat and loop
bodies are found too. Everything is read from the IR, never from names, titles or
comments.

The axes, each with its values:

``hardness`` — soft | hard
    hard when the weights (or a glimpse location) are *sampled* by a policy, or a
    glimpse crops at a point; soft for softmax/sparsemax weights.
``basis`` — content | location | content+location
    content when the scores depend on the keys' content through the scorer
    function; location when they depend on positions only (fn ``location``, keys
    that are position vectors, a glimpse location); content+location for NTM
    addressing (content weights shifted by location).
``source`` — self | external
    self (intra-attention) when queries and keys originate from the same node,
    or when there is no query and each item scores itself; external when the
    queries come from elsewhere (another sequence, a decoder state, a learned
    query vector).
``reach`` — global | local
    local with a window mask, an adjacency mask (graph neighbours), a gaussian
    location window or a glimpse; global otherwise.
``heads`` — single-head | multi-head
``recurrence`` — recurrent | not recurrent
    recurrent when the site runs once per step inside a loop body, or its query
    is an rnn's state.
``exposure`` — explicit | implicit
    In Graves' sense every site found here is an explicit mechanism; this axis
    records whether the weights are *exposed*: explicit when they reach a
    declared output of the spec (so the compiled module returns them and they can
    be inspected or supervised), implicit when they are only an internal
    intermediate (the module may then fuse them away and never materialise them).
"""

from __future__ import annotations

from attngraph.analysis.cost import readout_cost, weights_cost
from attngraph.analysis.scope import Origin, Scope, origins, qid, role, scoring
from attngraph.analysis.sensor_sites import SENSOR_SITES
from attngraph.analysis.sites import (
    AXES,
    ESTIMATORS,
    Axis,
    Site,
    exposed,
    heads_axis,
    phrase,
    recurrence,
)
from attngraph.ir.graph import Edge, Graph, Node
from attngraph.kinds.choices import named
from attngraph.kinds.normalisers import NORMALISERS
from attngraph.spec.fields import fields_of

__all__ = ["AXES", "Axis", "Site", "find_sites"]


def _formula(n: Node) -> str | None:
    """The formula of a node that computes one (an ``expr``), read from its model's
    formula fields, else None."""
    if n.is_input or n.spec is None:
        return None
    names = fields_of(type(n.spec)).formulas
    return next((str(getattr(n.spec, f)) for f in sorted(names)), None)


def _scores_edge(n: Node) -> Edge | None:
    """The edge a normaliser reads its scores on; for a formula, its first value."""
    e = n.edge("scores")
    if e is None and _formula(n) is not None:
        e = next(iter(n.inputs), None)
    return e


def _skip_dropout(scope: Scope, e: Edge) -> Node:
    n = scope.graph.node(e.src)
    while n.kind == "dropout":
        n = scope.graph.node(n.inputs[0].src)
    return n


def _src(scope: Scope, n: Node, role: str) -> Node | None:
    e = n.edge(role)
    return scope.graph.node(e.src) if e is not None and e.src in scope.graph else None


def _hardness(p: Node) -> Axis:
    if p.kind == "policy":
        est = ESTIMATORS[p.spec.estimator]
        return Axis("hard", f"weights are sampled by policy '{p.id}' ({p.spec.dist}, {est})")
    if p.kind == "address":
        return Axis("soft", f"weights are a differentiable blend from address '{p.id}'")
    fn = getattr(p.spec, "fn", p.kind)
    formula = _formula(p)
    if formula is not None:
        out = p.types.get("")
        dist = "a distribution over the items" if out is not None and out.simplex else \
            "not a distribution (they need not sum to one)"
        return Axis("soft", f"weights '{p.id}' are the formula {formula}: {dist}")
    info = named(p.spec, NORMALISERS)  # its traits, never its name
    if info is not None and info.kernel:
        return Axis("soft", f"weights of '{p.id}' are the kernel scores s_ij = "
                    f"φ(q_i)·φ(k_j) normalised by fn {fn}, {info.formula}: linear attention, "
                    "no softmax")
    notes = []
    if info is not None and info.needs_k:
        notes.append(f"only the {getattr(p.spec, 'k', 0)} highest scores keep weight"
                     + (", and any tied with the last of them"
                        if getattr(p.spec, "ties", "first") == "keep" else ""))
    elif info is not None:
        notes.append(info.formula + (": sparse, many weights exactly 0" if info.sparse else ""))
    extra = f" ({'; '.join(notes)})" if notes else ""
    temp = getattr(p.spec, "temperature", 1.0)
    t = f", temperature {temp:g}" if temp != 1.0 else ""
    if getattr(p.spec, "axis", "items") == "queries":
        extra += " over the queries: the queries compete for each item"
    return Axis("soft", f"weights are {fn}(scores) of '{p.id}'{t}{extra}")


def _location_how(sc: Node) -> str:
    mode = sc.spec.mode or ("gaussian" if sc.edge("query") else "learned")
    return ("a learned score per position" if mode == "learned" else
            "a gaussian window around a position predicted from the query")


def _basis(scorers: list[Node], p: Node, keys: tuple[Origin, ...]) -> Axis:
    if not scorers:
        return Axis("unknown", f"weights of '{p.id}' do not come from a scorer")
    fns = " + ".join(scoring(sc).fn for sc in scorers)
    content = [sc for sc in scorers if scoring(sc).content]
    located = [sc for sc in scorers if not scoring(sc).content]
    if p.kind == "address":
        return Axis("content+location",
                    f"content weights via fn {fns}, then interpolated with the previous "
                    f"weights, shifted and sharpened by address '{p.id}'")
    if content and located:
        where = "; ".join(f"'{sc.id}': {_location_how(sc)}" for sc in located)
        return Axis("content+location",
                    f"content scores via fn {' + '.join(scoring(sc).fn for sc in content)} "
                    f"are added to location scores ({where}) before normalising")
    if located:
        how = "; ".join(_location_how(sc) for sc in located)
        return Axis("location", f"fn {' + '.join(scoring(sc).fn for sc in located)} scores "
                    f"positions ({how}), not item content")
    featured = [(sc, e) for sc in scorers if (e := sc.edge("features")) is not None]
    if featured:
        what = "; ".join(f"'{sc.id}' reads per-item features '{e.ref}'" for sc, e in featured)
        return Axis("content+location",
                    f"content scores via fn {fns}, and {what} inside the score: where "
                    "attention went before (a coverage, or the previous alignment: "
                    "location-aware, hybrid attention)")
    if keys and all(o.kind == "position" for o in keys):
        names = ", ".join(f"'{o.qid}'" for o in keys)
        return Axis("location", f"keys are position vectors {names}, so fn {fns} "
                    "compares positions only")
    return Axis("content", f"scores depend on key content via fn {fns}")


_BIAS = {"alibi": "ALiBi: −m_h·|i − j|, a fixed slope per head",
         "t5": "T5: a learned scalar per head and bucket of j − i"}


def _relative_basis(axis: Axis, biases: list[Node], rotary: bool) -> Axis:
    """Content scores that also see relative positions: biases added, or RoPE."""
    parts = [f"a relative position bias '{b.id}' ({_BIAS[b.spec.fn]})" for b in biases]
    if rotary:
        parts.append("queries and keys rotated by their positions (RoPE), so q·k depends "
                     "on j − i")
    if not parts:
        return axis
    label = "content+position" if axis.value == "content" else axis.value + "+position"
    return Axis(label, f"{axis.reason}; plus " + "; ".join(parts))


def _source(query: tuple[Origin, ...], keys: tuple[Origin, ...], learned: bool) -> Axis:
    if learned:
        return Axis("external", f"queries are {phrase(query)} (a parameter), keys come "
                    f"from {phrase(keys)}")
    if not query:
        return Axis("self", f"no query: each item of {phrase(keys)} scores itself")
    shared = [o for o in query if o.qid in {k.qid for k in keys}]
    if shared:
        return Axis("self", f"queries and keys both derive from {phrase(tuple(shared))}")
    return Axis("external", f"queries come from {phrase(query)}, keys from {phrase(keys)}")


def _index_of(e: object) -> str | None:
    """``i`` or ``j`` (or pos(queries), pos(items)) as the axis it indexes, else None."""
    from attngraph.algebra.formula import Call, Name

    if isinstance(e, Name) and e.name in ("i", "j"):
        return "queries" if e.name == "i" else "items"
    if isinstance(e, Call) and e.fn == "pos" and len(e.args) == 1 \
            and isinstance(e.args[0], Name) and e.args[0].name in ("queries", "items"):
        return e.args[0].name
    return None


def _formula_masks(scope: Scope, p: Node, depth: int = 6) -> tuple[bool, float | None, str]:
    """Whether the formulas that make ``p``'s weights keep only j ≤ i (causal), the
    window |i − j| ≤ w they keep, and the node whose formula says so (read from the
    comparisons of the indices in them, through the formulas they read)."""
    from attngraph.algebra.formula import Binary, Call, FormulaError, Num, parse, walk

    causal, window, where = False, None, ""
    seen: set[str] = set()
    todo = [(p, depth)]
    while todo:
        n, d = todo.pop()
        text = _formula(n)
        if text is None or n.id in seen or d <= 0:
            continue
        seen.add(n.id)
        try:
            tree = parse(text)
        except FormulaError:
            continue
        for x in walk(tree):
            if not isinstance(x, Binary) or x.op not in ("<", "<=", ">", ">="):
                continue
            lo, hi = (x.left, x.right) if x.op in ("<", "<=") else (x.right, x.left)
            if _index_of(lo) == "items" and _index_of(hi) == "queries":
                strict = x.op in ("<", ">")
                causal, where = True, f"{n.id}' keeps j {'<' if strict else '≤'} i"
            if isinstance(lo, Call) and lo.fn == "abs" and isinstance(hi, Num) \
                    and isinstance(lo.args[0], Binary) and lo.args[0].op == "-" \
                    and {_index_of(lo.args[0].left), _index_of(lo.args[0].right)} \
                    == {"queries", "items"}:
                window = hi.value - (1 if x.op in ("<", ">") else 0)
                where = f"{n.id}'"
        todo += [(scope.graph.node(e.src), d - 1) for e in n.inputs if e.src in scope.graph]
    return causal, window, where


def _reach(scorers: list[Node], p: Node, scope: Scope | None = None) -> Axis:
    if scope is not None and _formula(p) is not None:
        keeps_before, window, where = _formula_masks(scope, p)
        if window is not None:
            side = "before it" if keeps_before else "either side"
            return Axis("local", f"window {window:g}: the formula of '{where} keeps items "
                        f"within distance {window:g} {side} of the query")
        if keeps_before:
            return Axis("global", f"every query may attend to all items that precede it "
                        f"(the formula of '{where})")
    mask = getattr(p.spec, "mask", None)
    if mask is not None and mask.window is not None:
        side = "before it" if mask.causal else "either side"
        return Axis("local", f"window {mask.window}: items within distance {mask.window} "
                    f"{side} of the query (mask of '{p.id}')")
    if mask is not None and mask.adjacency is not None:
        adj = p.edge("mask.adjacency")
        src = adj.src if adj is not None else "?"
        return Axis("local", f"graph neighbours only: adjacency mask from '{src}'")
    # scores of positions predicted from a query: a window around that position
    gauss = [sc for sc in scorers if not scoring(sc).content and sc.edge("query")]
    if gauss:
        sig = getattr(gauss[0].spec, "sigma", None)
        return Axis("local", "gaussian window" + (f" (σ = {sig:g})" if sig else "")
                    + " around a position predicted from the query")
    before = " that precede it (causal mask)" if mask is not None and mask.causal else ""
    return Axis("global", f"every query may attend to all items{before}")


def _exposure(scope: Scope, p: Node) -> Axis:
    out = exposed(scope, p.id)
    if out is not None:
        return Axis("explicit", f"weights '{p.id}' are the declared output '{out}'")
    return Axis("implicit", f"weights '{p.id}' are internal (not a declared output)")


def _key_heads(scope: Scope, scorers: list[Node]) -> int | None:
    """Heads of the keys the first scorer reads (fewer than the queries' in GQA)."""
    for sc in scorers:
        e = sc.edge("key")
        if e is not None and e.src in scope.graph:
            t = scope.graph.node(e.src).types.get(e.port)
            if t is not None:
                return t.heads or 1
    return None


def _scorers(scope: Scope, e: Edge | None) -> list[Node]:
    """Scorers whose scores reach ``e``, through sums and dropouts."""
    if e is None or e.src not in scope.graph:
        return []
    n = scope.graph.node(e.src)
    if role(n) == "scorer":
        return [n]
    if n.kind in ("add", "dropout", "position_bias") or _formula(n) is not None:
        found = [sc for x in n.inputs for sc in _scorers(scope, x)]
        return list({sc.id: sc for sc in found}.values())
    return []


def _biases(scope: Scope, e: Edge | None) -> list[Node]:
    """Relative position biases between the scorers and the weights of ``e``."""
    if e is None or e.src not in scope.graph:
        return []
    n = scope.graph.node(e.src)
    found = [n] if n.kind == "position_bias" else []
    if n.kind in ("add", "dropout", "position_bias") or _formula(n) is not None:
        found += [b for x in n.inputs for b in _biases(scope, x)]
    return list({b.id: b for b in found}.values())


def _rotary(scope: Scope, scorers: list[Node]) -> bool:
    """Whether a scorer's query or key is rotated by its position (RoPE)."""
    for sc in scorers:
        for role_ in ("query", "key"):
            e = sc.edge(role_)
            if e is not None and e.src in scope.graph and scope.graph.node(e.src).kind == "rotary":
                return True
    return False


def _qk(scope: Scope, scorers: list[Node]) -> tuple[tuple[Origin, ...], tuple[Origin, ...], bool]:
    """Query and key origins over all scorers; True when the query is learned."""
    query: list[Origin] = []
    keys: list[Origin] = []
    for sc in scorers:
        lq = getattr(sc.spec.query, "learned", None)
        if lq is not None:
            query.append(Origin(qid(scope, sc.id), "learned",
                                f"a learned query vector [{lq}] of '{sc.id}'"))
        elif sc.edge("query") is not None:
            query.extend(origins(scope, sc.edge("query")))
        if sc.edge("key") is not None:
            keys.extend(origins(scope, sc.edge("key")))
    q, k = tuple(_dedup(query)), tuple(_dedup(keys))
    return q, k, bool(q) and all(o.kind == "learned" for o in q)


def _dedup(xs: list[Origin]) -> list[Origin]:
    seen: set[str] = set()
    return [o for o in xs if not (o.qid in seen or seen.add(o.qid))]  # type: ignore[func-returns-value]


def _readout_site(scope: Scope, r: Node) -> Site | None:
    we = r.edge("weights")
    if we is None or we.src not in scope.graph:
        return None
    p = _skip_dropout(scope, we)
    content = p
    if p.kind == "address":
        c = _src(scope, p, "content")
        content = c if c is not None else p
    computed = _formula(content) is not None
    if computed:  # weights a formula computes: a site when scores reach them
        scorers = _scorers(scope, we)
        if not scorers:
            return None
    elif role(content) != "weights" or (
        content.kind == "policy" and content.spec.dist != "categorical"
    ):
        return None
    else:
        scorers = _scorers(scope, content.edge("scores"))
    query, keys, learned = _qk(scope, scorers)
    ve = r.edge("values")
    values = tuple(origins(scope, ve)) if ve is not None else ()
    wt = p.types.get("") or p.types.get("sample")
    heads = (wt.heads or 1) if wt is not None else 1
    fn = " + ".join(scoring(sc).fn for sc in scorers) or None
    formula = "; ".join(scoring(sc).formula for sc in scorers) or None
    chain = [*scorers, content] + ([p] if p is not content else []) + [r]
    axes = {
        "hardness": _hardness(content),
        "basis": _relative_basis(_basis(scorers, p, keys),
                                 _biases(scope, _scores_edge(content)),
                                 _rotary(scope, scorers)),
        "source": _source(query, keys, learned),
        "reach": _reach(scorers, content, scope),
        "heads": heads_axis(heads, r, _key_heads(scope, scorers)),
        "recurrence": recurrence(scope, query),
        "exposure": _exposure(scope, p if p.kind == "address" else content),
    }
    nodes = [*scorers, content, p, r, _src(scope, r, "values")]
    nodes += [_src(scope, sc, x) for sc in scorers for x in ("query", "key")]
    params: dict[str, int] = {}
    for n in nodes:
        if n is not None and n.params and (
            role(n) in ("projection", "scorer", "weights", "readout") or n.kind == "address"
        ):
            params[qid(scope, n.id)] = n.params
    return Site(
        id=qid(scope, r.id), form="readout", chain=tuple(qid(scope, c.id) for c in chain),
        fn=fn, formula=formula, heads=heads, query=query, keys=keys, values=values, axes=axes,
        cost=readout_cost(scope, r, scorers, content), params=params,
    )


def _pointer_site(scope: Scope, p: Node) -> Site | None:
    """A softmax whose weights are themselves the result (nothing reads values with
    them): a pointer over the items, as a pointer network emits."""
    scorers = _scorers(scope, _scores_edge(p))
    if not scorers or exposed(scope, p.id) is None:
        return None
    query, keys, learned = _qk(scope, scorers)
    wt = p.types.get("")
    heads = (wt.heads or 1) if wt is not None else 1
    axes = {
        "hardness": _hardness(p),
        "basis": _relative_basis(_basis(scorers, p, keys), _biases(scope, _scores_edge(p)),
                                 _rotary(scope, scorers)),
        "source": _source(query, keys, learned),
        "reach": _reach(scorers, p),
        "heads": heads_axis(heads, None, _key_heads(scope, scorers)),
        "recurrence": recurrence(scope, query),
        "exposure": Axis("explicit", f"the weights of '{p.id}' are the result: a pointer "
                         "over the items, no values are read with them"),
    }
    params = {qid(scope, n.id): n.params for n in scorers if n.params}
    return Site(
        id=qid(scope, p.id), form="pointer",
        chain=tuple(qid(scope, c.id) for c in (*scorers, p)),
        fn=" + ".join(scoring(sc).fn for sc in scorers) or None,
        formula="; ".join(scoring(sc).formula for sc in scorers) or None, heads=heads,
        query=query, keys=keys, values=(), axes=axes,
        cost=readout_cost(scope, p, scorers, p), params=params,
    )


def _readers(scope: Scope, p: Node) -> list[tuple[Node, Edge]]:
    """The nodes that read the weights of ``p`` (through dropouts), with the edge."""
    out: list[tuple[Node, Edge]] = []
    for n in scope.graph.nodes:
        for e in n.inputs:
            if e.src in scope.graph and e.port in ("", "sample") \
                    and _skip_dropout(scope, e).id == p.id and n.kind != "dropout":
                out.append((n, e))
    return out


def _normalised(n: Node) -> bool:
    """Whether ``n`` makes weights of a normaliser over an axis (its type says so), or
    weights a formula computes (a softmax over the features, a sigmoid of scores)."""
    t = n.types.get("") or n.types.get("sample")
    return (role(n) == "weights" or _formula(n) is not None) and t is not None and t.weights


def _weights_site(scope: Scope, p: Node) -> Site:
    """Weights that no readout reads: a softmax over any axis (the features of a vector
    whose weights then scale something, or items), described by what it reads."""
    scorers = _scorers(scope, _scores_edge(p))
    wt = p.types.get("") or p.types.get("sample")
    dims = wt.dims if wt is not None else ()
    over_queries = getattr(p.spec, "axis", "items") == "queries" and len(dims) == 2
    dim = dims[-2] if over_queries else (dims[-1] if dims else "?")
    se = _scores_edge(p)
    features = not scorers and isinstance(dim, int)
    if features:
        over = f"the {dim} features of '{se.ref if se else p.id}'"
    else:
        over = f"the {dim} {'queries' if over_queries else 'items'}"
    made = origins(scope, se)
    readers = _readers(scope, p)
    values = tuple(_dedup([o for n, e in readers for x in n.inputs if x is not e
                           for o in origins(scope, x)]))
    used = ", ".join(f"'{n.id}' ({n.kind})" for n, _ in readers) or "nothing"
    query, keys, learned = _qk(scope, scorers)
    heads = (wt.heads or 1) if wt is not None else 1
    if scorers:
        basis = _relative_basis(_basis(scorers, p, keys), _biases(scope, se),
                                _rotary(scope, scorers))
        source = _source(query, keys, learned)
        reach = _reach(scorers, p)
    else:
        located = bool(made) and all(o.kind == "position" for o in made)
        basis = Axis("location" if located else "content",
                     f"no scorer: the scores '{se.ref if se else '?'}' are computed from "
                     f"{phrase(tuple(made))}, and the weights range over {over}")
        source = Axis("self", f"no query and no keys: the scores come from "
                      f"{phrase(tuple(made))} alone")
        reach = (_reach(scorers, p) if getattr(p.spec, "mask", None) is not None else
                 Axis("global", f"every one of {over} gets a weight"))
    out = exposed(scope, p.id)
    exposure = (Axis("explicit", f"weights '{p.id}' are the declared output '{out}'")
                if out is not None else
                Axis("implicit", f"weights '{p.id}' are internal (not a declared output), "
                     f"read by {used}"))
    axes = {
        "hardness": _hardness(p),
        "basis": basis,
        "source": source,
        "reach": reach,
        "heads": heads_axis(heads, None, _key_heads(scope, scorers)) if scorers or heads > 1
        else Axis("single-head", "one set of weights"),
        "recurrence": recurrence(scope, query),
        "exposure": exposure,
    }
    src = scope.graph.node(se.src) if se is not None and se.src in scope.graph else None
    first = scorers or ([src] if src is not None and not src.is_input else [])
    params = {qid(scope, n.id): n.params for n in first if n.params}
    return Site(
        id=qid(scope, p.id), form="weights",
        chain=tuple(qid(scope, c.id) for c in (*first, p, *(n for n, _ in readers))),
        fn=" + ".join(scoring(sc).fn for sc in scorers) or None,
        formula="; ".join(scoring(sc).formula for sc in scorers) or None, heads=heads,
        query=query, keys=keys, values=values, axes=axes,
        cost=readout_cost(scope, p, scorers, p) if scorers else
        weights_cost(scope, p, over, "k" if features else "N"),
        params=params,
    )


def _passes_on(n: Node) -> bool:
    """A formula whose value is still per item (scores or weights): the weights it reads
    belong to the site of what reads its value."""
    t = n.types.get("")
    if _formula(n) is None or t is None:
        return False
    from attngraph.algebra.axes import axes_of, is_scores

    names = axes_of(t)
    return names is not None and is_scores(names)


def _walk(scope: Scope) -> list[Site]:
    sites: list[Site] = []
    # weights a readout (or a memory, a normaliser, a fused attention) reads belong to
    # that reader's site; through a dropout too
    read = {_skip_dropout(scope, e).id for n in scope.graph.nodes for e in n.inputs
            if e.src in scope.graph
            and (role(n) in ("readout", "memory", "weights", "attention") or _passes_on(n))}
    for n in scope.graph.order():
        if _normalised(n) and n.id not in read:
            sites.append(_pointer_site(scope, n) or _weights_site(scope, n))
        if role(n) == "readout":
            site = _readout_site(scope, n)
            if site is not None:
                sites.append(site)
        elif n.kind in SENSOR_SITES:
            sites.append(SENSOR_SITES[n.kind](scope, n))
        if n.body is not None:
            sites.extend(_walk(scope.child(n)))
    return sites


def find_sites(graph: Graph) -> list[Site]:
    """Every attention site of an inferred graph (and of every body in it), in
    execution order, each placed on every axis with the reason."""
    return _walk(Scope(graph))
