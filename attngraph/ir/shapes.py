"""``infer_shapes(graph) -> Graph``: symbolic shape inference, an ordinary pass.

Each kind's rule (``attngraph.kinds``) sees a :class:`RuleCtx` with the types of
its inputs and returns the types of its output ports; it may add to the node's
parameter count. A rule that finds a mismatch raises a located
:class:`~attngraph.errors.ShapeError`; inference goes on with the nodes that do
not depend on the failed one, and all problems are raised together.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NoReturn

from attngraph.errors import AttnGraphError, Diagnostic, ShapeError, did_you_mean
from attngraph.ir.graph import Dim, Edge, Graph, Node, TensorType

__all__ = ["infer_shapes", "output_types", "RuleCtx", "same_dim"]


def same_dim(a: Dim, b: Dim) -> bool:
    """True when two dims are known to be equal."""
    return a == b


class RuleCtx:
    """What a shape rule may read: the node, its inputs' types, dims, blocks."""

    def __init__(self, node: Node, graph: Graph, done: dict[str, Node]) -> None:
        self.node = node
        self.spec = node.spec
        self.graph = graph
        self.done = done
        self.params = 0
        self.body: Graph | None = None

    # reading inputs -------------------------------------------------------
    def edge(self, role: str) -> Edge:
        e = self.node.edge(role)
        if e is None:
            self.fail(f"missing field '{role}'")
        return e

    def has(self, role: str) -> bool:
        return self.node.edge(role) is not None

    def src(self, role: str) -> Node:
        return self.done[self.edge(role).src]

    def t(self, role: str) -> TensorType:
        """Type arriving on the edge of ``role`` (its source node's port)."""
        e = self.edge(role)
        return self.type_of(e)

    def type_of(self, e: Edge) -> TensorType:
        src = self.done[e.src]
        if e.port not in src.types:
            ports = sorted(p for p in src.types if p)
            hint = did_you_mean(e.port, ports) if ports else f"'{e.src}' has no named ports"
            msg = f"node '{self.node.id}': '{e.src}' ({src.kind}) has no port '{e.port}'"
            raise ShapeError(
                msg,
                e.loc, hint,
            )
        return src.types[e.port]

    def size(self, name: str) -> int | None:
        v = self.node.field(name)
        return int(v) if v is not None else None

    # reporting ------------------------------------------------------------
    def fail(
        self, msg: str, role: str | None = None, hint: str | None = None, *,
        field: str | None = None,
    ) -> NoReturn:
        """Raise a ShapeError at the edge of ``role``, the ``field``'s value, or the node."""
        e = self.node.edge(role) if role else None
        loc = e.loc if e is not None else self.node.where(field) if field else self.node.loc
        msg_0 = f"node '{self.node.id}': {msg}"
        raise ShapeError(msg_0, loc, hint)

    def need_items(self, role: str, what: str) -> TensorType:
        """The input's type, which must be float ``[L, d]`` (a set of items)."""
        t = self.t(role)
        if t.dtype != "float" or t.rank != 2:
            self.fail(f"{what} needs items [N, d], but '{self.edge(role).ref}' is {t}", role,
                      "make items first, e.g. {kind: items, from: <input>}")
        return t

    def infer_block(self, name: str, bound: dict[str, TensorType]) -> Graph:
        """Instantiate block ``name`` with its inputs bound to ``bound`` types."""
        tmpl = self.graph.blocks[name]
        missing = [n.id for n in tmpl.inputs if n.id not in bound]
        extra = sorted(set(bound) - {n.id for n in tmpl.inputs})
        if missing or extra:
            want = ", ".join(n.id for n in tmpl.inputs) or "none"
            self.fail(f"block '{name}' takes inputs ({want}); "
                      + (f"missing {', '.join(missing)}" if missing else
                         f"unknown {', '.join(extra)}"))
        nodes = [replace(n, types={"": bound[n.id]}) if n.is_input else n for n in tmpl.nodes]
        sub = replace(tmpl, nodes=tuple(nodes), blocks=self.graph.blocks)
        try:
            return infer_shapes(sub)
        except AttnGraphError as exc:
            d = exc.diagnostics[0]
            msg = f"in block '{name}' (used by node '{self.node.id}'): {d.message}"
            raise ShapeError(
                msg, d.loc, d.hint,
            ) from None


def _infer_node(node: Node, graph: Graph, done: dict[str, Node]) -> Node:
    from attngraph.kinds import SHAPES

    if node.is_input and node.types:
        return node
    rule = SHAPES.get(node.kind)
    if rule is None:
        msg = f"node '{node.id}': no shape rule for kind '{node.kind}'"
        raise ShapeError(msg, node.loc)
    ctx = RuleCtx(node, graph, done)
    types = rule(ctx)
    return replace(node, types=types, params=ctx.params, body=ctx.body)


def infer_shapes(graph: Graph) -> Graph:
    """Give every node its port types and parameter count.

    Parameters
    ----------
    graph : Graph
        A verified graph (see :func:`attngraph.ir.verify.verify`).

    Returns
    -------
    Graph
        The same graph with ``types``, ``params`` and instantiated ``body`` set.

    Raises
    ------
    ShapeError
        One diagnostic per node whose shapes do not fit (nodes downstream of a
        failed node are skipped, not reported again).
    """
    done: dict[str, Node] = {}
    failed: set[str] = set()
    diags: list[Diagnostic] = []
    for node in graph.order():
        if any(e.src in failed for e in node.inputs):
            failed.add(node.id)
            continue
        try:
            done[node.id] = _infer_node(node, graph, done)
        except AttnGraphError as exc:
            diags.extend(exc.diagnostics)
            failed.add(node.id)
    for name, e in graph.outputs:
        if e.src in done and e.port not in done[e.src].types:
            ports = sorted(p for p in done[e.src].types if p)
            diags.append(Diagnostic(
                e.loc, f"output '{name or 'output'}': '{e.src}' has no port '{e.port}'",
                did_you_mean(e.port, ports) if ports else None,
            ))
    if diags:
        raise ShapeError(diags[0].message, diagnostics=diags)
    return graph.replace_nodes([done[n.id] for n in graph.nodes])


def output_types(graph: Graph) -> dict[str, TensorType]:
    """Types of the declared outputs of an inferred graph."""
    out: dict[str, TensorType] = {}
    for name, e in graph.outputs:
        out[name] = graph.node(e.src).types[e.port]
    return out
