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

from collections.abc import Callable

from attngraph.analysis.cost import readout_cost, weights_cost
from attngraph.analysis.scope import Origin, Scope, origins, qid, role, scoring
from attngraph.analysis.site_axes import (
    _basis,
    _exposure,
    _hardness,
    _reach,
    _relative_basis,
    _source,
)
from attngraph.analysis.site_chain import (
    _biases,
    _dedup,
    _formula,
    _key_heads,
    _normalised,
    _passes_on,
    _qk,
    _readers,
    _rotary,
    _scorers,
    _scores_edge,
    _skip_dropout,
    _src,
)
from attngraph.analysis.sites import (
    AXES,
    Axis,
    Site,
    exposed,
    heads_axis,
    phrase,
    recurrence,
)
from attngraph.ir.graph import Edge, Graph, Node
from attngraph.kinds.base import traits_of
from attngraph.registry import resolve

__all__ = ["AXES", "Axis", "Site", "find_sites"]


def _readout_site(scope: Scope, r: Node) -> Site | None:
    we = r.edge("weights")
    if we is None or we.src not in scope.graph:
        return None
    p = _skip_dropout(scope, we)
    content = p
    if traits_of(p).addresses:
        c = _src(scope, p, "content")
        content = c if c is not None else p
    computed = _formula(content) is not None
    if computed:  # weights a formula computes: a site when scores reach them
        scorers = _scorers(scope, we)
        if not scorers:
            return None
    elif role(content) != "weights" or (
        traits_of(content).samples and content.spec.dist != "categorical"
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
        "exposure": _exposure(scope, p if traits_of(p).addresses else content),
    }
    nodes = [*scorers, content, p, r, _src(scope, r, "values")]
    nodes += [_src(scope, sc, x) for sc in scorers for x in ("query", "key")]
    params: dict[str, int] = {}
    for n in nodes:
        if n is not None and n.params and (
            role(n) in ("projection", "scorer", "weights", "readout") or traits_of(n).addresses
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


def _unscored_axes(p: Node, se: Edge | None, made: tuple[Origin, ...],
                   over: str) -> tuple[Axis, Axis, Axis]:
    """Basis, source and reach of weights no scorer makes: scores computed from
    ``made`` (positions only: location), ranging over ``over``."""
    located = bool(made) and all(traits_of(o.kind).positions == "vectors" for o in made)
    basis = Axis("location" if located else "content",
                 f"no scorer: the scores '{se.ref if se else '?'}' are computed from "
                 f"{phrase(made)}, and the weights range over {over}")
    source = Axis("self", f"no query and no keys: the scores come from {phrase(made)} alone")
    reach = (_reach([], p) if getattr(p.spec, "mask", None) is not None else
             Axis("global", f"every one of {over} gets a weight"))
    return basis, source, reach


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
        basis, source, reach = _unscored_axes(p, se, tuple(made), over)
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


def _own_site(n: Node) -> Callable[[Scope, Node], Site]:
    """The site rule a kind gives of its own (``site=``, a glimpse's, a window's)."""
    rule = traits_of(n).site
    return resolve(rule) if isinstance(rule, str) else rule  # type: ignore[return-value]


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
        elif traits_of(n).site is not None:
            sites.append(_own_site(n)(scope, n))
        if n.body is not None:
            sites.extend(_walk(scope.child(n)))
    return sites


def find_sites(graph: Graph) -> list[Site]:
    """Every attention site of an inferred graph (and of every body in it), in
    execution order, each placed on every axis with the reason."""
    return _walk(Scope(graph))
