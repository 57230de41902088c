"""The architecture view: one box per spec node, in its kind's style.

Fill and shape are the kind's :class:`~attngraph.kinds.Style` (read through
:mod:`renderers.traits`), so a user's kind draws in its own style and joins the
legend.

Edges carry the inferred type of what flows along them (``[N, 64]``, ``[N, 8] ×8``
for heads); detached edges are dashed. Blocks and loops are clusters holding
their bodies; a repeat is one box marked ``×K`` unless ``expand_repeats``.
Policies (sampling) and masks are drawn apart from the rest: a policy is a red
octagon; a softmax's mask is its own grey note feeding the softmax.
"""

from __future__ import annotations

from attngraph.ir.graph import Edge, Graph, Node
from attngraph.kinds import SCORERS, Style
from attngraph.kinds.choices import named
from renderers.diagram import Cluster, Diagram, DNode
from renderers.traits import formulas, role_of, style_of, traits_of

__all__ = ["architecture"]


def _detail(n: Node) -> str:
    if n.is_input:
        return f"input · {n.spec.type}" if n.spec is not None else "block input"
    bits = [n.kind]
    fn = n.field("fn")
    if named(n.spec, SCORERS) is not None:
        bits.append(f"{fn}" + (f" · {n.field('pairs')}" if n.field("pairs") != "all" else ""))
    elif traits_of(n).body == "rounds":
        bits.append(f"{n.spec.block} ×{n.spec.times}" + (" shared" if n.spec.share else ""))
    elif role_of(n) == "structure" and (n.field("block") or n.field("body")):
        bits.append(str(n.field("block") or n.field("body")))
    elif traits_of(n).samples:
        bits.append(f"{n.spec.dist} · {n.spec.estimator}")
    elif fn and isinstance(fn, str) and fn != n.kind:
        bits.append(fn)
    bits += [_formula_text(f) for f in formulas(n)]
    if n.params:
        bits.append(f"{n.params:,} params")
    return " · ".join(bits)


def _formula_text(text: str, most: int = 48) -> str:
    """A formula on one line, cut to ``most`` characters."""
    one = " ".join(text.split())
    return one if len(one) <= most else one[:most - 1] + "…"


def _mask_text(n: Node) -> str:
    m = n.field("mask")
    parts = []
    if getattr(m, "causal", False):
        parts.append("causal")
    if getattr(m, "window", None) is not None:
        parts.append(f"window {m.window}")
    if getattr(m, "adjacency", None) is not None:
        parts.append("adjacency")
    return "mask: " + (", ".join(parts) or "padding")


