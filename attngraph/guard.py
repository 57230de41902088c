"""The resource guard: refuse a spec whose forward would exhaust the machine.

:func:`check_resources` measures a graph as it will run
(:func:`attngraph.analysis.sizes.measure` after :func:`attngraph.passes.as_run`, the
optimising passes that change what a forward holds: kernel attention in its
linear-time form) and refuses, with one located diagnostic per limit passed, a spec
over any of the limits below: parameters, a dimension, a learned table shorter than
the length, a fixed position a formula takes past the length, a loop's steps, the
largest tensor, all the tensors one forward keeps, multiply-adds, node runs and node
modules; within them, a repeat whose rounds would grow values past the float32 range
(:func:`attngraph.analysis.magnitude.growth`). The front end
(:func:`attngraph.frontend.load_spec`) runs it on every spec; training runs it
again at the batch and length the run will use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from attngraph.analysis.magnitude import FLOAT32_MAX, growth
from attngraph.analysis.sizes import ASSUMED_BATCH, ASSUMED_LENGTH, Sizes, measure
from attngraph.errors import Diagnostic, SourceLoc, SpecError
from attngraph.ir.graph import Graph, Node
from attngraph.passes import as_run
from attngraph.source import Document

__all__ = [
    "check_resources", "MAX_PARAMS", "MAX_DIM", "MAX_TENSOR", "MAX_HELD", "MAX_MACS",
    "MAX_RUNS", "MAX_MODULES", "MAX_STEPS", "ASSUMED_BATCH", "ASSUMED_LENGTH",
]

#: Parameters of the whole spec (400 MB of float32; about a second to initialise).
MAX_PARAMS = 100_000_000
#: Largest single dimension.
MAX_DIM = 1_000_000
#: Elements of the largest tensor one node makes, batch included (2 GB of float32).
MAX_TENSOR = 500_000_000
#: Elements of all the tensors one forward makes, which training keeps for the
#: backward pass (8 GB of float32).
MAX_HELD = 2_000_000_000
#: Multiply-adds of one forward (about 15 s on one CPU core at 70 GMAC/s; well under
#: a second on a GPU).
MAX_MACS = 1_000_000_000_000
#: Node runs of one forward, loop steps and repeat rounds multiplying (each run is a
#: Python call of at least ~50 µs with its backward).
MAX_RUNS = 50_000
#: Node modules compiling builds (a repeat's rounds each have their own).
MAX_MODULES = 20_000
#: Steps of one loop.
MAX_STEPS = 10_000

_LARGE = "or pass --allow-large (allow_large=True) if you mean it"

#: Where a figure points: the node (and field) that makes it, else the spec.
Where = Callable[[Node[Any] | None, str | None], SourceLoc]


def _at(sizes: Sizes) -> str:
    """``at batch 32, N = 256``: the sizes a figure assumes."""
    lens = ", ".join(f"{k} = {v:,}" for k, v in sorted(sizes.lengths.items()))
    return f"at batch {sizes.batch:,}" + (f", {lens}" if lens else "")


def _gb(elements: int) -> str:
    return f"{elements * 4 / 1e9:,.1f} GB of float32"


def check_resources(graph: Graph, doc: Document | None = None, *, batch: int | None = None,
                    length: int | Mapping[str, int] | None = None,
                    allow_large: bool = False) -> Sizes:
    """Refuse a graph whose forward would exhaust the machine; return its figures.

    The figures (:func:`attngraph.analysis.sizes.measure`, of the graph as it will
    run: kernel attention in its linear-time form) assume ``batch``
    examples (default :data:`ASSUMED_BATCH`) and, for every symbolic length, the
    size in ``length`` (one for all, or one per name; default
    :data:`ASSUMED_LENGTH`, or a learned table's ``max_len`` if less).
    ``allow_large`` lifts the parameter limit only (a model that exists, such as a
    run of ``attngraph import``); the limits on tensors and work still hold.

    Raises
    ------
    SpecError
        One diagnostic per limit passed, each with the figure and the limit,
        located at the node that makes it (or the spec).
    """
    root = doc.loc(()) if doc is not None else SourceLoc(graph.file, 1, 1)

    def where(n: Node[Any] | None, field: str | None = None) -> SourceLoc:
        if n is None:
            return root
        loc = n.where(field) if field else n.loc
        return loc if loc.line > 0 else root

    # measured as it will run: a kernel attention chain as its linear-time form
    sizes = measure(as_run(graph), batch=batch, length=length)
    diags = [*_size_limits(graph, sizes, where, allow_large, length),
             *_work_limits(sizes, where)]
    if not diags:  # within the limits, so the magnitude walk is bounded by them too
        diags.extend(_growth(graph, sizes, where))
    if diags:
        raise SpecError(diags[0].message, diagnostics=diags)
    return sizes


def _size_limits(graph: Graph, sizes: Sizes, where: Where, allow_large: bool,
                 length: int | Mapping[str, int] | None) -> list[Diagnostic]:
    """The parameters, every dimension, and the learned tables against the length."""
    diags: list[Diagnostic] = []
    p = sizes.params
    if p.value > MAX_PARAMS and not allow_large:
        most = f" (node '{p.node.id}' has {p.node.params:,})" if p.node is not None else ""
        diags.append(Diagnostic(
            where(p.node, None), f"spec would have {p.value:,} parameters, over the limit of "
            f"{MAX_PARAMS:,}{most}", f"shrink dims, {_LARGE}"))
    for _path, n in graph.walk():
        for typ in n.types.values():
            big = [d for d in typ.dims if isinstance(d, int) and d > MAX_DIM]
            if big:
                diags.append(Diagnostic(
                    where(n, None), f"node '{n.id}' has a dimension of {big[0]:,}, over the "
                    f"limit of {MAX_DIM:,}", f"shrink the dims, {_LARGE}"))
                break
    given = length if isinstance(length, Mapping) else {}
    for b in sizes.bounds:
        n_len = sizes.lengths.get(b.symbol, 0)
        if (isinstance(length, int) or b.symbol in given) and n_len > b.most:
            diags.append(Diagnostic(
                where(b.node, b.field),
                f"node '{b.node.id}': its learned table covers {b.field} {b.most:,} positions, "
                f"but the length {b.symbol} is {n_len:,} here",
                f"raise {b.field} to at least {n_len:,}, or use a length of at most "
                f"{b.most:,}"))
    diags += _taken_past(graph, sizes, where, length)
    return diags


def _taken_past(graph: Graph, sizes: Sizes, where: Where,
                length: int | Mapping[str, int] | None) -> list[Diagnostic]:
    """A formula's ``take`` along a length at a fixed position past its end at the
    length given (``take(h, 9, items)`` at N = 5): the forward would fail there."""
    if length is None:  # the batch decides: the forward names the node
        return []
    from attngraph.kinds.algebra import program_of
    from attngraph.kinds.context import NodeCtx

    given = length if isinstance(length, Mapping) else {}
    diags: list[Diagnostic] = []
    for g, n in _with_graphs(graph):
        if n.kind != "expr" or "take" not in n.spec.formula:
            continue
        prog = program_of(NodeCtx(n, g))
        for ins in prog.instrs:
            sym = ins[7] if ins[0] == "take" else ""
            n_len = sizes.lengths.get(sym) if sym else None
            if n_len is None or not (isinstance(length, int) or sym in given):
                continue
            at = prog.instrs[ins[3]]
            if at[0] == "num" and at[1] >= n_len:
                diags.append(Diagnostic(
                    where(n, "formula"),
                    f"node '{n.id}': its take reads position {at[1]:g} along the length "
                    f"{sym}, but {sym} is {n_len:,} here (positions 0 to {n_len - 1:,})",
                    f"use a length of more than {at[1]:g}, or a position within it"))
                break
    return diags


def _with_graphs(graph: Graph) -> list[tuple[Graph, Node[Any]]]:
    """Every node with the graph that holds it (a body's nodes with their body)."""
    out: list[tuple[Graph, Node[Any]]] = []
    for n in graph.nodes:
        out.append((graph, n))
        if n.body is not None:
            out += _with_graphs(n.body)
    return out


def _work_limits(sizes: Sizes, where: Where) -> list[Diagnostic]:
    """A loop's steps, the tensors one forward makes and keeps, and its work."""
    s = sizes.steps
    too_long = s.value > MAX_STEPS and s.node is not None
    diags: list[Diagnostic] = []
    if too_long and s.node is not None:
        sym = s.node.types[""].dims[0]
        named = f" ({sym} = {s.value:,})" if isinstance(sym, str) else ""
        diags.append(Diagnostic(
            where(s.node, "steps"), f"node '{s.node.id}': a loop of {s.value:,} steps{named}, "
            f"over the limit of {MAX_STEPS:,}",
            f"each step runs the body once, node by node: use fewer steps, {_LARGE}"))
    t, h = sizes.tensor, sizes.held
    if t.value > MAX_TENSOR and t.node is not None:
        what = f"input '{t.node.id}' is" if t.node.is_input else f"node '{t.node.id}' would make"
        diags.append(Diagnostic(
            where(t.node, None), f"{what} a tensor of {t.value:,} elements "
            f"({_gb(t.value)}) {_at(sizes)}, over the limit of {MAX_TENSOR:,}",
            f"shrink the sizes it multiplies (hidden, heads, lengths), {_LARGE}"))
    if h.value > MAX_HELD and t.value <= MAX_TENSOR:  # else the largest one says it
        diags.append(Diagnostic(
            where(h.node, None), f"one forward {_at(sizes)} would make {h.value:,} tensor "
            f"elements ({_gb(h.value)}, kept for the backward pass), over the limit of "
            f"{MAX_HELD:,}", f"shrink sizes, steps or rounds, {_LARGE}"))
    return diags + _run_limits(sizes, where, too_long)


def _run_limits(sizes: Sizes, where: Where, too_long: bool) -> list[Diagnostic]:
    """Multiply-adds, node runs (unless a loop's steps said it) and node modules."""
    diags: list[Diagnostic] = []
    m = sizes.macs
    if m.value > MAX_MACS:
        most = f" (node '{m.node.id}' costs the most)" if m.node is not None else ""
        diags.append(Diagnostic(
            where(m.node, None), f"one forward {_at(sizes)} would take about {m.value:,} "
            f"multiply-adds, over the limit of {MAX_MACS:,}{most}",
            f"shrink sizes, steps or rounds, {_LARGE}"))
    r = sizes.runs
    if r.value > MAX_RUNS and not too_long:  # else the loop's steps say it
        diags.append(Diagnostic(
            where(r.node, None), f"one forward {_at(sizes)} would run {r.value:,} nodes one "
            f"after another (loop steps and repeat rounds multiply), over the limit of "
            f"{MAX_RUNS:,}",
            f"use fewer steps or rounds, or fewer nodes in their blocks, {_LARGE}"))
    mod = sizes.modules
    if mod.value > MAX_MODULES:
        diags.append(Diagnostic(
            where(mod.node, None), f"compiling would build {mod.value:,} node modules (each "
            f"round of a repeat has its own), over the limit of {MAX_MODULES:,}",
            f"use fewer rounds, or share one set of parameters (share: true), {_LARGE}"))
    return diags


def _growth(graph: Graph, sizes: Sizes, where: Where) -> list[Diagnostic]:
    """The numerics guard: a repeat whose rounds grow values past the float32 range
    (:func:`attngraph.analysis.magnitude.growth`), at its ``times``."""
    g = growth(graph, sizes.lengths, ASSUMED_LENGTH)
    if g is None:
        return []
    s = g.node.spec
    safe = max(1, int(math.log(FLOAT32_MAX / g.start) / math.log(g.factor)) - 1) \
        if g.factor > 1 and g.start > 0 else None
    rounds = f" (at most about {safe:,} rounds stay in range)" if safe else ""
    return [Diagnostic(
        where(g.node, "times"),
        f"node '{g.node.id}': {s.times} rounds of block '{s.block}' would grow values to "
        f"about {g.value:.1e} by round {g.round:,} (×{g.factor:.3g} in the first round), past "
        f"the float32 range ({FLOAT32_MAX:.1e}): the outputs would be inf or NaN",
        f"keep each round's values in scale: a norm in the block (kind: norm), a gain below 1 "
        f"on the sum, or fewer rounds{rounds}; {_LARGE}")]
