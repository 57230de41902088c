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

from attngraph.analysis.scope import Scope, scoring
from attngraph.ir.graph import Dim, Node, TensorType
from attngraph.kinds.base import traits_of
from attngraph.kinds.choices import named
from attngraph.kinds.normalisers import NORMALISERS

__all__ = ["Cost", "fmt_product", "readout_cost", "glimpse_cost", "weights_cost"]

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


def _sym(value: Dim, name: str, where: dict[str, int]) -> Dim:
    """A fixed length as a named symbol bound in ``where`` (``N = 64``); symbols stay."""
    if isinstance(value, str):
        return value
    while name in where and where[name] != value:
        name += "'"
    where[name] = value
    return name


def _outer_factors(scope: Scope, where: dict[str, int]) -> tuple[list[Dim], list[str]]:
    """Step counts of enclosing loops and round counts of enclosing repeats."""
    factors: list[Dim] = []
    notes: list[str] = []
    s: Scope | None = scope
    while s is not None and s.owner is not None:
        o = s.owner
        runs = traits_of(o).body
        if runs == "steps":
            steps = o.types[""].dims[0] if o.types else "T"
            factors.append(_sym(steps, "T", where))
            notes.append(f"once per step of loop '{o.id}' ({steps})")
        elif runs == "each":
            each = o.types[""].dims[0] if o.types else "S"
            factors.append(_sym(each, "S", where))
            notes.append(f"once per element of map '{o.id}' ({each})")
        elif runs == "rounds":
            factors.append(int(o.spec.times))
            notes.append(f"in each of {o.spec.times} rounds of repeat '{o.id}'")
        s = s.parent
    return factors[::-1], notes[::-1]


def readout_cost(scope: Scope, readout: Node, scorers: list[Node], weights: Node) -> Cost:
    """Cost of a scorer → softmax/policy → readout site (see the module docstring)."""
    wt = weights.types.get("") or weights.types.get("sample")
    dims: tuple[Dim, ...] = wt.dims if wt is not None else ("N",)
    heads = (wt.heads or 1) if wt is not None else 1
    where: dict[str, int] = {"d": 1}
    n = _sym(dims[-1], "N", where)
    m = (n if dims[0] == dims[-1] else _sym(dims[0], "M", where)) if len(dims) == 2 else None
    mask = getattr(weights.spec, "mask", None)
    # kernel attention whose weights nothing else reads runs in linear time
    normaliser = named(weights.spec, NORMALISERS)
    kernel = normaliser is not None and normaliser.kernel and not any(
        e.src == weights.id for _, e in scope.graph.outputs) and not any(
        e.src == weights.id for n in scope.graph.nodes if n.id != readout.id for e in n.inputs)
    pairs: list[Dim]
    if kernel:  # linear attention: Σ_j φ(k_j) v_jᵀ, then one read per query
        pairs = [n, "d"]
        how = (f"linear attention: Σ φ(k) vᵀ over {n} items, then a d×d read per query "
               f"(computed in linear time; no {n}×{n} scores)")
    elif len(dims) == 2 and m is not None and mask is not None and mask.window is not None:
        w = mask.window + 1 if mask.causal else 2 * mask.window + 1
        pairs = [m, "w"]
        where["w"] = w
        how = f"{m} queries × a window of w items"
    elif m is not None:
        pairs = [m, n]
        how = f"{m} queries × {n} items"
    elif any(getattr(sc.spec, "pairs", "all") == "aligned" and sc.edge("query")
             for sc in scorers):
        pairs = [n]
        how = f"{n} aligned (query i, key i) pairs"
    else:
        pairs = [n]
        how = f"one query × {n} items"
    kts = [_type_of(scope, sc, "key") for sc in scorers if scoring(sc).content]
    vt = _type_of(scope, readout, "values")
    dk = max((int(kt.dims[-1]) * heads for kt in kts if kt is not None), default=0)
    dv = int(vt.dims[-1]) * heads if vt is not None else 0
    d = max(dk, dv, 1)
    where["d"] = d
    outer, notes = _outer_factors(scope, where)
    reason = how if kernel else f"{how}, d = {d} features each (scores and weighted sum)"
    if mask is not None and mask.adjacency is not None:
        reason += "; dense scores masked by the adjacency"
    if notes:
        reason += "; " + ", ".join(notes)
    return Cost((*outer, *pairs, "d"), tuple(where.items()), reason)


def weights_cost(scope: Scope, weights: Node, over: str, name: str = "N") -> Cost:
    """Cost of weights that no readout reads (a softmax over the features of a vector
    whose weights scale something): one weight per entry of the weights' type; a fixed
    size of the normalised (last) axis is named ``name`` (``k`` for features)."""
    wt = weights.types.get("") or weights.types.get("sample")
    dims: tuple[Dim, ...] = wt.dims if wt is not None else (name,)
    where: dict[str, int] = {}
    factors: list[Dim] = [_sym(d, name if i == len(dims) - 1 else "M", where)
                          for i, d in enumerate(dims)]
    if wt is not None and wt.heads:
        factors.append(wt.heads)
    outer, notes = _outer_factors(scope, where)
    reason = f"one weight per entry, normalised over {over}"
    if notes:
        reason += "; " + ", ".join(notes)
    return Cost((*outer, *factors), tuple(where.items()), reason)


def glimpse_cost(scope: Scope, glimpse: Node) -> Cost:
    """Cost of a glimpse: k scales of s×s pixels, whatever the image size."""
    s = glimpse.spec
    it = _type_of(scope, glimpse, "image")
    c = int(it.dims[0]) if it is not None else 1
    where = {"k": int(s.scales), "s": int(s.size)}
    outer, notes = _outer_factors(scope, where)
    factors: list[Dim] = [*outer, "k", c, "s", "s"]
    reason = f"crops k = {s.scales} scale(s) of s×s = {s.size}×{s.size} px × {c} channel(s), " \
        "independent of the image size"
    if notes:
        reason += "; " + ", ".join(notes)
    return Cost(tuple(factors), tuple(where.items()), reason)