class _Builder:
    def __init__(self, graph: Graph, expand: bool) -> None:
        self.dg = Diagram(name=graph.name, view="architecture", title=graph.title,
                          direction="TB")
        self.expand = expand
        self.kinds: list[str] = []
        #: (structure node id, port) -> drawn node inside its body
        self.ports: dict[tuple[str, str], str] = {}

    def _box(self, nid: str, n: Node, cluster: str | None, kind: str | None = None,
             base: str | None = None) -> None:
        kind = kind or n.kind
        style = self._styled(kind)
        self.dg.add(DNode(id=nid, base=base or n.id, kind=kind, detail=_detail(n),
                          shape=style.shape, fill=style.fill, cluster=cluster))

    def _styled(self, kind: str) -> Style:
        """The style of ``kind``, which joins the legend."""
        if kind not in self.kinds:
            self.kinds.append(kind)
        return style_of(kind)

    def graph(self, g: Graph, prefix: str, cluster: str | None,
              bound: dict[str, str]) -> dict[str, str]:
        """Draw ``g``; ``bound`` maps its inputs to outer ids. Returns id -> exit id."""
        exits: dict[str, str] = {}
        for n in g.nodes:
            if n.is_input and n.id in bound:
                exits[n.id] = bound[n.id]
                continue
            nid = prefix + n.id
            rounds = traits_of(n).body == "rounds"
            if role_of(n) == "structure" and (not rounds or self.expand):
                exits[n.id] = self._structure(n, nid, cluster, exits)
                continue
            marked = f"{n.id} ×{n.spec.times}" if rounds else None
            self._box(nid, n, cluster, base=marked)
            exits[n.id] = nid
            for e in n.inputs:
                self._edge(g, e, exits, nid)
            if role_of(n) == "weights" and n.field("mask") is not None:
                mid = nid + ":mask"
                mask = self._styled("mask")
                self.dg.add(DNode(id=mid, base=_mask_text(n), kind="mask", detail="mask",
                                  shape=mask.shape, fill=mask.fill, cluster=cluster))
                self.dg.connect(mid, nid, dashed=True)
        return exits

    def _edge(self, g: Graph, e: Edge, exits: dict[str, str], dst: str) -> None:
        if e.src not in exits:
            return
        src = self.ports.get((e.src, e.port), exits[e.src])
        src_node = g.node(e.src)
        t = src_node.types.get(e.port)
        label = (f"{e.port}: " if e.port else "") + (str(t) if t is not None else "")
        self.dg.connect(src, dst, label=label, dashed=e.detach)

    def _structure(self, n: Node, nid: str, cluster: str | None,
                   exits: dict[str, str]) -> str:
        body = n.body
        if body is None:  # not inferred: draw a plain box
            self._box(nid, n, cluster)
            return nid
        names = [i.id for i in body.inputs]
        outer = {e.role.key or e.role.field: e for e in n.inputs}
        runs = traits_of(n).body
        rounds = int(n.spec.times) if runs == "rounds" else 1
        prev = None
        for r in range(1, rounds + 1):
            cid = f"{nid}#{r}" if runs == "rounds" else nid
            label = f"{n.label} {r}/{rounds}" if runs == "rounds" else (
                f"{n.kind} {n.label}: {n.field('block') or n.field('body')}")
            self.dg.clusters.append(Cluster(cid, label, cluster))
            bound: dict[str, str] = {}
            # a body's inputs are drawn inside its box, fed from outside
            for i, name in enumerate(names):
                bid = f"{cid}/{name}"
                self.dg.add(DNode(id=bid, base=name, kind="input", detail="block input",
                                  shape="plaintext", cluster=cid))
                bound[name] = bid
                e = outer.get(name) or (outer.get("from") if i == 0 else None)
                if prev is not None and runs == "rounds":
                    self.dg.connect(prev, bid)
                elif e is not None and e.src in exits:
                    self.dg.connect(exits[e.src], bid, dashed=e.detach)
            inner_exits = self.graph(body, cid + "/", cid, bound)
            for port, oe in body.outputs:
                if oe.src in inner_exits:
                    self.ports[(n.id, port)] = inner_exits[oe.src]
            out_ref = body.outputs[0][1].src if body.outputs else names[0]
            prev = inner_exits.get(out_ref, bid)
            if runs == "steps":
                for cname, c in n.spec.carry.items():
                    nxt = dict(body.outputs).get(c.next)
                    if nxt is not None and nxt.src in inner_exits and cname in bound:
                        self.dg.connect(inner_exits[nxt.src], bound[cname],
                                        label=f"{cname} → t+1", constraint=False)
        return prev or nid


def architecture(graph: Graph, *, expand_repeats: bool = False) -> Diagram:
    """Build the architecture diagram of ``graph``.

    Parameters
    ----------
    graph : Graph
        An inferred IR graph.
    expand_repeats : bool, optional
        Draw every round of a ``repeat`` instead of one box marked ``×K``.

    Returns
    -------
    Diagram
        One node per spec node (labelled by id), a legend of the kinds used.
    """
    b = _Builder(graph, expand_repeats)
    exits = b.graph(graph, "", None, {})
    b.dg.legend.extend((kind, style_of(kind).fill, style_of(kind).shape) for kind in b.kinds)
    out = style_of("output")
    for name, e in graph.outputs:
        oid = f"output:{name}"
        b.dg.add(DNode(id=oid, base=name, kind="output", detail="output", shape=out.shape,
                       fill=out.fill))
        if e.src in exits:
            t = graph.node(e.src).types.get(e.port)
            src = b.ports.get((e.src, e.port), exits[e.src])
            b.dg.connect(src, oid, label=str(t) if t is not None else "")
    return b.dg
