"""A small diagram model: built first by a view, serialised after by a format.

Views (:mod:`renderers.architecture`, :mod:`renderers.unrolled`) turn the IR into a
:class:`Diagram`; formats (:mod:`renderers.dot`, :mod:`renderers.mermaid`,
:mod:`renderers.json`) turn a diagram into text. Nothing here knows about either.

A node's text label is written as in the figures: ``x_1``, ``query_N``,
``p_{1,2}``, ``z`` (see :attr:`DNode.label`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DNode", "DEdge", "Cluster", "Diagram", "math_label", "is_math_symbol"]

def is_math_symbol(text: str) -> bool:
    """True for a one-letter name (drawn in math italic, like ``x`` or ``z``)."""
    return len(text) == 1 and text.isalpha()


def math_label(base: str, sub: str = "") -> str:
    """The figures' text form: ``x_1``, ``p_{1,N}``, ``query_N``, ``z``.

    >>> math_label("x", "1"), math_label("p", "1,N"), math_label("z")
    ('x_1', 'p_{1,N}', 'z')
    """
    if not sub:
        return base
    if len(sub) == 1:
        return f"{base}_{sub}"
    return f"{base}_{{{sub}}}"


@dataclass
class DNode:
    """A drawn node.

    ``base``/``sub`` make the label (``x`` and ``1`` give ``x_1``); ``detail`` is a
    second line (kind, shape) used by the architecture view; ``rank`` puts nodes
    in one row (unrolled view) and ``order`` sorts them left to right; ``column``
    aligns nodes vertically.
    """

    id: str
    base: str
    sub: str = ""
    shape: str = "circle"
    kind: str = ""
    detail: str = ""
    cluster: str | None = None
    rank: int | None = None
    order: tuple[int | str, ...] = ()
    column: str | None = None
    ellipsis: bool = False
    fill: str | None = None
    dashed: bool = False

    @property
    def label(self) -> str:
        """The label in the figures' text form."""
        return math_label(self.base, self.sub)


@dataclass
class DEdge:
    """A drawn dependency ``src -> dst``: ``dst`` is a function of ``src``."""

    src: str
    dst: str
    label: str = ""
    dashed: bool = False
    #: False when the edge points against the flow (drawn, but not used for layout)
    constraint: bool = True


@dataclass
class Cluster:
    """A labelled box around nodes (a block, a repeat, a loop step)."""

    id: str
    label: str
    parent: str | None = None


@dataclass
class Diagram:
    """Nodes, edges and clusters of one drawing, plus a legend of kinds."""

    name: str
    view: str
    title: str | None = None
    direction: str = "BT"
    nodes: list[DNode] = field(default_factory=list)
    edges: list[DEdge] = field(default_factory=list)
    clusters: list[Cluster] = field(default_factory=list)
    #: (kind, fill colour, shape) for the architecture view's legend
    legend: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, node: DNode) -> DNode:
        """Add a node (ids are unique; a second add returns the first node)."""
        for n in self.nodes:
            if n.id == node.id:
                return n
        self.nodes.append(node)
        return node

    def connect(self, src: str, dst: str, **kw: object) -> None:
        """Add an edge once (the diagram is a simple directed graph)."""
        if src == dst:
            return
        for e in self.edges:
            if e.src == src and e.dst == dst:
                return
        self.edges.append(DEdge(src, dst, **kw))  # type: ignore[arg-type]

    def cluster_tree(
        self,
    ) -> tuple[dict[str | None, list[DNode]], dict[str | None, list[str]], dict[str, str]]:
        """Nodes per cluster, child clusters per cluster (``None`` is the top) and
        cluster labels: what every serialiser walks to nest clusters."""
        by_cluster: dict[str | None, list[DNode]] = {}
        for n in self.nodes:
            by_cluster.setdefault(n.cluster, []).append(n)
        children: dict[str | None, list[str]] = {}
        for c in self.clusters:
            children.setdefault(c.parent, []).append(c.id)
        return by_cluster, children, {c.id: c.label for c in self.clusters}

    def node(self, nid: str) -> DNode:
        """The node with id ``nid``."""
        for n in self.nodes:
            if n.id == nid:
                return n
        raise KeyError(nid)

    def edge_labels(self) -> set[tuple[str, str]]:
        """Edges as ``(src label, dst label)`` pairs (what tests compare with figures)."""
        lab = {n.id: n.label for n in self.nodes}
        return {(lab[e.src], lab[e.dst]) for e in self.edges}
