"""``verify(graph)``: the invariants every later stage relies on.

Ids are unique, every edge names a node of its graph, the graph is acyclic
(a loop's recurrence lives inside its body, so a cycle is always an error),
outputs exist, and blocks do not use themselves. Violations raise
:class:`~attngraph.errors.GraphError` with the cycle's path.
"""

from __future__ import annotations

from attngraph.errors import Diagnostic, GraphError
from attngraph.ir.graph import Graph

__all__ = ["verify"]


def _block_uses(g: Graph) -> set[str]:
    uses = set()
    for n in g.nodes:
        name = n.field("block") if n.kind in ("block", "repeat") else None
        if n.kind == "loop":
            name = n.field("body")
        if name:
            uses.add(name)
    return uses


def verify(graph: Graph) -> Graph:
    """Check the graph's invariants and return it unchanged.

    Raises
    ------
    GraphError
        On a duplicate id, a dangling edge, a cycle (with its path) or a block
        that uses itself.

    Examples
    --------
    >>> from attngraph.ir.graph import Graph, Node, Edge
    >>> g = Graph("g", (Node("a", "norm", None, (Edge("from", "b"),)),
    ...                 Node("b", "norm", None, (Edge("from", "a"),))), ())
    >>> try:
    ...     verify(g)
    ... except GraphError as e:
    ...     print(e.message)
    cycle: a -> b -> a
    """
    import networkx as nx

    diags: list[Diagnostic] = []
    for g in (graph, *graph.blocks.values()):
        seen: set[str] = set()
        for n in g.nodes:
            if n.id in seen:
                diags.append(Diagnostic(n.loc, f"duplicate node id '{n.id}'"))
            seen.add(n.id)
        for n in g.nodes:
            for e in n.inputs:
                if e.src not in seen:
                    diags.append(Diagnostic(e.loc, f"node '{n.id}': '{e.src}' is not a node"))
        for name, e in g.outputs:
            if e.src not in seen:
                diags.append(Diagnostic(e.loc, f"output '{name}': '{e.src}' is not a node"))
        if diags:
            continue
        try:
            cyc = nx.find_cycle(nx.DiGraph(g.nx()))
        except nx.NetworkXNoCycle:
            continue
        path = [u for u, _ in cyc] + [cyc[0][0]]
        first = g.node(cyc[0][1])
        edge = next((e for e in first.inputs if e.src == cyc[0][0]), None)
        diags.append(Diagnostic(
            edge.loc if edge else first.loc, "cycle: " + " -> ".join(path),
            "attention graphs are acyclic; state that feeds back belongs in a loop's "
            "carry (kind: loop)",
        ))
    uses = nx.DiGraph()
    for name, b in graph.blocks.items():
        uses.add_node(name)
        for u in _block_uses(b):
            uses.add_edge(name, u)
    try:
        cyc = nx.find_cycle(uses)
        path = [u for u, _ in cyc] + [cyc[0][0]]
        loc = graph.blocks[cyc[0][0]].nodes[0].loc if graph.blocks[cyc[0][0]].nodes else None
        diags.append(Diagnostic(
            loc or graph.nodes[0].loc, "block uses itself: " + " -> ".join(path),
            "a block cannot contain itself; use kind: repeat to stack a block",
        ))
    except nx.NetworkXNoCycle:
        pass
    if diags:
        raise GraphError(diags[0].message, diagnostics=diags)
    return graph
