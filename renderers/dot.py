"""DOT text for a :class:`~renderers.diagram.Diagram` (pure text; no ``dot`` run here).

All quoting happens in :func:`quote` and :func:`html`. Math labels follow the
figures: one-letter names in italic, word names in roman, subscripts with
symbolic indices in italic (``x_1``, ``key_N``, ``p_{1,N}``).
"""

from __future__ import annotations

import re
from collections import defaultdict

from renderers.diagram import Diagram, DNode, is_math_symbol

__all__ = ["to_dot", "quote", "html", "math_html"]

_FONT = "Times-Roman"
_SHAPES = {"circle": "circle", "ellipse": "circle", "box": "box", "plaintext": "plaintext",
           "ellipsis": "plaintext"}


def quote(text: str) -> str:
    """A DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


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


def _attrs(d: dict[str, str]) -> str:
    return "[" + ", ".join(f"{k}={v}" for k, v in d.items()) + "]"


def _font_size(n: DNode) -> int:
    size = len(n.base)
    return 24 if size <= 1 else 18 if size <= 3 else 14 if size <= 5 else 11


def _node_attrs(n: DNode) -> dict[str, str]:
    a: dict[str, str] = {}
    if n.ellipsis:
        text = "⋮" if n.base == "⋮" else "•  •  •"
        return {"shape": "plaintext", "label": quote(text), "fontsize": "28"}
    if n.detail:  # architecture box: id over kind
        a["label"] = (f"<{math_html(n.base, n.sub)}<BR/>"
                      f'<FONT POINT-SIZE="10">{html(n.detail)}</FONT>>')
        a["shape"] = n.shape
        a["style"] = '"filled,dashed"' if n.dashed else "filled"
        a["fillcolor"] = quote(n.fill or "white")
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
        a["fillcolor"] = quote(n.fill)
    if n.column:
        a["group"] = quote(n.column)
    return a


def to_dot(dg: Diagram) -> str:
    """DOT text of ``dg``; ranks become ``rank=same`` rows held in order."""
    lines = [f"digraph {quote(dg.name)} {{",
             f"  graph [rankdir={dg.direction}, fontname={quote(_FONT)}, nodesep=0.35, "
             "ranksep=0.45, newrank=true];",
             f"  node [fontname={quote(_FONT)}, penwidth=1.3];",
             "  edge [arrowsize=0.7, penwidth=1.2];"]
    if dg.title and dg.view != "unrolled":  # the figures carry no caption
        lines.append(f"  labelloc=t; label={quote(dg.title)};")
    by_cluster, children, labels = dg.cluster_tree()

    def emit(cid: str | None, indent: str) -> None:
        for n in by_cluster.get(cid, []):
            lines.append(f"{indent}{quote(n.id)} {_attrs(_node_attrs(n))};")
        for sub in children.get(cid, []):
            lines.append(f"{indent}subgraph {quote('cluster_' + sub)} {{")
            lines.append(f"{indent}  label={quote(labels[sub])}; labeljust=l; style=rounded;")
            emit(sub, indent + "  ")
            lines.append(f"{indent}}}")

    emit(None, "  ")
    _ranks(dg, lines)
    for e in dg.edges:
        a: dict[str, str] = {}
        if e.dashed:
            a["style"] = "dashed"
        if e.label:
            a["label"] = quote(e.label)
            a["fontsize"] = "10"
        if not e.constraint:
            a["constraint"] = "false"
        lines.append(f"  {quote(e.src)} -> {quote(e.dst)}" + (f" {_attrs(a)}" if a else "")
                     + ";")
    if dg.legend:
        lines.append('  subgraph "cluster_legend" {')
        lines.append('    label="kinds"; style=rounded; fontsize=11;')
        prev = None
        for kind, fill, shape in dg.legend:
            lid = quote("legend:" + kind)
            lines.append(f"    {lid} [label={quote(kind)}, shape={shape}, style=filled, "
                         f"fillcolor={quote(fill)}, fontsize=10, height=0.3];")
            if prev:
                lines.append(f"    {prev} -> {lid} [style=invis];")
            prev = lid
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _ranks(dg: Diagram, lines: list[str]) -> None:
    """Rows: invisible anchors chained in rank order; nodes of a row kept in order."""
    rows: dict[int, list[DNode]] = defaultdict(list)
    for n in dg.nodes:
        if n.rank is not None:
            rows[n.rank].append(n)
    if not rows:
        return
    ranks = sorted(rows)
    for r in ranks:
        lines.append(f"  {quote(f'rank:{r}')} [style=invis, shape=point, width=0, label=\"\"];")
    for a, b in zip(ranks, ranks[1:], strict=False):
        lines.append(f"  {quote(f'rank:{a}')} -> {quote(f'rank:{b}')} [style=invis];")
    for r in ranks:
        row = sorted(rows[r], key=lambda n: n.order)
        ids = " ".join(quote(n.id) + ";" for n in row)
        lines.append(f"  {{rank=same; {quote(f'rank:{r}')}; {ids}}}")
        for left, right in zip(row, row[1:], strict=False):
            lines.append(f"  {quote(left.id)} -> {quote(right.id)} [style=invis];")
    columns: dict[str, dict[int, DNode]] = defaultdict(dict)
    for n in sorted(dg.nodes, key=lambda n: n.order):
        if n.column and n.rank is not None:
            columns[n.column].setdefault(n.rank, n)
    for col in columns.values():  # hold each item's column straight
        stack = [col[r] for r in sorted(col)]
        for low, high in zip(stack, stack[1:], strict=False):
            lines.append(f"  {quote(low.id)} -> {quote(high.id)} [style=invis, weight=8];")
