"""The one IR: a graph of frozen nodes at the level of the spec's own kinds.

Renderers, ``describe``, ``diff`` and the lowering all read this. ``str(graph)`` is
a stable one-line-per-node dump used as golden text in tests.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from attngraph.errors import SourceLoc

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["Dim", "TensorType", "Edge", "Node", "Graph", "INPUT", "fmt_dim"]

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
    ``simplex`` marks weights that sum to one over their last axis.
    """

    dims: tuple[Dim, ...]
    heads: int | None = None
    dtype: Literal["float", "long", "bool"] = "float"
    simplex: bool = False

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
class Edge:
    """One input of a node: which field (``role``) reads which node's port."""

    role: str
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


@dataclass(frozen=True)
class Node:
    """A node of the IR.

    ``spec`` is the node's own pydantic model (sizes resolved to integers);
    ``types`` maps each output port (``""`` is the default) to its type, filled
    by shape inference; ``body`` is the instantiated subgraph of a block, repeat
    or loop; ``params`` is the parameter count from shape inference; ``loc`` is
    the position of the node's mapping and ``field_locs`` that of each field.
    """

    id: str
    kind: str
    spec: Any
    inputs: tuple[Edge, ...] = ()
    loc: SourceLoc = field(default_factory=SourceLoc, compare=False)
    label: str = ""
    types: Mapping[str, TensorType] = field(default_factory=dict)
    body: Graph | None = None
    params: int = 0
    field_locs: Mapping[str, SourceLoc] = field(default_factory=dict, compare=False, repr=False)

    def where(self, name: str) -> SourceLoc:
        """Position of a spec field's value, else of the node."""
        return self.field_locs.get(name, self.loc)

    def type(self, port: str = "") -> TensorType:
        """Type of an output port (``""`` is the default port)."""
        return self.types[port]

    def edge(self, role: str) -> Edge | None:
        """The input edge for a field, or ``None``."""
        for e in self.inputs:
            if e.role == role:
                return e
        return None

    def edges(self, prefix: str) -> list[Edge]:
        """Input edges whose role is ``prefix`` or starts with ``prefix.``."""
        return [e for e in self.inputs if e.role == prefix or e.role.startswith(prefix + ".")]

    def field(self, name: str, default: Any = None) -> Any:
        """A spec field's value (``from`` for the ``from_`` field)."""
        return getattr(self.spec, "from_" if name == "from" else name, default)

    @property
    def is_input(self) -> bool:
        """True for graph (and block) inputs."""
        return self.kind == INPUT

    def describe_fields(self) -> str:
        """Non-default, non-reference fields as ``k=v`` text, for dumps."""
        if self.spec is None:
            return ""
        skip = {"kind", "label", "note", "from_", "query", "key", "scores", "weights",
                "values", "mean", "image", "loc", "memory", "erase", "add", "content",
                "prev", "control", "inputs", "carry", "feed", "init", "steps"}
        parts = []
        for name, info in type(self.spec).model_fields.items():
            if name in skip:
                continue
            v = getattr(self.spec, name)
            if v == info.default or v is None:
                continue
            if hasattr(v, "model_dump"):
                v = dict(v.model_dump(exclude_defaults=True).items())
            parts.append(f"{info.alias or name}={v}")
        q = getattr(self.spec, "query", None)
        if q is not None and hasattr(q, "learned"):
            parts.insert(0, f"query=learned[{q.learned}]")
        return ", ".join(parts)


@dataclass(frozen=True)
class Graph:
    """A spec (or a block body) as nodes in author order, with named outputs."""

    name: str
    nodes: tuple[Node, ...]
    outputs: tuple[tuple[str, Edge], ...]
    dims: Mapping[str, int] = field(default_factory=dict)
    file: str = "<spec>"
    title: str | None = None
    summary: str | None = None
    block: str | None = None
    train: Any = None
    blocks: Mapping[str, Graph] = field(default_factory=dict, repr=False)

    @functools.cached_property
    def _index(self) -> dict[str, Node]:
        return {n.id: n for n in self.nodes}

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes)

    def __contains__(self, nid: object) -> bool:
        return nid in self._index

    def node(self, nid: str) -> Node:
        """The node with id ``nid``."""
        return self._index[nid]

    @property
    def inputs(self) -> list[Node]:
        """Input nodes, in author order."""
        return [n for n in self.nodes if n.is_input]

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
                g.add_edge(e.src, n.id, role=e.role, port=e.port, detach=e.detach)
        return g

    def order(self) -> list[Node]:
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
        out: list[Node] = []
        while ts.is_active():
            ready = sorted(ts.get_ready(), key=pos.__getitem__)
            for nid in ready:
                out.append(self._index[nid])
                ts.done(nid)
        return out

    def replace_nodes(self, nodes: list[Node] | tuple[Node, ...]) -> Graph:
        """A copy of this graph with other nodes."""
        return replace(self, nodes=tuple(nodes))

    def walk(self) -> Iterator[tuple[tuple[str, ...], Node]]:
        """Every node with its path of enclosing block/repeat/loop node ids."""
        for n in self.nodes:
            yield (), n
            if n.body is not None:
                for path, inner in n.body.walk():
                    yield (n.id, *path), inner

    @property
    def params(self) -> int:
        """Total parameter count (after shape inference)."""
        return sum(n.params for n in self.nodes)

    def __str__(self) -> str:
        return "\n".join(self._dump(""))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Notebook display: the architecture diagram (renderers are loaded on demand)."""
        try:
            from renderers import show
        except ImportError:  # renderers not installed: show the IR dump
            return {"text/plain": str(self)}
        bundle = show(self)._repr_mimebundle_(include, exclude)
        bundle.setdefault("text/plain", str(self))
        return bundle

    def _dump(self, indent: str) -> list[str]:
        head = f"{indent}graph {self.name}" + (f" (block {self.block})" if self.block else "")
        lines = [head + ":"]
        for n in self.nodes:
            args = ", ".join(f"{e.role}={e}" for e in n.inputs)
            fields = n.describe_fields()
            inner = ", ".join(x for x in (fields, args) if x)
            ports = "; ".join(
                (f"{p}: " if p else "") + str(t) for p, t in n.types.items() if p != "out"
            )
            line = f"{indent}  %{n.id} = {n.kind}({inner})"
            if ports:
                line += f" : {ports}"
            if n.loc.line:
                line += f"  @{n.loc.line}:{n.loc.col}"
            lines.append(line)
            if n.body is not None:
                lines.extend(n.body._dump(indent + "    "))
        outs = ", ".join(f"{k}={e}" for k, e in self.outputs)
        lines.append(f"{indent}  return {outs}")
        return lines
