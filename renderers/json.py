"""A diagram as networkx node-link data (``networkx.node_link_graph`` reads it back).

Each node carries its ``label`` in the figures' text form (``x_1``, ``p_{1,N}``)
and ``ellipsis: true`` when it stands for the items not drawn; edges are the
drawn dependencies.
"""

from __future__ import annotations

import json as _json
from typing import Any

from renderers.diagram import Diagram

__all__ = ["to_data", "to_json"]


def to_data(dg: Diagram) -> dict[str, Any]:
    """Node-link data of ``dg`` (the ``edges`` key, as networkx >= 3.4 writes it)."""
    nodes = []
    for n in dg.nodes:
        d: dict[str, Any] = {"id": n.id, "label": n.label, "kind": n.kind,
                             "shape": n.shape, "ellipsis": n.ellipsis}
        if n.detail:
            d["detail"] = n.detail
        if n.cluster:
            d["cluster"] = n.cluster
        if n.rank is not None:
            d["rank"] = n.rank
        nodes.append(d)
    edges = []
    for e in dg.edges:
        d = {"source": e.src, "target": e.dst, "dashed": e.dashed}
        if e.label:
            d["label"] = e.label
        edges.append(d)
    return {
        "directed": True,
        "multigraph": False,
        "graph": {"name": dg.name, "view": dg.view, "title": dg.title,
                  "clusters": [{"id": c.id, "label": c.label, "parent": c.parent}
                               for c in dg.clusters]},
        "nodes": nodes,
        "edges": edges,
    }


def to_json(dg: Diagram) -> str:
    """``to_data`` as indented JSON text."""
    return _json.dumps(to_data(dg), indent=2, ensure_ascii=False) + "\n"
