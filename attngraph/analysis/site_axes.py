"""Each axis of an attention site (see :mod:`attngraph.analysis.axes`), placed with
its reason from what reaches the weights: hardness, basis, source, reach, exposure.
Every test reads a kind's traits (``samples``, ``addresses``, ``positions``...) or a
registered function's (:data:`attngraph.kinds.NORMALISERS`), never a name.
"""

from __future__ import annotations

from attngraph.analysis.scope import Origin, Scope, scoring
from attngraph.analysis.site_chain import _formula
from attngraph.analysis.sites import ESTIMATORS, Axis, exposed, phrase
from attngraph.ir.graph import Node
from attngraph.kinds.base import traits_of
from attngraph.kinds.choices import named
from attngraph.kinds.normalisers import NORMALISERS
from attngraph.kinds.relative import BIAS_FORMULAS

__all__ = ["hardness", "basis", "relative_basis", "source", "reach", "exposure"]


def _hardness(p: Node) -> Axis:
    if traits_of(p).samples:
        est = ESTIMATORS[p.spec.estimator]
        return Axis("hard", f"weights are sampled by policy '{p.id}' ({p.spec.dist}, {est})")
    if traits_of(p).addresses:
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
    if traits_of(p).addresses:
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
    if keys and all(traits_of(o.kind).positions == "vectors" for o in keys):
        names = ", ".join(f"'{o.qid}'" for o in keys)
        return Axis("location", f"keys are position vectors {names}, so fn {fns} "
                    "compares positions only")
    return Axis("content", f"scores depend on key content via fn {fns}")


def _bias_text(b: Node) -> str:
    """What a position bias adds: its fn's formula (the kind's own table), else its doc."""
    fn = getattr(b.spec, "fn", None)
    return BIAS_FORMULAS.get(fn, traits_of(b).doc) if isinstance(fn, str) else traits_of(b).doc


def _relative_basis(axis: Axis, biases: list[Node], rotary: bool) -> Axis:
    """Content scores that also see relative positions: biases added, or RoPE."""
    parts = [f"a relative position bias '{b.id}' ({_bias_text(b)})" for b in biases]
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


hardness, basis, relative_basis = _hardness, _basis, _relative_basis
source, reach, exposure = _source, _reach, _exposure
