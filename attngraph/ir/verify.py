"""``verify(graph)``: the invariants every later stage relies on.

Ids are unique, every edge names a node of its graph, the graph is acyclic
(a loop's recurrence lives inside its body, so a cycle is always an error),
outputs exist, and blocks do not use themselves. Violations raise
:class:`~attngraph.errors.GraphError` with the cycle's path.
"""

from __future__ import annotations

from typing import Any

from attngraph.errors import Diagnostic, GraphError, did_you_mean
from attngraph.ir.graph import Graph, Node
from attngraph.spec.fields import fields_of

__all__ = ["verify"]


def _blocks_named(n: Node[Any]) -> set[str]:
    """The blocks a node uses (its fields that name blocks)."""
    if n.spec is None:
        return set()
    return {str(n.field(k)) for k in fields_of(type(n.spec)).blocks if n.field(k)}


def _block_uses(g: Graph) -> set[str]:
    return {name for n in g.nodes for name in _blocks_named(n)}


def _cycle(deps: dict[str, list[str]]) -> list[str] | None:
    """A cycle as a path ``[a, b, ..., a]`` (each step: b reads a), or None.

    ``graphlib`` finds it without importing networkx, which would cost more than
    the rest of ``attngraph validate``'s start-up.
    """
    import graphlib

    ts: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for node, srcs in deps.items():
        ts.add(node, *(s for s in srcs if s in deps))
    try:
        ts.prepare()
    except graphlib.CycleError as exc:
        # graphlib lists the cycle in data-flow order, first node repeated at the end
        return list(exc.args[1])
    return None


def _reference_errors(g: Graph) -> list[Diagnostic]:
    """Duplicate ids, and edges or outputs that name no node of ``g``."""
    diags: list[Diagnostic] = []
    seen: set[str] = set()
    for n in g.nodes:
        if n.id in seen:
            diags.append(Diagnostic(n.loc, f"duplicate node id '{n.id}'",
                                    "each node, input and block input needs its own name; "
                                    "rename one"))
        seen.add(n.id)
    for n in g.nodes:
        for e in n.inputs:
            if e.src not in seen:
                diags.append(Diagnostic(e.loc, f"node '{n.id}': '{e.src}' is not a node",
                                        did_you_mean(e.src, seen)))
    for name, e in g.outputs:
        if e.src not in seen:
            diags.append(Diagnostic(e.loc, f"output '{name}': '{e.src}' is not a node",
                                    did_you_mean(e.src, seen)))
    return diags


def _cycle_error(g: Graph) -> Diagnostic | None:
    """The data-flow cycle of ``g``, located at its first edge, or None."""
    path = _cycle({n.id: [e.src for e in n.inputs] for n in g.nodes})
    if path is None:
        return None
    first = g.node(path[1])
    edge = next((e for e in first.inputs if e.src == path[0]), None)
    return Diagnostic(
        edge.loc if edge else first.loc, "cycle: " + " -> ".join(path),
        "attention graphs are acyclic; state that feeds back belongs in a loop's "
        "carry (kind: loop)",
    )


def _block_cycle_error(graph: Graph) -> Diagnostic | None:
    """A block that uses itself, directly or through others, or None."""
    bpath = _cycle({name: sorted(_block_uses(b)) for name, b in graph.blocks.items()})
    if bpath is None:
        return None
    b = graph.blocks[bpath[0]]
    user = next((n for n in b.nodes if bpath[1] in _blocks_named(n)), None)
    return Diagnostic(
        user.loc if user is not None else graph.nodes[0].loc,
        "block uses itself: " + " -> ".join(bpath),
        "a block cannot contain itself; use kind: repeat to stack a block",
    )


def verify(graph: Graph) -> Graph:
    """Check the graph's invariants and return it unchanged.

    Raises
    ------
    GraphError
        On a duplicate id, a dangling edge, a cycle (with its path) or a block
        that uses itself.

    Examples
    --------
    >>> from attngraph.ir.graph import Edge, Graph, Node, Role
    >>> g = Graph("g", (Node("a", None, (Edge(Role("from"), "b"),)),
    ...                 Node("b", None, (Edge(Role("from"), "a"),))), ())
    >>> try:
    ...     verify(g)
    ... except GraphError as e:
    ...     print(e.message)
    cycle: a -> b -> a
    """
    diags: list[Diagnostic] = []
    for g in (graph, *graph.blocks.values()):
        diags += _reference_errors(g)
        if diags:
            continue
        cycle = _cycle_error(g)
        if cycle is not None:
            diags.append(cycle)
    block_cycle = _block_cycle_error(graph)
    if block_cycle is not None:
        diags.append(block_cycle)
    if diags:
        raise GraphError(diags[0].message, diagnostics=diags)
    return graph
