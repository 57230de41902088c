"""The unrolled view's boxes: blocks, repeats and loops, and the edges into a loop.

A repeat is drawn as its rounds stacked one above the other (``1, 2, ⋮, K`` when
there are more than three); a loop as three steps ``t-1, t, t+1`` joined by its
carries, or, fed one item per step, at the items' own steps ``1, 2, …, N``, step
k reading item k (item k-1 for a decoder's fed-back tokens); any other structure
kind (a block, a user's) as one box. Called by :mod:`renderers.unrolled`.
"""

from __future__ import annotations

from attngraph.ir.graph import Node
from attngraph.kinds.base import traits_of
from renderers.diagram import Diagram, DNode
from renderers.drawn import SINGLE, Dep, Drawn, subs

__all__ = ["place_box", "box_height", "fed_axis", "loop_pairs"]

def box_height(node: Node) -> int:
    """Rows a structure node takes: a repeat's drawn rounds, else one."""
    if traits_of(node).body == "rounds":
        return 4 if int(node.spec.times) > 3 else int(node.spec.times)
    return 1


def fed_axis(node: Node, deps: list[Dep], drawn: dict[str, Drawn]) -> str:
    """The items axis a loop is fed one item per step from (drawn per item), or ''."""
    if traits_of(node).body != "steps":
        return ""
    for dep in deps:
        if dep.role.field == "feed" and drawn[dep.src].mode == "items":
            return drawn[dep.src].axis
    return ""


def place_box(dg: Diagram, node: Node, d: Drawn, level: int, author: int,
              items: int) -> None:
    """Add the box(es) of structure ``node`` to the diagram, at row ``level``."""
    label = node.label or node.id
    order = (0, items, author)
    runs = traits_of(node).body
    if runs == "rounds":
        k = int(node.spec.times)
        shown = list(range(1, k + 1)) if k <= 3 else [1, 2, 0, k]
        prev = None
        for off, layer in enumerate(shown):
            nid = f"{node.id}[{layer}]" if layer else f"{node.id}[vdots]"
            dg.add(DNode(id=nid, base=f"{label} {layer}" if layer else "⋮", kind=node.kind,
                         shape="box" if layer else "plaintext", rank=level + off,
                         order=order, ellipsis=not layer))
            if prev:
                dg.connect(prev, nid)
            prev = nid
            d.inst[str(layer)] = nid
        d.height = len(shown)
        d.entry, d.exit = [d.inst["1"]], prev or ""
    elif runs == "steps":
        # steps t-1, t, t+1; or, fed one item per step, the items' own steps 1, 2, …, N
        steps = subs("items", d.axis, items, 1) if d.axis else ["t-1", "t", "t+1"]
        for i, s in enumerate(steps):
            nid = f"{node.id}[{s}]"
            dg.add(DNode(id=nid, base=label, sub=s, kind=node.kind, shape="box", rank=level,
                         order=(0, i, author), column=f"{d.axis}:{i}" if d.axis else None))
            d.inst[s] = nid
        # what passes from a step to the next: the carries, and fed-back outputs
        passed = [*node.spec.carry,
                  *(f for f, spec in node.spec.feed.items() if spec.feedback is not None)]
        # consecutive steps only: the ellipsis stands for the steps between; a loop that
        # passes nothing on runs its steps independently, so no arrow joins them
        pairs = zip(steps[:2], steps[1:3] if not d.axis else steps[1:2], strict=False)
        for a, b in pairs if passed else ():
            dg.connect(d.inst[a], d.inst[b], label=", ".join(passed))
        d.entry, d.exit = list(d.inst.values()), d.inst[steps[-1]]
    else:
        dg.add(DNode(id=node.id, base=label, kind=node.kind, shape="box", rank=level,
                     order=order))
        d.inst[""] = node.id
        d.entry, d.exit = [node.id], node.id


def loop_pairs(node: Node, dep: Dep, s: Drawn, d: Drawn, sm: str,
               ) -> list[tuple[str, str]] | None:
    """The (source, step) edges of a loop's ``feed`` or ``carry``; None for other edges.

    ``s`` and ``sm`` are the source's drawing and mode, ``d`` the loop's drawing.
    """
    if d.mode != "box":
        return None
    if d.axis and dep.role.field == "feed" and sm == "items":
        # step k reads item k; a decoder's fed-back tokens are shifted: step k+1 reads k
        shift = node.spec.feed[str(dep.role.key)].feedback is not None
        keys = list(d.inst)
        pairs = []
        for k in s.inst:
            to = keys.index(k) + shift if k in keys else len(keys)
            # shifted, item 2 feeds step 3, which is not drawn (not step N)
            if to < len(keys) and (not shift or keys[to].isdigit()):
                pairs.append((s.inst[k], d.inst[keys[to]]))
        return pairs
    if dep.role.field == "carry" and traits_of(node).body == "steps":
        # a carry's initial value is read by the first step only
        return [(x, d.entry[0]) for x in ([s.exit] if sm in SINGLE else list(s.inst.values()))]
    return None
