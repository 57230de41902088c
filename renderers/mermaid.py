"""Mermaid flowchart text for a :class:`~renderers.diagram.Diagram` (pastes into
GitHub markdown). Node ids become ``n0, n1, ...``; labels are quoted here only."""

from __future__ import annotations

import re
from collections import defaultdict

from renderers.diagram import Diagram, DNode, is_math_symbol

__all__ = ["to_mermaid", "mermaid_label"]


def _esc(text: str) -> str:
    return (text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
            .replace(">", "&gt;"))


def mermaid_label(base: str, sub: str = "", detail: str = "") -> str:
    """A quoted Mermaid label with HTML italics and subscripts."""
    out = f"<i>{_esc(base)}</i>" if is_math_symbol(base) else _esc(base)
    if sub:
        parts = re.findall(r"[A-Za-z]+|[^A-Za-z]+", sub)
        out += "<sub>" + "".join(f"<i>{_esc(p)}</i>" if p.isalpha() else _esc(p)
                                 for p in parts) + "</sub>"
    if detail:
        out += f"<br/><small>{_esc(detail)}</small>"
    return '"' + out + '"'


def _shape(n: DNode, label: str) -> str:
    if n.ellipsis:
        return f'["{"⋮" if n.base == "⋮" else "…"}"]'
    if n.shape in ("circle", "ellipse"):
        return f"(({label}))"
    if n.shape in ("diamond", "doubleoctagon"):
        return f"{{{{{label}}}}}"
    if n.shape in ("invhouse", "parallelogram", "house"):
        return f"[/{label}/]"
    if n.shape in ("note",):
        return f">{label}]"
    return f"[{label}]"


def to_mermaid(dg: Diagram) -> str:
    """Mermaid ``flowchart`` text of ``dg`` (dashed edges for detached inputs)."""
    ids = {n.id: f"n{i}" for i, n in enumerate(dg.nodes)}
    lines = [f"flowchart {dg.direction}"]
    by_cluster, children, labels = dg.cluster_tree()
    cids = {c.id: f"c{i}" for i, c in enumerate(dg.clusters)}

    def emit(cid: str | None, indent: str) -> None:
        for n in by_cluster.get(cid, []):
            label = mermaid_label(n.base, n.sub, n.detail)
            lines.append(f"{indent}{ids[n.id]}{_shape(n, label)}")
        for sub in children.get(cid, []):
            lines.append(f'{indent}subgraph {cids[sub]} ["{_esc(labels[sub])}"]')
            emit(sub, indent + "  ")
            lines.append(f"{indent}end")

    emit(None, "  ")
    for e in dg.edges:
        arrow = "-.->" if e.dashed else "-->"
        text = f'|"{_esc(e.label)}"|' if e.label else ""
        lines.append(f"  {ids[e.src]} {arrow}{text} {ids[e.dst]}")
    styled = [ids[n.id] for n in dg.nodes if n.ellipsis]
    if styled:
        lines.append("  classDef ellipsis fill:none,stroke:none")
        lines.append(f"  class {','.join(styled)} ellipsis")
    fills: dict[str, list[str]] = defaultdict(list)
    for n in dg.nodes:
        if n.fill and not n.ellipsis:
            fills[n.fill].append(ids[n.id])
    for i, (fill, members) in enumerate(sorted(fills.items())):
        lines.append(f"  classDef k{i} fill:{fill}")
        lines.append(f"  class {','.join(members)} k{i}")
    return "\n".join(lines) + "\n"
