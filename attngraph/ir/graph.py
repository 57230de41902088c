"""The one IR: a graph of frozen nodes at the level of the spec's own kinds.

Renderers, ``describe``, ``diff`` and the lowering all read this. A node holds its
kind's spec model (``Node[SpecT]``; the kind is the model's ``kind`` tag) and one
:class:`Edge` per reference, each filling a typed :class:`Role`. ``str(graph)`` is
a stable one-line-per-node dump (:mod:`attngraph.ir.printer`) used as golden text.

Nothing here imports the renderers: a notebook shows a graph through the display
function registered under the ``attngraph.display`` entry point group (the
``renderers`` package registers one).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from attngraph.errors import SourceLoc

if TYPE_CHECKING:
    import networkx as nx
    from pydantic import BaseModel

    from attngraph.source import Positions
    from attngraph.spec.models import TrainSpec

__all__ = ["Dim", "TensorType", "Role", "Edge", "Node", "Graph", "INPUT", "fmt_dim"]

#: A size: a fixed integer, or a symbol (``N``, ``M``, ``T``) known at run time.
Dim = int | str
#: Kind name of graph inputs (and of a block's inputs inside its body).
INPUT = "input"


def fmt_dim(d: Dim) -> str:
    """Text form of a dimension."""
    return str(d)


@dataclass(frozen=True)
class TensorType:
    """Shape (without the batch axis), head count and dtype of a value.

    ``heads=h`` means a leading head axis of size ``h`` before ``dims``;
    ``simplex`` marks weights that sum to one over their last axis; ``weights``
    marks non-negative weights of a normaliser over any axis (simplex ones too);
    ``index_of`` marks ids that point at items of that length (positions).
    """

    dims: tuple[Dim, ...]
    heads: int | None = None
    dtype: Literal["float", "long", "bool"] = "float"
    simplex: bool = False
    weights: bool = False
    #: ids that are positions into the items of this length (a ``positions`` input)
    index_of: Dim | None = None
    #: the names of the axes (``items``, ``features``...; see
    #: :mod:`attngraph.algebra.axes`) where a node says them (an expression, a
    #: parameter); None: named by what the value is. Not part of the type's identity.
    axes: tuple[str, ...] | None = field(default=None, compare=False)
    #: the range (low, high) of its entries where the node that makes it bounds them (a
    #: formula's clamp, an index), either end possibly infinite; None: unbounded.
    #: ``whole``: its entries are whole numbers. Neither is part of the type's identity.
    span: tuple[float, float] | None = field(default=None, compare=False)
    whole: bool = field(default=False, compare=False)

    @property
    def rank(self) -> int:
        """Number of axes, not counting batch or heads."""
        return len(self.dims)

    def __str__(self) -> str:
        body = "[" + ", ".join(fmt_dim(d) for d in self.dims) + "]"
        if self.dtype != "float":
            body = f"{self.dtype}{body}"
        if self.heads:
            body += f" ×{self.heads}"
        return body

    def with_dims(self, *dims: Dim) -> TensorType:
        """Same type with other dims."""
        return replace(self, dims=tuple(dims))


@dataclass(frozen=True)
class Role:
    """Which field of a node an edge fills.

    ``field`` is the field as written (``from``, ``query``, ``mask``); ``key`` the
    element of a list or mapping field (``from: [a, b]`` gives keys ``0``, ``1``;
    ``inputs: {enc: x}`` gives ``enc``; a loop's ``carry: {h: ...}`` gives ``h``);
    ``sub`` the field of a nested model (``init`` of a carry, ``adjacency`` of a
    mask). Its text joins the parts with dots: ``carry.h.init``, ``mask.adjacency``.

    >>> str(Role("carry", "h", "init")), Role("from", "0").key
    ('carry.h.init', '0')
    """

    field: str
    key: str | None = None
    sub: str | None = None

    def __str__(self) -> str:
        return ".".join(p for p in (self.field, self.key, self.sub) if p is not None)


@dataclass(frozen=True)
class Edge:
    """One input of a node: which field (``role``) reads which node's port."""

    role: Role
    src: str
    port: str = ""
    detach: bool = False
    loc: SourceLoc = field(default_factory=SourceLoc, compare=False)

    @property
    def ref(self) -> str:
        """The reference as written: ``src`` or ``src.port``."""
        return f"{self.src}.{self.port}" if self.port else self.src

    def __str__(self) -> str:
        return ("~" if self.detach else "") + "%" + self.ref


SpecT = TypeVar("SpecT", bound="BaseModel | None")


@dataclass(frozen=True)
class Node(Generic[SpecT]):
    """A node of the IR.

    ``spec`` is the node's own pydantic model (sizes resolved to integers); its
    ``kind`` tag is the node's kind (a block's inputs have no spec: kind
    ``input``). ``types`` maps each output port (``""`` is the default) to its
    type, filled by shape inference; ``body`` is the instantiated subgraph of a
    block, repeat or loop; ``params`` is the parameter count from shape
    inference; ``loc`` is the position of the node's mapping and ``field_locs``
    that of each field. ``runs`` says when a node of a loop's body runs (the
    hoisting pass sets it): at every ``step``, ``once`` before the steps (it is the
    same at every step), ``before`` them on every step's feed together (it reads only
    the feeds), or ``after`` them, once over all steps together (no carried state
    depends on it).
    """

    id: str
    spec: SpecT
    inputs: tuple[Edge, ...] = ()
    loc: SourceLoc = field(default_factory=SourceLoc, compare=False)
    label: str = ""
    types: Mapping[str, TensorType] = field(default_factory=dict)
    body: Graph | None = None
    params: int = 0
    field_locs: Mapping[str, SourceLoc] = field(default_factory=dict, compare=False, repr=False)
    runs: Literal["step", "once", "before", "after"] = "step"

    @property
    def kind(self) -> str:
        """The kind: the spec model's ``kind`` tag (``input`` for inputs)."""
        return str(getattr(self.spec, "kind", INPUT))

    def where(self, name: str) -> SourceLoc:
        """Position of a spec field's value, else of the node."""
        return self.field_locs.get(name, self.loc)

    def type(self, port: str = "") -> TensorType:
        """Type of an output port (``""`` is the default port)."""
        return self.types[port]

    def edge(self, role: Role | str) -> Edge | None:
        """The input edge filling ``role`` (a :class:`Role` or its text), or ``None``."""
        text = str(role)
        for e in self.inputs:
            if str(e.role) == text:
                return e
        return None

    def edges(self, field_name: str) -> list[Edge]:
        """Input edges of one field (every element of a list or mapping field)."""
        return [e for e in self.inputs if e.role.field == field_name]

    def field(self, name: str, default: Any = None) -> Any:
        """A spec field's value (``from`` for the ``from_`` field)."""
        return getattr(self.spec, "from_" if name == "from" else name, default)

    @property
    def is_input(self) -> bool:
        """True for graph (and block) inputs."""
        return self.kind == INPUT


@dataclass(frozen=True)
class Graph:
    """A spec (or a block body) as nodes in author order, with named outputs.

    Every node and edge keeps its position in the spec; ``positions`` keeps those
    of the spec's other sections (``train:``, ``dims:``, ``inputs:``,
    ``outputs:``), which :meth:`where` looks up: an error in the training set-up
    points into the spec without reading its YAML again. A graph built in code
    has none.
    """

    name: str
    nodes: tuple[Node[Any], ...]
    outputs: tuple[tuple[str, Edge], ...]
    dims: Mapping[str, int] = field(default_factory=dict)
    file: str = "<spec>"
    title: str | None = None
    summary: str | None = None
    block: str | None = None
    train: TrainSpec | None = None
    blocks: Mapping[str, Graph] = field(default_factory=dict, repr=False)
    positions: Positions | None = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def _index(self) -> dict[str, Node[Any]]:
        return {n.id: n for n in self.nodes}

    def __iter__(self) -> Iterator[Node[Any]]:
        return iter(self.nodes)

    def __contains__(self, nid: object) -> bool:
        return nid in self._index

    def node(self, nid: str) -> Node[Any]:
        """The node with id ``nid``."""
        return self._index[nid]

    @property
    def inputs(self) -> list[Node[Any]]:
        """Input nodes, in author order."""
        return [n for n in self.nodes if n.is_input]

    def where(self, *path: str, key: bool = False) -> SourceLoc:
        """Position in the spec of ``path`` (keys from the document's root, e.g.
        ``"train", "options", "vocab"``; none for the document itself), or of the
        key itself with ``key``; a path the spec lacks gives its nearest ancestor.
        With the spec's text, so an error prints the line; only the file for a
        graph built in code.

        >>> from attngraph.frontend import loads_spec
        >>> g = loads_spec(open("specs/global_attention.yaml").read(), "ga.yaml")
        >>> str(g.where("train", "task"))
        'ga.yaml:35:9'
        """
        if self.positions is None:
            return SourceLoc(self.file)
        return self.positions.loc(path, key=key)

    @property
    def text(self) -> str | None:
        """The spec text this graph was read from, or None (built in code)."""
        return self.positions.text if self.positions is not None else None

    def output(self, name: str) -> Edge:
        """The edge of a declared output."""
        return dict(self.outputs)[name]

    def nx(self) -> nx.MultiDiGraph:
        """A networkx view: node ids, one edge per input with ``role``/``port``."""
        import networkx as nx

        g = nx.MultiDiGraph(name=self.name)
        for n in self.nodes:
            g.add_node(n.id, kind=n.kind)
        for n in self.nodes:
            for e in n.inputs:
                g.add_edge(e.src, n.id, role=str(e.role), port=e.port, detach=e.detach)
        return g

    def order(self) -> list[Node[Any]]:
        """Nodes in execution order: dependencies first, author order among equals.

        Uses the standard library's ``graphlib`` rather than networkx: validating a
        spec must start fast, and importing networkx costs more than all the rest of
        the front end. Raises ``graphlib.CycleError`` on a cycle (see ``verify``).
        """
        import graphlib

        ts: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
        for n in self.nodes:
            ts.add(n.id, *(e.src for e in n.inputs if e.src in self._index))
        ts.prepare()
        pos = {n.id: i for i, n in enumerate(self.nodes)}
        out: list[Node[Any]] = []
        while ts.is_active():
            ready = sorted(ts.get_ready(), key=pos.__getitem__)
            for nid in ready:
                out.append(self._index[nid])
                ts.done(nid)
        return out

    def replace_nodes(self, nodes: list[Node[Any]] | tuple[Node[Any], ...]) -> Graph:
        """A copy of this graph with other nodes."""
        return replace(self, nodes=tuple(nodes))

    def walk(self) -> Iterator[tuple[tuple[str, ...], Node[Any]]]:
        """Every node with its path of enclosing block/repeat/loop node ids."""
        for n in self.nodes:
            yield (), n
            if n.body is not None:
                for path, inner in n.body.walk():
                    yield (n.id, *path), inner

    def output_types(self) -> dict[str, TensorType]:
        """Types of the declared outputs (after shape inference)."""
        return {name: self.node(e.src).types[e.port] for name, e in self.outputs}

    @property
    def params(self) -> int:
        """Total parameter count (after shape inference)."""
        return sum(n.params for n in self.nodes)

    def __str__(self) -> str:
        from attngraph.ir.printer import dump

        return dump(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Notebook display: the first ``attngraph.display`` entry point, else the dump."""
        from importlib.metadata import entry_points

        bundle: dict[str, str] = {}
        for ep in entry_points(group="attngraph.display"):
            try:
                bundle = dict(ep.load()(self, include, exclude))
            except ImportError:
                continue
            break
        bundle.setdefault("text/plain", str(self))
        return bundle
