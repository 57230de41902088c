"""The cost of one attention site as a function of the symbolic sizes.

Cost counts multiply-adds of the scores and of the weighted sum, keeping the
dominant term: ``pairs × width``, where ``pairs`` is how many (query, item)
scores are formed (``M·N`` for all pairs, ``N`` for one query or aligned pairs,
``M·w`` inside a window of ``w = 2k+1`` items) and ``width`` is the feature size
``d`` each pair costs (key size × heads, or the values' size when larger). A
site inside a loop is paid once per step, so the loop's step count multiplies.
Integers stay as numbers, symbols repeat as powers: ``O(N²·d)``, ``O(T·N·d)``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from attngraph.analysis.scope import Scope
from attngraph.ir.graph import Dim, Node, TensorType

__all__ = ["Cost", "fmt_product", "readout_cost", "glimpse_cost"]

_SUP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt_product(factors: list[Dim]) -> str:
    """``['T', 'N', 'N', 'd']`` -> ``T·N²·d``; integers are multiplied together first."""
    num = 1
    for f in factors:
        if isinstance(f, int):
            num *= f
    syms = Counter(f for f in factors if isinstance(f, str))
    parts = [str(num)] if num != 1 or not syms else []
    for s, k in syms.items():
        parts.append(s + (str(k).translate(_SUP) if k > 1 else ""))
    return "·".join(parts)


@dataclass(frozen=True)
class Cost:
    """``O(expr)`` with the meaning of each symbol that is not an input length.

    ``factors`` are the multiplied sizes (symbols or integers); ``where`` binds
    the symbols a reader cannot find among the inputs (``d = 64``, ``w = 11``);
    ``reason`` says how the count arises.
    """

    factors: tuple[Dim, ...]
    where: tuple[tuple[str, int], ...]
    reason: str

    @property
    def expr(self) -> str:
        """The big-O text, e.g. ``O(M·N·d)``."""
        return f"O({fmt_product(list(self.factors))})"

    def __str__(self) -> str:
        binds = ", ".join(f"{k} = {v}" for k, v in self.where)
        return self.expr + (f" with {binds}" if binds else "")

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form with stable keys."""
        return {"expr": self.expr, "where": dict(self.where), "reason": self.reason}


def _type_of(scope: Scope, node: Node, role: str) -> TensorType | None:
    e = node.edge(role)
    if e is None or e.src not in scope.graph:
        return None
    return scope.graph.node(e.src).types.get(e.port)


def _outer_factors(scope: Scope) -> tuple[list[Dim], list[str]]:
    """Step counts of enclosing loops and round counts of enclosing repeats."""
    factors: list[Dim] = []
    notes: list[str] = []
    s: Scope | None = scope
    while s is not None and s.owner is not None:
        o = s.owner
        if o.kind == "loop":
            steps = o.types[""].dims[0] if o.types else "T"
            factors.append(steps)
            notes.append(f"once per step of loop '{o.id}' ({steps})")
        elif o.kind == "repeat":
            factors.append(int(o.spec.times))
            notes.append(f"in each of {o.spec.times} rounds of repeat '{o.id}'")
        s = s.parent
    return factors[::-1], notes[::-1]


def readout_cost(scope: Scope, readout: Node, scorer: Node | None, weights: Node) -> Cost:
    """Cost of a scorer → softmax/policy → readout site (see the module docstring)."""
    from attngraph.kinds import SCORERS

    wt = weights.types.get("") or weights.types.get("sample")
    dims: tuple[Dim, ...] = wt.dims if wt is not None else ("N",)
    heads = (wt.heads or 1) if wt is not None else 1
    n = dims[-1]
    where: list[tuple[str, int]] = []
    mask = weights.spec.mask if weights.kind == "softmax" else None
    if len(dims) == 2 and mask is not None and mask.window is not None:
        w = mask.window + 1 if mask.causal else 2 * mask.window + 1
        pairs: list[Dim] = [dims[0], "w"]
        where.append(("w", w))
        how = f"{dims[0]} queries × a window of w items"
    elif len(dims) == 2:
        pairs = [dims[0], n]
        how = f"{dims[0]} queries × {n} items"
    elif scorer is not None and scorer.spec.pairs == "aligned":
        pairs = [n]
        how = f"{n} aligned (query i, key i) pairs"
    else:
        pairs = [n]
        how = f"one query × {n} items"
    kt = _type_of(scope, scorer, "key") if scorer is not None else None
    vt = _type_of(scope, readout, "values")
    content = scorer is not None and SCORERS[scorer.spec.fn].content
    dk = int(kt.dims[-1]) * heads if kt is not None and content else 0
    dv = int(vt.dims[-1]) * heads if vt is not None else 0
    d = max(dk, dv, 1)
    where.insert(0, ("d", d))
    outer, notes = _outer_factors(scope)
    reason = f"{how}, d = {d} features each (scores and weighted sum)"
    if mask is not None and mask.adjacency is not None:
        reason += "; dense scores masked by the adjacency"
    if notes:
        reason += "; " + ", ".join(notes)
    return Cost(tuple([*outer, *pairs, "d"]), tuple(where), reason)


def glimpse_cost(scope: Scope, glimpse: Node) -> Cost:
    """Cost of a glimpse: k scales of s×s pixels, whatever the image size."""
    s = glimpse.spec
    it = _type_of(scope, glimpse, "image")
    c = int(it.dims[0]) if it is not None else 1
    outer, notes = _outer_factors(scope)
    factors: list[Dim] = [*outer, "k", c, "s", "s"]
    reason = f"crops k = {s.scales} scale(s) of s×s = {s.size}×{s.size} px × {c} channel(s), " \
        "independent of the image size"
    if notes:
        reason += "; " + ", ".join(notes)
    return Cost(tuple(factors), (("k", int(s.scales)), ("s", int(s.size))), reason)
