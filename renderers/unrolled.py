"""The unrolled (per-item) view, drawn like the reference figures.

Every node with an items axis becomes circles ``x_1, x_2, …, x_N``; a scorer
folds into the weights (a softmax, a policy) that normalise it, giving one
weight node ``p_i`` per item, or ``p_{i,j}`` for all-pairs attention drawn for
one query ``i``. An edge ``A -> B`` means "B is a function of A". Rows run
bottom to top; as in the figures, a scorer's queries and a readout's values sit
above the weights they feed.

Nodes are recognised by their kind's *role* (``scorer``, ``weights``,
``readout``, ``structure``, ``recurrent``; see :mod:`renderers.traits`), so a
user's kind draws like the built-in kinds of its role.

Each IR node gets a *mode*: ``scalar`` (one node), ``items`` (one node per
item), ``pairs`` (weights ``p_{q,j}`` for the drawn query ``q``), ``qonly``
(a per-item node needed only at the drawn query, like ``z_1``) or ``box``
(blocks, repeats and loops, drawn as labelled boxes by :mod:`renderers.boxes`,
which also draws the steps of a loop). What is drawn of one node is a
:class:`~renderers.drawn.Drawn`.

Edges that carry no content (a position code reading its items' count, a loop
reading its number of steps, a scorer's keys when its function ignores their
content) are not drawn, nor are nodes read only through them.
"""

from __future__ import annotations

import re

from attngraph.ir.graph import Graph, Node, TensorType
from renderers.boxes import box_height, fed_axis, loop_pairs, place_box
from renderers.diagram import Diagram, DNode
from renderers.drawn import SINGLE, Dep, Drawn, subs
from renderers.traits import role_of, traits_of

__all__ = ["unrolled"]


def _main_type(node: Node) -> TensorType | None:
    if "" in node.types:
        return node.types[""]
    return next(iter(node.types.values()), None)


def _content_free(node: Node, role: str) -> bool:
    """Edges that carry no content: a position code reads only the length."""
    if traits_of(node).positions == "vectors" and role == "from":
        return True
    if traits_of(node).body == "steps" and role == "steps":
        return True  # a loop reads only how many steps
    if role_of(node) == "scorer" and role == "key":
        from attngraph.kinds import SCORERS
        from attngraph.kinds.choices import named

        info = named(node.spec, SCORERS)
        return info is not None and not info.content
    return False


def _folded(graph: Graph) -> set[str]:
    """Scorers read only by weights (softmaxes, policies): drawn as part of them."""
    readers: dict[str, list[str | None]] = {}
    for n in graph.nodes:
        for e in n.inputs:
            readers.setdefault(e.src, []).append(role_of(n))
    outs = {e.src for _, e in graph.outputs}
    return {
        n.id for n in graph.nodes
        if role_of(n) == "scorer" and readers.get(n.id)
        and all(r == "weights" for r in readers[n.id]) and n.id not in outs
    }


def _deps(graph: Graph, node: Node, folded: set[str], detach: bool = False) -> list[Dep]:
    out: list[Dep] = []
    for e in node.inputs:
        if _content_free(node, e.role.field):
            continue
        if e.src in folded:
            out.extend(_deps(graph, graph.node(e.src), folded, detach or e.detach))
        else:
            out.append(Dep(e.src, e.port, e.role, detach or e.detach))
    return out


def _base_mode(node: Node) -> tuple[str, str]:
    if role_of(node) == "structure":
        return "box", ""
    t = _main_type(node)
    if t is None or t.rank == 0 or not isinstance(t.dims[0], str):
        return "scalar", ""
    pairs = role_of(node) in ("scorer", "weights") or (t.axes is not None
                                                       and t.axes[-2:] == ("queries", "items"))
    if pairs and t.rank >= 2 and isinstance(t.dims[1], str):
        return "pairs", str(t.dims[1])
    return "items", str(t.dims[0])


def _modes(graph: Graph, order: list[Node], deps: dict[str, list[Dep]]) -> dict[str, list[str]]:
    """Mode and axis per drawn node, with ``qonly`` propagated both ways."""
    mode = {n.id: list(_base_mode(n)) for n in order}
    users: dict[str, list[tuple[str, Dep]]] = {}
    for nid, ds in deps.items():
        for d in ds:
            users.setdefault(d.src, []).append((nid, d))

    def forward() -> None:
        for n in order:
            if mode[n.id][0] != "items":
                continue
            for d in deps[n.id]:
                m = mode[d.src][0]
                if m == "qonly" or (m == "pairs" and role_of(n) == "readout"):
                    mode[n.id][0] = "qonly"

    forward()
    for n in reversed(order):
        us = users.get(n.id, [])
        if mode[n.id][0] == "items" and us and all(
            mode[u][0] == "qonly" and not (role_of(graph.node(u)) == "readout"
                                          and d.role.field == "values")
            or (mode[u][0] == "pairs" and d.role.field == "query") for u, d in us
        ):
            mode[n.id][0] = "qonly"
    forward()
    return mode


