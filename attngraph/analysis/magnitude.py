"""The numerics guard: how large values can grow, compounded through repeats.

Each node's output gets a magnitude, an estimate of the largest value it holds
given its inputs' (inputs and parameters at unit scale): a kind says how with its
``magnitude`` rule (:class:`~attngraph.kinds.base.MagnitudeRule`): ``add`` sums its
inputs', ``mul`` multiplies them, ``gain`` scales by its ``init``, a ``pool`` sum
by the items it sums, ``norm`` brings it back to 1; a kind without a rule passes the
largest input's on (a weights kind, softmax or policy, gives 1). A block runs its
body once; a ``repeat`` runs it round after round, each round's output the next's
input, which is where growth compounds: ``add [u, u]`` doubles each round, so 130
rounds reach 2^130 ≈ 1.4e39, past float32's largest 3.4e38, and the outputs are
±inf. :func:`growth` finds the first repeat whose rounds pass the float32 range;
the resource guard (:func:`attngraph.guard.check_resources`) refuses it at the
repeat, with the figure.

The walk stops a repeat's rounds at a fixed point, or as soon as the range is
passed; it runs only on a graph within the guard's node-run limit, so it never
does more work than that limit.

Examples
--------
>>> from attngraph.frontend import loads_spec
>>> g = loads_spec('''attngraph: 1
... name: t
... inputs: {src: {type: vectors, dim: 4}}
... blocks:
...   dbl: {inputs: [u], nodes: {y: {kind: add, from: [u, u]}}, output: y}
... nodes:
...   x: {kind: items, from: src}
...   r: {kind: repeat, block: dbl, times: 10, from: x}
... outputs: {r: r}
... ''')
>>> growth(g) is None
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from attngraph.errors import SpecError
from attngraph.ir.graph import Dim, Graph, Node
from attngraph.kinds import KINDS
from attngraph.kinds.base import MagnitudeCtx, traits_of
from attngraph.kinds.hooks import call_hook

__all__ = ["FLOAT32_MAX", "Growth", "growth", "magnitudes"]

#: The largest finite float32 (and bfloat16) value.
FLOAT32_MAX = 3.4028234663852886e38


@dataclass(frozen=True)
class Growth:
    """A repeat whose rounds pass the float32 range: at ``round`` of its ``times``,
    values reach about ``value``, starting from ``start`` (``factor`` per round in
    its first round)."""

    node: Node[Any]
    round: int
    value: float
    start: float
    factor: float


class _Passed(Exception):  # noqa: N818 - control flow, never leaves this module
    """Raised inside the walk at the first repeat that passes the range."""

    def __init__(self, found: Growth) -> None:
        super().__init__(found.node.id)
        self.found = found


def _finite(value: float) -> float:
    return math.inf if math.isnan(value) or value < 0 else value


def _node(n: Node[Any], ins: list[tuple[str, float]], graph: Graph,
          size: Callable[[Dim], int]) -> dict[str, float]:
    """The magnitude of each output port of ``n``, from its inputs'."""
    mags = tuple(m for _, m in ins)
    if n.body is not None:
        return _structure(n, mags, size)
    kind = KINDS.get(n.kind)
    rule = kind.magnitude if kind is not None else None
    if rule is None:
        value = 1.0 if kind is not None and kind.role == "weights" else max(mags, default=1.0)
    else:
        types = tuple(graph.node(e.src).types.get(e.port) for e in n.inputs)
        ctx = MagnitudeCtx(n, mags, dict(ins), tuple(t for t in types if t is not None), size)
        value = float(call_hook(rule, ctx, node=n, error=SpecError,
                                what=f"the magnitude rule of kind '{n.kind}'",
                                expect=lambda v: None if isinstance(v, (int, float))
                                and not isinstance(v, bool) else "a number"))
    value = _finite(value)
    return dict.fromkeys(n.types, value) or {"": value}


def _structure(n: Node[Any], mags: tuple[float, ...],
               size: Callable[[Dim], int]) -> dict[str, float]:
    """A block, map or loop runs its body once (its inputs at the largest magnitude
    bound to them); a repeat runs it round after round."""
    body = n.body
    assert body is not None  # callers check
    start = max(mags, default=1.0)
    outs = _body(body, start, size)
    if traits_of(n).body == "rounds":
        first = next(iter(outs.values()), start)
        value, prev = first, start
        for k in range(1, int(n.spec.times)):
            if value > FLOAT32_MAX:
                raise _Passed(Growth(n, k, value, start, first / start if start else math.inf))
            if value <= prev:  # a fixed point, or shrinking: the rounds stay in range
                break
            prev, value = value, max(_body(body, value, size).values(), default=value)
        if value > FLOAT32_MAX:
            raise _Passed(Growth(n, int(n.spec.times), value, start,
                                 first / start if start else math.inf))
        return dict.fromkeys(n.types, value)
    top = max(outs.values(), default=start)
    return {p: outs.get(p, top) for p in n.types} | {"": outs.get("", top)}


def _body(body: Graph, start: float, size: Callable[[Dim], int]) -> dict[str, float]:
    """The magnitude of each output of a body whose inputs are at ``start``."""
    mags = magnitudes(body, size, start)
    named = {name: mags.get((e.src, e.port), start) for name, e in body.outputs}
    if "" not in named and named:
        named[""] = next(iter(named.values()))
    return named


def magnitudes(graph: Graph, size: Callable[[Dim], int],
               start: float = 1.0) -> dict[tuple[str, str], float]:
    """The magnitude of every ``(node, port)`` of ``graph`` whose inputs are at ``start``.

    Raises
    ------
    _Passed
        (inside this module) at the first repeat whose rounds pass the float32 range.
    """
    out: dict[tuple[str, str], float] = {}
    for n in graph.order():
        if n.is_input:
            for p in list(n.types) or [""]:
                out[(n.id, p)] = start
            continue
        ins = [(str(e.role), out.get((e.src, e.port), out.get((e.src, ""), start)))
               for e in n.inputs]
        for p, v in _node(n, ins, graph, size).items():
            out[(n.id, p)] = v
    return out


def growth(graph: Graph, length: Mapping[str, int] | None = None,
           default: int = 256) -> Growth | None:
    """The first repeat whose rounds grow values past the float32 range, or None.

    Parameters
    ----------
    graph : Graph
        An inferred graph.
    length : mapping, optional
        The size of each symbolic length (a ``pool`` sum over N grows by N).
    default : int, optional
        The size of a length not in ``length``.
    """
    lengths = dict(length or {})

    def size(d: Dim) -> int:
        return d if isinstance(d, int) else lengths.get(d, default)

    try:
        magnitudes(graph, size)
    except _Passed as passed:
        return passed.found
    return None
