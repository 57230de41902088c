"""``describe(graph) -> Description``: what an attention mechanism is, from its IR.

Reads the inferred graph only (no torch): the attention sites with their place
on every axis (see :mod:`attngraph.analysis.axes` for the axes and their
definitions), each site's scorer formula, heads and cost, the parameters of
every node, and the declared outputs with their types.

Examples
--------
>>> from attngraph import loads_spec
>>> nodes = ("{x: {kind: items, from: v}, s: {kind: scorer, fn: dot, query: x, key: x},"
...          " p: {kind: softmax, scores: s}, z: {kind: readout, weights: p, values: x}}")
>>> d = describe(loads_spec("attngraph: 1\\nname: g\\ninputs: {v: {type: vectors, dim: 8}}\\n"
...                         f"nodes: {nodes}\\noutputs: {{z: z}}\\n"))
>>> [(a, x.value) for a, x in d.sites[0].axes.items()][:3]
[('hardness', 'soft'), ('basis', 'content'), ('source', 'self')]
>>> d.sites[0].cost.expr
'O(N²·d)'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attngraph.analysis.axes import AXES, Site, find_sites
from attngraph.analysis.scope import Origin
from attngraph.ir.graph import Graph

__all__ = ["Description", "describe", "site_dict", "to_dict"]


@dataclass(frozen=True)
class Description:
    """The description of one spec.

    ``params`` lists ``(qualified id, kind, count)`` for every node with
    parameters (body nodes as ``owner/id``); ``outputs`` lists
    ``(name, reference, type)`` for each declared output.
    """

    name: str
    file: str
    sites: tuple[Site, ...]
    params: tuple[tuple[str, str, int], ...]
    outputs: tuple[tuple[str, str, str], ...]
    total_params: int


def describe(graph: Graph) -> Description:
    """Describe an inferred graph.

    Parameters
    ----------
    graph : Graph
        The IR from :func:`attngraph.frontend.load_spec`.

    Returns
    -------
    Description
        Sites with axes, costs and formulas; parameters per node; outputs.
    """
    params = tuple(
        ("/".join((*path, n.id)), n.kind, n.params)
        for path, n in graph.walk()
        if n.params and n.body is None
    )
    outputs = tuple(
        (name, e.ref, str(graph.node(e.src).types[e.port])) for name, e in graph.outputs
    )
    return Description(
        name=graph.name, file=graph.file, sites=tuple(find_sites(graph)), params=params,
        outputs=outputs, total_params=graph.params,
    )


def _origin(o: Origin) -> dict[str, Any]:
    d: dict[str, Any] = {"node": o.qid, "kind": o.kind, "text": o.text}
    if o.bidirectional is not None:
        d["bidirectional"] = o.bidirectional
    if o.step is not None:
        d["step"] = o.step
    return d


def site_dict(site: Site) -> dict[str, Any]:
    """JSON-ready form of one site, with stable keys."""
    return {
        "id": site.id,
        "form": site.form,
        "chain": list(site.chain),
        "fn": site.fn,
        "formula": site.formula,
        "heads": site.heads,
        "axes": {k: {"value": site.axes[k].value, "reason": site.axes[k].reason}
                 for k in AXES},
        "query": [_origin(o) for o in site.query],
        "keys": [_origin(o) for o in site.keys],
        "values": [_origin(o) for o in site.values],
        "cost": site.cost.to_dict(),
        "params": dict(site.params),
    }


def to_dict(desc: Description) -> dict[str, Any]:
    """JSON-ready form of a description, with stable keys (for tools and tests)."""
    return {
        "name": desc.name,
        "file": desc.file,
        "sites": [site_dict(s) for s in desc.sites],
        "params": [{"node": q, "kind": k, "params": p} for q, k, p in desc.params],
        "total_params": desc.total_params,
        "outputs": [{"name": n, "ref": r, "type": t} for n, r, t in desc.outputs],
    }
