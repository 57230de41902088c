"""DOT text for a :class:`~renderers.diagram.Diagram` (pure text; no ``dot`` run here).

The text is built with the ``graphviz`` package, which quotes ids and attributes;
labels are HTML (:func:`html`, :func:`math_html`) or plain text (:func:`_text`).
Math labels follow the figures: one-letter names in italic, word names in roman, subscripts with
symbolic indices in italic (``x_1``, ``key_N``, ``p_{1,N}``).
"""

from __future__ import annotations

import re
from collections import defaultdict

import graphviz

from renderers.diagram import Diagram, DNode, is_math_symbol

__all__ = ["to_dot", "quote", "html", "math_html"]

_FONT = "Times-Roman"
_SHAPES = {"circle": "circle", "ellipse": "circle", "box": "box", "plaintext": "plaintext",
           "ellipsis": "plaintext"}


def quote(text: str) -> str:
    """``text`` as the DOT double-quoted string the diagrams write (the ``graphviz``
    package's quoting, with backslashes and newlines taken literally)."""
    return graphviz.quoting.quote(_text(text), is_html_string=lambda _: False)


def _text(text: str) -> str:
    """Plain text for a DOT attribute: never read as HTML (a label ``<pad>``), its
    backslashes literal, its newlines the ``\\n`` escape."""
    return graphviz.nohtml(graphviz.escape(text).replace("\n", "\\n"))


def _id(nid: str) -> str:
    """A node id for DOT: the ``graphviz`` package reads ``a:b`` in an edge as node
    ``a``, port ``b``, so colons in ids (``output:logits``) become dots."""
    return nid.replace(":", ".")


def html(text: str) -> str:
    """Escape text for a DOT HTML label."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def math_html(base: str, sub: str = "") -> str:
    """``x``/``1`` as ``<I>x</I><SUB>1</SUB>``: letters of indices in italic."""
    out = f"<I>{html(base)}</I>" if is_math_symbol(base) else html(base)
    if sub:
        parts = re.findall(r"[A-Za-z]+|[^A-Za-z]+", sub)
        body = "".join(f"<I>{html(p)}</I>" if p.isalpha() else html(p) for p in parts)
        out += f"<SUB>{body}</SUB>"
    return out


def _font_size(n: DNode) -> int:
    size = len(n.base)
    return 24 if size <= 1 else 18 if size <= 3 else 14 if size <= 5 else 11


def _node_attrs(n: DNode) -> dict[str, str]:
    """Attributes of one node; labels are HTML (``<...>``) or plain :func:`_text`."""
    a: dict[str, str] = {}
    if n.ellipsis:
        text = "⋮" if n.base == "⋮" else "•  •  •"
        return {"shape": "plaintext", "label": _text(text), "fontsize": "28"}
    if n.detail:  # architecture box: id over kind
        a["label"] = (f"<{math_html(n.base, n.sub)}<BR/>"
                      f'<FONT POINT-SIZE="10">{html(n.detail)}</FONT>>')
        a["shape"] = n.shape
        a["style"] = "filled,dashed" if n.dashed else "filled"
        a["fillcolor"] = _text(n.fill or "white")
        a["fontsize"] = "14"
        return a
    a["label"] = f"<{math_html(n.base, n.sub)}>"
    a["shape"] = _SHAPES.get(n.shape, n.shape)
    if a["shape"] == "circle":
        wide = len(n.base) + len(n.sub) > 10
        a.update(width="0.8", fixedsize="false" if wide else "true",
                 fontsize=str(_font_size(n)))
    else:
        a["fontsize"] = "16"
        if a["shape"] == "box":  # a layer box spans the items, as in the figures
            a["width"] = "2.8"
    if n.fill:
        a["style"] = "filled"
        a["fillcolor"] = _text(n.fill)
    if n.column:
        a["group"] = _text(n.column)
    return a


def to_dot(dg: Diagram) -> str:
    """DOT text of ``dg`` (built with the ``graphviz`` package, which quotes every id
    and attribute); ranks become ``rank=same`` rows held in order."""
    g = graphviz.Digraph(
        _text(dg.name),
        graph_attr={"rankdir": dg.direction, "fontname": _FONT, "nodesep": "0.35",
                    "ranksep": "0.45", "newrank": "true"},
        node_attr={"fontname": _FONT, "penwidth": "1.3"},
        edge_attr={"arrowsize": "0.7", "penwidth": "1.2"},
    )
    if dg.title and dg.view != "unrolled":  # the figures carry no caption
        g.attr(labelloc="t", label=_text(dg.title))
    by_cluster, children, labels = dg.cluster_tree()

    def emit(cid: str | None, sg: graphviz.Digraph) -> None:
        for n in by_cluster.get(cid, []):
            sg.node(_id(n.id), **_node_attrs(n))
        for sub in children.get(cid, []):
            with sg.subgraph(name=_text("cluster_" + sub)) as c:
                c.attr(label=_text(labels[sub]), labeljust="l", style="rounded")
                emit(sub, c)

    emit(None, g)
    _ranks(dg, g)
    for e in dg.edges:
        a: dict[str, str] = {}
        if e.dashed:
            a["style"] = "dashed"
        if e.label:
            a["label"] = _text(e.label)
            a["fontsize"] = "10"
        if not e.constraint:
            a["constraint"] = "false"
        g.edge(_id(e.src), _id(e.dst), **a)
    if dg.legend:
        with g.subgraph(name="cluster_legend") as c:
            c.attr(label="kinds", style="rounded", fontsize="11")
            prev = None
            for kind, fill, shape in dg.legend:
                lid = _text("legend." + kind)
                c.node(lid, label=_text(kind), shape=shape, style="filled",
                       fillcolor=_text(fill), fontsize="10", height="0.3")
                if prev:
                    c.edge(prev, lid, style="invis")
                prev = lid
    return g.source


def _ranks(dg: Diagram, g: graphviz.Digraph) -> None:
    """Rows: invisible anchors chained in rank order; nodes of a row kept in order."""
    rows: dict[int, list[DNode]] = defaultdict(list)
    for n in dg.nodes:
        if n.rank is not None:
            rows[n.rank].append(n)
    if not rows:
        return
    ranks = sorted(rows)
    for r in ranks:
        g.node(f"rank.{r}", style="invis", shape="point", width="0", label=_text(""))
    for a, b in zip(ranks, ranks[1:], strict=False):
        g.edge(f"rank.{a}", f"rank.{b}", style="invis")
    for r in ranks:
        row = sorted(rows[r], key=lambda n: n.order)
        with g.subgraph() as same:
            same.attr(rank="same")
            for name in (f"rank.{r}", *(_id(n.id) for n in row)):
                same.node(name)
        for left, right in zip(row, row[1:], strict=False):
            g.edge(_id(left.id), _id(right.id), style="invis")
    columns: dict[str, dict[int, DNode]] = defaultdict(dict)
    for n in sorted(dg.nodes, key=lambda n: n.order):
        if n.column and n.rank is not None:
            columns[n.column].setdefault(n.rank, n)
    for col in columns.values():  # hold each item's column straight
        stack = [col[r] for r in sorted(col)]
        for low, high in zip(stack, stack[1:], strict=False):
            g.edge(_id(low.id), _id(high.id), style="invis", weight="8")
