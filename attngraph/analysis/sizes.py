"""``measure(graph) -> Sizes``: what one forward holds and costs at given sizes.

The resource guard (:func:`attngraph.guard.check_resources`) reads these
figures before any tensor exists. Every symbolic length (``N``, ``T``) takes the
size a command says it will use, else :data:`ASSUMED_LENGTH` (or less, when a
learned table such as a ``position`` with ``max_len`` says the length is at most
that); the batch is :data:`ASSUMED_BATCH` unless given. Each node's kind says what
one run costs (:class:`~attngraph.kinds.base.Work`); a node in a loop body runs
once per step and one in a repeat's block once per round, so their figures
multiply.

Examples
--------
>>> from attngraph.frontend import loads_spec
>>> g = loads_spec('''
... attngraph: 1
... name: pairs
... inputs: {x: {type: vectors, dim: 8}}
... nodes:
...   s: {kind: scorer, fn: additive, query: x, key: x, hidden: 16}
... outputs: {s: s}
... ''')
>>> sz = measure(g, batch=2, length=10)
>>> sz.tensor.value, sz.tensor.node.id   # the (B, M, N, hidden) sum: 2·10·10·16
(3200, 's')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attngraph.errors import SpecError
from attngraph.ir.graph import Graph, Node, TensorType
from attngraph.kinds import KINDS
from attngraph.kinds.base import Bound, Work, WorkCtx, dense_work, traits_of
from attngraph.kinds.hooks import call_hook, count

__all__ = ["ASSUMED_BATCH", "ASSUMED_LENGTH", "Figure", "Sizes", "measure", "symbols"]

#: The batch the guard assumes when a command does not say (training's default).
ASSUMED_BATCH = 32
#: The size the guard assumes for a symbolic length when a command does not say.
ASSUMED_LENGTH = 256


@dataclass(frozen=True)
class Figure:
    """One figure and the node it arises at (where a refusal points), if any."""

    value: int = 0
    node: Node[Any] | None = None


@dataclass(frozen=True)
class Sizes:
    """What one forward holds and costs, batch included.

    ``params``: parameters (``node`` has the most); ``tensor``: elements of the
    largest tensor one node makes; ``held``: elements of every tensor a forward
    makes (what training keeps for the backward pass; ``node`` is the top-level
    node that makes most of them); ``macs``: multiply-adds (``node`` costs the
    most); ``runs``: node runs of one forward (loop steps and repeat rounds
    multiply; ``node`` is the top-level node whose runs are most);
    ``modules``: node modules compiling builds (a repeat's rounds each have
    theirs unless shared); ``steps``: the most steps of one loop run.
    """

    batch: int
    lengths: Mapping[str, int]
    params: Figure
    tensor: Figure
    held: Figure
    macs: Figure
    runs: Figure
    modules: Figure
    steps: Figure
    bounds: tuple[Bound, ...] = ()


def symbols(graph: Graph) -> set[str]:
    """Every symbolic length in the graph's types (bodies included)."""
    return {d for _, n in graph.walk() for t in n.types.values() for d in t.dims
            if isinstance(d, str)}


@dataclass
class _Acc:
    """Running figures of a walk."""

    batch: int
    length: Mapping[str, int]
    tensor: Figure = field(default_factory=Figure)
    held: dict[str, int] = field(default_factory=dict)
    macs: int = 0
    heaviest: Figure = field(default_factory=Figure)
    runs: dict[str, int] = field(default_factory=dict)
    modules: dict[str, int] = field(default_factory=dict)
    steps: Figure = field(default_factory=Figure)
    bounds: list[Bound] = field(default_factory=list)
    top: dict[str, Node[Any]] = field(default_factory=dict)

    def size(self, sym: str) -> int:
        return self.length.get(sym, ASSUMED_LENGTH)

    def tensor_of(self, elements: int, node: Node[Any], runs: int, owner: Node[Any]) -> None:
        e = elements * self.batch
        if e > self.tensor.value:
            self.tensor = Figure(e, node)
        self.held[owner.id] = self.held.get(owner.id, 0) + e * runs


def _ports(node: Node[Any]) -> list[TensorType]:
    """The node's output tensors: the default port is often the very type of a named
    port (a policy's ``sample``, an rnn's ``out``), the same tensor."""
    seen: dict[int, TensorType] = {}
    for t in node.types.values():
        seen.setdefault(id(t), t)
    return list(seen.values())


