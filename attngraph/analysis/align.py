"""Align the nodes of two graphs by role: networkx graph edit paths, bipartite fallback.

Nodes of both graphs (body nodes included, as ``owner/id``) carry their kind,
their *role* (the kind for attention kinds; ``query``/``key``/``value`` source
for the nodes an attention site reads; else the kind) and their fields.
Substituting a node costs 0 for the same kind and fields, 0.25 for the same kind
with other fields, 0.75 for another kind in the same role, each 0.5 more between
a block's body and the graph around it (another depth), and 2 (a deletion plus an
insertion) otherwise; inserting or deleting a node costs 1, an edge 0.5.
:func:`networkx.optimize_edit_paths` searches within a time budget; graphs too
large for it, or a search that finds nothing in time, fall back to the
bipartite approximation of Riesen and Bunke: one linear assignment over node
costs plus the cost of matching each node's neighbourhood (edge roles and the
kinds at their other ends).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from attngraph.analysis.axes import Site
from attngraph.ir.graph import Graph, Node
from attngraph.ir.printer import without_refs
from attngraph.spec.fields import fields_of

__all__ = ["Alignment", "align", "node_fields", "MAX_EXACT_NODES", "TIME_BUDGET_S"]

#: Above this many nodes in either graph, only the bipartite approximation runs.
MAX_EXACT_NODES = 10
#: Seconds the edit-path search may take before its best path so far is used.
TIME_BUDGET_S = 0.2

def node_fields(n: Node) -> dict[str, Any]:
    """A node's own settings (no references, labels or notes) as plain values."""
    if n.spec is None:
        return {}
    table = fields_of(type(n.spec))
    out: dict[str, Any] = {}
    for name, attr in table.attrs.items():
        if name in ("kind", "label", "note") or name in table.refs:
            continue
        v = getattr(n.spec, attr)
        out[name] = without_refs(v) if name in table.nested else v
    learned = getattr(n.spec, "query", None)
    if learned is not None and hasattr(learned, "learned"):
        out["query"] = {"learned": learned.learned}
    return out


@dataclass(frozen=True)
class Alignment:
    """Matched node pairs (qualified ids), the unmatched of each side, and how."""

    pairs: tuple[tuple[str, str], ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    method: str
    cost: float


def _roles(sites: list[Site]) -> dict[str, str]:
    roles: dict[str, str] = {}
    for s in sites:
        for what, os in (("query", s.query), ("key", s.keys), ("value", s.values)):
            for o in os:
                roles.setdefault(o.qid, f"{what} source")
    return roles


def _nx(graph: Graph, sites: list[Site]) -> Any:
    import networkx as nx

    roles = _roles(sites)
    g = nx.DiGraph()
    order: list[str] = []
    for path, n in graph.walk():
        q = "/".join((*path, n.id))
        role = roles.get(q, n.kind)
        g.add_node(q, kind=n.kind, role=role, fields=node_fields(n), depth=len(path))
        order.append(q)
    for path, n in graph.walk():
        q = "/".join((*path, n.id))
        for e in n.inputs:
            src = "/".join((*path, e.src))
            if src in g:
                prev = g.edges[src, q]["role"] + "," if g.has_edge(src, q) else ""
                g.add_edge(src, q, role=prev + e.role.field)
    g.graph["order"] = order
    return g


def _subst(a: dict[str, Any], b: dict[str, Any]) -> float:
    # a node of a block's body and one outside it (another depth) are rarely the same
    # part: a model's output layer is not a layer block's projection
    depth = 0.0 if a["depth"] == b["depth"] else 0.5
    if a["kind"] == b["kind"]:
        return (0.0 if a["fields"] == b["fields"] else 0.25) + depth
    if a["role"] == b["role"] or {a["kind"], b["kind"]} <= {"softmax", "policy"}:
        return 0.75 + depth
    return 2.0


def _bipartite(ga: Any, gb: Any) -> list[tuple[str, str]]:
    """Riesen-Bunke assignment: node costs plus the cost of matching neighbourhoods."""
    from collections import Counter

    import numpy as np
    from scipy.optimize import linear_sum_assignment

    def hood(g: Any, q: str) -> Counter[str]:
        c: Counter[str] = Counter()
        for u, _, d in g.in_edges(q, data=True):
            c["in:" + d["role"] + ":" + g.nodes[u]["kind"]] += 1
        for _, v, d in g.out_edges(q, data=True):
            c["out:" + d["role"] + ":" + g.nodes[v]["kind"]] += 1
        return c

    oa, ob = ga.graph["order"], gb.graph["order"]
    n, m = len(oa), len(ob)
    ha = [hood(ga, q) for q in oa]
    hb = [hood(gb, q) for q in ob]
    big = 1e6
    cost = np.full((n + m, n + m), 0.0)
    cost[:n, m:] = big
    cost[n:, :m] = big
    for i, x in enumerate(oa):
        cost[i, m + i] = 1.0 + 0.5 * sum(ha[i].values())
        for j, y in enumerate(ob):
            edges = sum(((ha[i] - hb[j]) + (hb[j] - ha[i])).values())
            same_name = 0.0 if x == y else 0.01
            cost[i, j] = _subst(ga.nodes[x], gb.nodes[y]) + 0.25 * edges + same_name
    for j in range(m):
        cost[n + j, j] = 1.0 + 0.5 * sum(hb[j].values())
    rows, cols = linear_sum_assignment(cost)
    return [(oa[i], ob[j]) for i, j in zip(rows, cols, strict=False)
            if i < n and j < m and _subst(ga.nodes[oa[i]], gb.nodes[ob[j]]) < 2.0]


def align(a: Graph, b: Graph, sites_a: list[Site], sites_b: list[Site]) -> Alignment:
    """Align the nodes of ``a`` and ``b`` by kind and role.

    Parameters
    ----------
    a, b : Graph
        Inferred graphs.
    sites_a, sites_b : list of Site
        Their attention sites (they give query/key/value roles).

    Returns
    -------
    Alignment
        Matched pairs in ``a``'s execution order and the unmatched nodes.
    """
    import networkx as nx

    ga, gb = _nx(a, sites_a), _nx(b, sites_b)
    best: list[tuple[str, str]] | None = None
    cost = 0.0
    method = "bipartite"
    if max(len(ga), len(gb)) <= MAX_EXACT_NODES:
        start = time.monotonic()
        paths = nx.optimize_edit_paths(
            ga, gb, node_subst_cost=_subst, node_del_cost=lambda _: 1.0,
            node_ins_cost=lambda _: 1.0,
            edge_subst_cost=lambda x, y: 0.0 if x["role"] == y["role"] else 0.5,
            edge_del_cost=lambda _: 0.5, edge_ins_cost=lambda _: 0.5,
            timeout=TIME_BUDGET_S,
        )
        for node_path, _edges, c in paths:
            best = [(x, y) for x, y in node_path if x is not None and y is not None
                    and _subst(ga.nodes[x], gb.nodes[y]) < 2.0]
            cost, method = float(c), "edit-distance"
            if time.monotonic() - start > TIME_BUDGET_S:
                break
    if best is None:
        best = _bipartite(ga, gb)
    rank = {q: i for i, q in enumerate(ga.graph["order"])}
    best.sort(key=lambda p: rank[p[0]])
    ma = {x for x, _ in best}
    mb = {y for _, y in best}
    return Alignment(
        pairs=tuple(best),
        only_a=tuple(q for q in ga.graph["order"] if q not in ma),
        only_b=tuple(q for q in gb.graph["order"] if q not in mb),
        method=method, cost=cost,
    )
