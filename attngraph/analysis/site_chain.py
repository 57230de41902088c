"""What reaches an attention site's weights, read from the IR: the scorers whose
scores reach them (through sums, pass-throughs and formulas), the position biases
and rotations on the way, the queries' and keys' origins, the nodes that read the
weights. Every test reads a kind's traits (:class:`attngraph.kinds.base.Kind`), never
its name. Used by :mod:`attngraph.analysis.axes` and :mod:`attngraph.analysis.site_axes`.
"""

from __future__ import annotations

from attngraph.analysis.scope import Origin, Scope, origins, qid, role
from attngraph.ir.graph import Edge, Node
from attngraph.kinds.base import traits_of
from attngraph.spec.fields import fields_of

__all__ = ["formula_of"]


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
    """The node ``e`` reads, through kinds whose value is their input's (dropout)."""
    n = scope.graph.node(e.src)
    while traits_of(n).passthrough:
        n = scope.graph.node(n.inputs[0].src)
    return n


def _src(scope: Scope, n: Node, role: str) -> Node | None:
    e = n.edge(role)
    return scope.graph.node(e.src) if e is not None and e.src in scope.graph else None


def _key_heads(scope: Scope, scorers: list[Node]) -> int | None:
    """Heads of the keys the first scorer reads (fewer than the queries' in GQA)."""
    for sc in scorers:
        e = sc.edge("key")
        if e is not None and e.src in scope.graph:
            t = scope.graph.node(e.src).types.get(e.port)
            if t is not None:
                return t.heads or 1
    return None


def _carries_scores(n: Node) -> bool:
    """Whether scores reach the weights through ``n``: a sum (an add, a position bias),
    a pass-through (dropout) or a formula."""
    t = traits_of(n)
    return t.sums or t.passthrough or _formula(n) is not None


def _scorers(scope: Scope, e: Edge | None) -> list[Node]:
    """Scorers whose scores reach ``e``, through sums and dropouts."""
    if e is None or e.src not in scope.graph:
        return []
    n = scope.graph.node(e.src)
    if role(n) == "scorer":
        return [n]
    if _carries_scores(n):
        found = [sc for x in n.inputs for sc in _scorers(scope, x)]
        return list({sc.id: sc for sc in found}.values())
    return []


def _biases(scope: Scope, e: Edge | None) -> list[Node]:
    """Relative position biases between the scorers and the weights of ``e``."""
    if e is None or e.src not in scope.graph:
        return []
    n = scope.graph.node(e.src)
    found = [n] if traits_of(n).positions == "bias" else []
    if _carries_scores(n):
        found += [b for x in n.inputs for b in _biases(scope, x)]
    return list({b.id: b for b in found}.values())


def _rotary(scope: Scope, scorers: list[Node]) -> bool:
    """Whether a scorer's query or key is rotated by its position (RoPE)."""
    for sc in scorers:
        for role_ in ("query", "key"):
            e = sc.edge(role_)
            src = scope.graph.node(e.src) if e is not None and e.src in scope.graph else None
            if src is not None and traits_of(src).positions == "rotary":
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


def _readers(scope: Scope, p: Node) -> list[tuple[Node, Edge]]:
    """The nodes that read the weights of ``p`` (through dropouts), with the edge."""
    out: list[tuple[Node, Edge]] = []
    for n in scope.graph.nodes:
        for e in n.inputs:
            if e.src in scope.graph and e.port in ("", "sample") \
                    and _skip_dropout(scope, e).id == p.id and not traits_of(n).passthrough:
                out.append((n, e))
    return out


def _normalised(n: Node) -> bool:
    """Whether ``n`` makes weights of a normaliser over an axis (its type says so), or
    weights a formula computes (a softmax over the features, a sigmoid of scores)."""
    t = n.types.get("") or n.types.get("sample")
    return (role(n) == "weights" or _formula(n) is not None) and t is not None and t.weights


def _passes_on(n: Node) -> bool:
    """A formula whose value is still per item (scores or weights): the weights it reads
    belong to the site of what reads its value."""
    t = n.types.get("")
    if _formula(n) is None or t is None:
        return False
    from attngraph.algebra.axes import axes_of, is_scores

    names = axes_of(t)
    return names is not None and is_scores(names)


formula_of = _formula