def _walk(graph: Graph, acc: _Acc, runs: int, modules: int, top: Node[Any] | None,
          body: bool) -> None:
    for n in graph.nodes:
        if n.is_input and body:
            continue  # a block's input is its user's value
        ctx = WorkCtx(n, graph, acc.size)
        kind = KINDS.get(n.kind)
        rule = (kind.work if kind is not None else None) or dense_work
        work = call_hook(rule, ctx, node=n, what=f"the work rule of kind '{n.kind}'",
                         error=SpecError, expect=_work) if n.types else Work()
        acc.bounds.extend(ctx.bounds)
        owner = top if top is not None else n
        acc.top.setdefault(owner.id, owner)
        for t in _ports(n):
            acc.tensor_of(ctx.elements(t), n, runs, owner)
        if work.inner:
            acc.tensor_of(work.inner, n, runs, owner)
        if work.kept is not None and work.kept > work.inner:
            acc.held[owner.id] += (work.kept - work.inner) * acc.batch * runs
        macs = work.macs * acc.batch * runs
        acc.macs += macs
        if macs > acc.heaviest.value:
            acc.heaviest = Figure(macs, n)
        acc.runs[owner.id] = acc.runs.get(owner.id, 0) + runs
        if not n.is_input:
            acc.modules[owner.id] = acc.modules.get(owner.id, 0) + modules
        if n.body is None:
            continue
        inner_runs, inner_modules = runs, modules
        body_run = traits_of(n).body
        if body_run == "steps":
            steps = ctx.n(n.types[""].dims[0])
            if steps > acc.steps.value:
                acc.steps = Figure(steps, n)
            inner_runs *= steps
        elif body_run == "rounds":
            times = int(n.spec.times)
            inner_runs *= times
            inner_modules *= 1 if n.spec.share else times
        _walk(n.body, acc, inner_runs, inner_modules, owner, True)


def _work(value: Any) -> str | None:
    """What a work rule returns: a Work of whole numbers >= 0."""
    ok = isinstance(value, Work) and all(
        count(v) is None for v in (value.macs, value.inner, value.kept) if v is not None)
    return None if ok else "a Work(macs, inner, kept) of whole numbers >= 0"


def _most(table: dict[str, int], acc: _Acc) -> Figure:
    if not table:
        return Figure()
    nid = max(table, key=table.__getitem__)
    return Figure(sum(table.values()), acc.top[nid])


def _measure(graph: Graph, batch: int, lengths: Mapping[str, int]) -> Sizes:
    acc = _Acc(batch, lengths)
    _walk(graph, acc, 1, 1, None, False)
    by_node = max(graph.nodes, key=lambda n: n.params, default=None)
    return Sizes(
        batch=batch, lengths=dict(lengths),
        params=Figure(graph.params, by_node),
        tensor=acc.tensor, held=_most(acc.held, acc),
        macs=Figure(acc.macs, acc.heaviest.node), runs=_most(acc.runs, acc),
        modules=_most(acc.modules, acc), steps=acc.steps, bounds=tuple(acc.bounds),
    )


def measure(graph: Graph, *, batch: int | None = None,
            length: int | Mapping[str, int] | None = None) -> Sizes:
    """The figures of one forward of ``graph`` (after shape inference).

    Parameters
    ----------
    graph : Graph
        An inferred graph.
    batch : int, optional
        Examples per batch (default :data:`ASSUMED_BATCH`).
    length : int or mapping, optional
        The size of every symbolic length, or of each by name; a length not given
        is :data:`ASSUMED_LENGTH`, or the most a learned table allows if that is less.

    Returns
    -------
    Sizes
        The figures, and the lengths they assume.
    """
    given: dict[str, int] = {}
    syms = symbols(graph)
    if isinstance(length, int):
        given = dict.fromkeys(syms, length)
    elif length is not None:
        given = {k: int(v) for k, v in length.items()}
    assumed = {s: given.get(s, ASSUMED_LENGTH) for s in syms}
    first = _measure(graph, batch or ASSUMED_BATCH, assumed)
    lowered = dict(assumed)
    for b in first.bounds:
        if b.symbol not in given and b.symbol in lowered:
            lowered[b.symbol] = min(lowered[b.symbol], b.most)
    if lowered == assumed:
        return first
    return _measure(graph, batch or ASSUMED_BATCH, lowered)