def _levels(graph: Graph, order: list[Node], deps: dict[str, list[Dep]],
            drawn: dict[str, Drawn]) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Row of each node, and the (src, dst) pairs drawn against the flow."""
    import networkx as nx

    c = nx.DiGraph()
    c.add_nodes_from(n.id for n in order)
    extra: list[tuple[str, str]] = []
    for n in order:
        for d in deps[n.id]:
            up = (role_of(n) == "weights" and d.role.field == "query"
                  and drawn[d.src].mode != "scalar")
            if up:
                extra.append((n.id, d.src))
            else:
                c.add_edge(d.src, n.id)
        if role_of(n) == "readout":
            w, v = n.edge("weights"), n.edge("values")
            if w and v and drawn.get(v.src) and drawn[v.src].mode == "items":
                extra.append((w.src, v.src))
    against: set[tuple[str, str]] = set()
    for a, b in extra:
        if a in c and b in c and not nx.has_path(c, b, a):
            c.add_edge(a, b)
            if any(d.src == b for d in deps.get(a, [])):
                against.add((b, a))
    level: dict[str, int] = {}
    for nid in nx.topological_sort(c):
        level[nid] = max((level[p] + drawn[p].height for p in c.predecessors(nid)), default=0)
    return level, against


def _place(dg: Diagram, graph: Graph, node: Node, d: Drawn, level: int, author: int,
           items: int, query: int, axes: list[str]) -> None:
    """Add the drawn instances of ``node`` to the diagram."""
    label = node.label or node.id
    word = len(label) > 1
    if d.mode == "box":
        place_box(dg, node, d, level, author, items)
        return
    ax = axes.index(d.axis) if d.axis in axes else len(axes)
    for s in subs(d.mode, d.axis, items, query):
        j = s.split(",")[-1]
        pos = int(j) - 1 if j.isdigit() and int(j) <= items else (items + 1 if j else items)
        nid = f"{node.id}[{s}]" if s else node.id
        base, sub = (label, s) if s else _split_label(label)
        dg.add(DNode(
            id=nid, base=base, sub=sub, kind=node.kind, rank=level,
            order=(ax if s else 0, pos, author), column=f"{d.axis}:{pos}" if s else None,
            shape="circle" if not word or len(label) <= 7 else "ellipse",
        ))
        d.inst[s] = nid
    d.entry = list(d.inst.values())
    d.exit = next(reversed(d.inst.values()))


def _split_label(label: str) -> tuple[str, str]:
    """A label written with its own subscript (``s_0``) as base and subscript."""
    m = re.match(r"^([A-Za-z]+)_\{?([A-Za-z0-9,+-]+)\}?$", label)
    return (m.group(1), m.group(2)) if m else (label, "")


def _connect(dg: Diagram, graph: Graph, node: Node, dep: Dep, s: Drawn, d: Drawn,
             against: bool, q: str) -> None:
    """Draw the instance edges for one dependency ``dep.src -> node``."""
    kw = {"dashed": dep.detach, "constraint": not against}
    sm = s.mode
    src_t = graph.node(dep.src).types.get(dep.port)
    if sm in ("items", "qonly", "pairs") and src_t is not None and (
            src_t.rank == 0 or not isinstance(src_t.dims[0], str)):
        sm = "port"  # a per-item node's summary port (an rnn's final state)
    pairs = loop_pairs(node, dep, s, d, sm)
    if pairs is None:
        pairs = _pairs(node, dep, s, d, sm, q)
    for a, b in pairs:
        dg.connect(a, b, **kw)


def _pairs(node: Node, dep: Dep, s: Drawn, d: Drawn, sm: str, q: str) -> list[tuple[str, str]]:
    """The (source instance, drawn instance) edges of ``dep``, by the two modes."""
    pairs: list[tuple[str, str]] = []
    dst_all = d.entry if d.mode == "box" else list(d.inst.values())
    if sm in SINGLE:
        pairs = [(s.exit, t) for t in dst_all]
    elif d.mode in ("scalar", "box"):
        srcs = [s.inst[q]] if sm == "qonly" else list(s.inst.values())
        pairs = [(a, t) for a in srcs for t in dst_all]
    elif sm == "items" and d.mode == "items":
        pairs = [(s.inst[k], d.inst[k]) for k in d.inst if k in s.inst]
    elif sm == "items" and d.mode == "pairs":
        if dep.role.field == "query":
            pairs = [(s.inst[q], t) for t in d.inst.values()] if q in s.inst else []
        else:
            pairs = [(s.inst[k.split(",")[1]], t) for k, t in d.inst.items()
                     if k.split(",")[1] in s.inst]
    elif sm == "items" and d.mode == "qonly":
        if role_of(node) == "readout" and dep.role.field == "values":
            pairs = [(a, d.inst[q]) for a in s.inst.values()]
        elif q in s.inst:
            pairs = [(s.inst[q], d.inst[q])]
    elif sm == "qonly":
        pairs = [(s.inst[q], t) for t in dst_all]
    elif sm == "pairs" and d.mode == "pairs":
        pairs = [(s.inst[k], t) for k, t in d.inst.items() if k in s.inst]
    elif sm == "pairs":
        pairs = [(a, t) for a in s.inst.values() for t in dst_all]
    return pairs


def unrolled(graph: Graph, *, items: int = 2, query: int = 1) -> Diagram:
    """Build the per-item diagram of ``graph``.

    Parameters
    ----------
    graph : Graph
        An inferred IR graph (from :func:`attngraph.frontend.load_spec`).
    items : int, optional
        How many items to draw before the ellipsis (``x_1 … x_items, …, x_N``).
    query : int, optional
        The query ``i`` for which all-pairs weights ``p_{i,j}`` are drawn.

    Returns
    -------
    Diagram
        Nodes labelled in the figures' text form (``x_1``, ``p_{1,N}``).
    """
    dg = Diagram(name=graph.name, view="unrolled", title=graph.title, direction="BT")
    folded = _folded(graph)
    order = [n for n in graph.order() if n.id not in folded and not _unused_input(graph, n)]
    deps = {n.id: [d for d in _deps(graph, n, folded) if d.src in {m.id for m in order}]
            for n in order}
    order, deps = _drop_unread(graph, order, deps)
    modes = _modes(graph, order, deps)
    drawn = {nid: Drawn(mode=m, axis=a) for nid, (m, a) in modes.items()}
    for n in order:
        if drawn[n.id].mode == "box":
            drawn[n.id].height = box_height(n)
            drawn[n.id].axis = fed_axis(n, deps[n.id], drawn)
    level, against = _levels(graph, order, deps, drawn)
    axes: list[str] = []
    for n in order:
        if drawn[n.id].axis and drawn[n.id].axis not in axes:
            axes.append(drawn[n.id].axis)
    author = {n.id: i for i, n in enumerate(graph.nodes)}
    for n in order:
        _place(dg, graph, n, drawn[n.id], level[n.id], author[n.id], items, query,
               axes)
    for n in order:
        for d in deps[n.id]:
            _connect(dg, graph, n, d, drawn[d.src], drawn[n.id], (d.src, n.id) in against,
                     str(query))
        if role_of(n) == "recurrent" and drawn[n.id].mode == "items":
            inst = drawn[n.id].inst
            for a, b in zip(range(1, items), range(2, items + 1), strict=True):
                dg.connect(inst[str(a)], inst[str(b)])
                if n.field("bidirectional"):  # the backward pass: h_{i+1} feeds h_i
                    dg.connect(inst[str(b)], inst[str(a)], constraint=False)
    _ellipses(dg, order, drawn, level, items, axes)
    return dg


def _drop_unread(graph: Graph, order: list[Node], deps: dict[str, list[Dep]],
                 ) -> tuple[list[Node], dict[str, list[Dep]]]:
    """Without the nodes whose content nothing drawn reads (image tiles cut only so
    that a position code can count them), repeatedly; outputs always stay."""
    keep = {n.id for n in order}
    outs = {e.src for _, e in graph.outputs}
    while True:
        read = {d.src for nid in keep for d in deps[nid]}
        gone = {nid for nid in keep if nid not in read and nid not in outs}
        if not gone:
            break
        keep -= gone
    return ([n for n in order if n.id in keep],
            {nid: [d for d in ds if d.src in keep] for nid, ds in deps.items() if nid in keep})


def _unused_input(graph: Graph, node: Node) -> bool:
    """Inputs no node reads (training labels): not part of the mechanism."""
    if not node.is_input:
        return False
    return not any(e.src == node.id for n in graph.nodes for e in n.inputs)


def _ellipses(dg: Diagram, order: list[Node], drawn: dict[str, Drawn],
              level: dict[str, int], items: int, axes: list[str]) -> None:
    """One ``• • •`` per items axis, in the weights' row (else the middle row)."""
    for ai, axis in enumerate(axes):
        rows = [n for n in order if drawn[n.id].axis == axis
                and drawn[n.id].mode in ("items", "pairs")]
        if not rows:
            continue
        weights = [n for n in rows if role_of(n) == "weights"]
        pick = weights[0] if weights else rows[len(rows) // 2]
        dg.add(DNode(id=f"...{axis}", base="…", kind="ellipsis", shape="ellipsis",
                     rank=level[pick.id], order=(ai, items, -1), column=f"{axis}:{items}",
                     ellipsis=True))
