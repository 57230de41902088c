"""Where each node of a spec is written: line ranges, and the diagrams' nodes mapped to them.

The playground selects a node's lines when its box is clicked in a diagram, and
highlights the boxes of the node under the cursor. Both need, for every node, the
lines it spans (from the :class:`~attngraph.source.Document`'s positions) and, for
every drawn node, the spec node it stands for. Diagram ids follow the views'
conventions: ``x`` (architecture), ``x[1]`` (an item of the unrolled view),
``dec/score`` (a node of a loop's or block's body), ``output:logits``; Graphviz
writes each id, colons turned into dots, as the ``<title>`` of its ``<g>``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.source import Document, PathKey
    from renderers.diagram import Diagram

__all__ = ["NodeSpan", "node_spans", "diagram_targets"]

_ITEM = re.compile(r"\[[^\]]*\]$")


@dataclass(frozen=True)
class NodeSpan:
    """The lines ``line..end_line`` (1-based, inclusive) that write node ``id``."""

    id: str
    kind: str
    line: int
    col: int
    end_line: int

    def to_json(self) -> dict[str, Any]:
        """The JSON the page reads."""
        return {"id": self.id, "kind": self.kind, "line": self.line, "col": self.col,
                "end_line": self.end_line}


def _last_lines(doc: Document) -> dict[PathKey, int]:
    """The last line of every path's subtree (each position raises all its prefixes)."""
    last: dict[PathKey, int] = {}
    for table in (doc.locs, doc.key_locs):
        for path, loc in table.items():
            for k in range(len(path) + 1):
                p = path[:k]
                if last.get(p, 0) < loc.line:
                    last[p] = loc.line
    return last


def node_spans(graph: Graph, doc: Document) -> list[NodeSpan]:
    """A span for every node (body nodes as ``owner/id``) and every declared output.

    A node's span starts at its key (``x:``) and ends at the last line of its value;
    a block input written in a list is its own element's line.
    """
    by_pos: dict[tuple[int, int], PathKey] = {}
    for path, loc in doc.locs.items():
        by_pos.setdefault((loc.line, loc.col), path)
    last = _last_lines(doc)
    spans: list[NodeSpan] = []

    def span(nid: str, kind: str, path: PathKey | None, line: int, col: int) -> None:
        if path is None:
            spans.append(NodeSpan(nid, kind, line, col, line))
            return
        key = doc.key_locs.get(path) if path and isinstance(path[-1], str) else None
        start = key if key is not None else doc.locs.get(path)
        first = start.line if start is not None else line
        first_col = start.col if start is not None else col
        spans.append(NodeSpan(nid, kind, first, first_col, max(last.get(path, first), first)))

    def walk(g: Graph, prefix: str, seen: set[int]) -> None:
        for n in g.nodes:
            if n.loc.line <= 0:
                continue
            span(prefix + n.id, n.kind, by_pos.get((n.loc.line, n.loc.col)), n.loc.line,
                 n.loc.col)
            body = n.body
            if body is not None and id(body) not in seen:
                walk(body, f"{prefix}{n.id}/", seen | {id(body)})

    walk(graph, "", set())
    for name, _edge in graph.outputs:
        out_path: PathKey = ("outputs", name)
        at = doc.key_locs.get(out_path) or doc.locs.get(out_path)
        if at is not None:
            span(f"output:{name}", "output", out_path, at.line, at.col)
    return spans


def _dot_id(nid: str) -> str:
    """The id Graphviz writes in a node's ``<title>`` (:func:`renderers.dot._id`)."""
    return nid.replace(":", ".")


def diagram_targets(dg: Diagram, spans: list[NodeSpan]) -> dict[str, str]:
    """Each drawn node's Graphviz id mapped to the id of the spec node it draws.

    ``x[2]`` draws ``x``; ``dec/score`` draws the body node ``score`` of ``dec``
    (else ``dec`` itself); a node that draws no one spec node (an ellipsis, a
    legend entry, a mask) is left out.
    """
    known = {s.id for s in spans}
    out: dict[str, str] = {}
    for n in dg.nodes:
        nid = _ITEM.sub("", n.id)
        while nid and nid not in known and "/" in nid:
            nid = nid.rsplit("/", 1)[0]
        if nid not in known:
            nid = _ITEM.sub("", n.id.split("/", 1)[0])
        if nid in known:
            out[_dot_id(n.id)] = nid
    return out
