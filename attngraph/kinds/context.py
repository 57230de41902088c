"""What a kind's rules read about one node: :class:`NodeCtx` (any rule, the lowering's
``LowerCtx`` too) and :class:`RuleCtx` (shape rules). Re-exported by
:mod:`attngraph.kinds.base`, where a kind is defined."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, NoReturn

from attngraph.errors import AttnGraphError, ShapeError, did_you_mean
from attngraph.ir.graph import Dim, Edge, Graph, Node, TensorType

__all__ = ["NodeCtx", "RuleCtx", "ShapeRule"]


class NodeCtx:
    """What a rule may read about one node: its spec, its input edges and their types.

    The base of :class:`RuleCtx` (shape rules) and of the lowering's ``LowerCtx``;
    ``error`` is the error class its located failures raise.
    """

    error: type[AttnGraphError] = AttnGraphError

    def __init__(self, node: Node[Any], graph: Graph) -> None:
        self.node = node
        self.graph = graph

    @property
    def spec(self) -> Any:
        """The node's spec model (sizes resolved to integers)."""
        return self.node.spec

    def edge(self, role: str) -> Edge:
        """The input edge of ``role`` (a located error if missing)."""
        e = self.node.edge(role)
        if e is None:
            self.fail(f"missing field '{role}'", hint=f"add '{role}: <node>'")
        return e

    def reads(self, port: str) -> bool:
        """Whether a node of the graph, or one of its outputs, reads this node's
        ``port`` (``""``: the default one)."""
        nid = self.node.id
        edges = [e for n in self.graph.nodes for e in n.inputs]
        edges += [e for _, e in self.graph.outputs]
        return any(e.src == nid and e.port == port for e in edges)

    def has(self, role: str) -> bool:
        """Whether the node has an input edge for ``role``."""
        return self.node.edge(role) is not None

    def t(self, role: str) -> TensorType:
        """Type arriving on the edge of ``role`` (its source node's port)."""
        return self.type_of(self.edge(role))

    def type_of(self, e: Edge) -> TensorType:
        """Type arriving on edge ``e``."""
        return self.graph.node(e.src).types[e.port]

    def fixed(self, dim: Dim, what: str, role: str | None = None, hint: str | None = None,
              *, field: str | None = None) -> int:
        """``dim`` as a number: a size that weights or a layout depend on.

        A symbolic length (``N``, ``T``) is known only when a batch arrives, so
        it cannot size a weight: fail ``"<what> must be a fixed number, found the
        length N"`` at the edge of ``role`` (or ``field``, or the node).
        """
        if isinstance(dim, int):
            return dim
        self.fail(
            f"{what} must be a fixed number, found the length {dim}", role,
            hint or f"{dim} is a length, known only when a batch arrives, so it cannot size "
            "a weight: give this node features [..., d] (e.g. the readout of weights over "
            "items), not the scores or weights themselves",
            field=field,
        )

    def features(self, role: str) -> int:
        """The feature size (last axis) of the input of ``role``, a fixed number."""
        t = self.t(role)
        if t.rank == 0:
            self.fail(f"'{self.edge(role).ref}' is a scalar {t}, with no feature axis", role,
                      "give it a vector [d] or items [N, d]")
        return self.fixed(t.dims[-1], f"the feature size of '{role}'", role)

    def body(self) -> Graph:
        """The instantiated body of a block, repeat or loop node."""
        if self.node.body is None:
            self.fail(f"{self.node.kind} has no instantiated body (run shape inference first)")
        return self.node.body

    def fail(
        self, msg: str, role: str | None = None, hint: str | None = None, *,
        field: str | None = None,
    ) -> NoReturn:
        """Raise ``error`` at the edge of ``role``, the ``field``'s value, or the node."""
        e = self.node.edge(role) if role else None
        loc = e.loc if e is not None else self.node.where(field) if field else self.node.loc
        msg_0 = f"node '{self.node.id}': {msg}"
        raise self.error(msg_0, loc, hint)


class RuleCtx(NodeCtx):
    """What a shape rule may read: the node, its inputs' types, dims, blocks.

    ``done`` holds the nodes inferred so far; ``infer`` is the shape inference of a
    whole graph, given by the pass that runs the rules (block bodies are inferred
    with it; ``infer(graph, ids=...)``). ``ids`` bounds the token ids a block's
    inputs are bound to, when known: ids of input ``y`` are below ``ids["y"]``. A
    rule adds to ``params`` and may set ``body``.
    """

    error = ShapeError

    def __init__(self, node: Node[Any], graph: Graph, done: dict[str, Node[Any]],
                 infer: Callable[..., Graph], ids: Mapping[str, int] | None = None) -> None:
        super().__init__(node, graph)
        self.done = done
        self.infer = infer
        self.ids: Mapping[str, int] = ids or {}
        self.params = 0
        self.body_graph: Graph | None = None

    def src(self, role: str) -> Node[Any]:
        """The node the edge of ``role`` reads."""
        return self.done[self.edge(role).src]

    def type_of(self, e: Edge) -> TensorType:
        """Type arriving on edge ``e``; a located error for an unknown port."""
        src = self.done[e.src]
        if e.port not in src.types:
            ports = sorted(p for p in src.types if p)
            hint = did_you_mean(e.port, ports) if ports else f"'{e.src}' has no named ports"
            msg = f"node '{self.node.id}': '{e.src}' ({src.kind}) has no port '{e.port}'"
            raise ShapeError(msg, e.loc, hint)
        return src.types[e.port]

    def size(self, name: str) -> int | None:
        """A size field's value as an int, or None."""
        v = self.node.field(name)
        return int(v) if v is not None else None

    def need_rank(self, role: str, rank: int, what: str, hint: str | None = None) -> TensorType:
        """The input's type, which must have ``rank`` axes; else fail with
        ``"<what>, got <type>"`` at its edge."""
        t = self.t(role)
        if t.rank != rank:
            self.fail(f"{what}, got {t}", role, hint)
        return t

    def need_items(self, role: str, what: str) -> TensorType:
        """The input's type, which must be float ``[L, d]`` (a set of items)."""
        t = self.t(role)
        if t.dtype != "float" or t.rank != 2:
            self.fail(f"{what} needs items [N, d], but '{self.edge(role).ref}' is {t}", role,
                      "make items first, e.g. {kind: items, from: <input>}")
        return t

    def id_bound(self, e: Edge) -> int | None:
        """How many ids the value on edge ``e`` may take (ids are below it), if known:
        a tokens input's ``vocab``, a labels input's ``classes``, or what a block's
        input was bound to."""
        src = self.done[e.src]
        if not src.is_input or e.port:
            return None
        if src.spec is not None:
            # a labels input's ids are below its classes (a vocab written there as well
            # is ignored, as fields that do not apply to the type are)
            spec = src.spec
            bound = (spec.classes or spec.vocab) if spec.type == "labels" else \
                (spec.vocab or spec.classes)
            return int(bound) if bound is not None else None
        return self.ids.get(src.id)

    def infer_block(self, name: str, bound: dict[str, TensorType],
                    ids: Mapping[str, int] | None = None) -> Graph:
        """Instantiate block ``name`` with its inputs bound to ``bound`` types (and
        ``ids``: for inputs bound to token ids, how many ids they may take)."""
        tmpl = self.graph.blocks[name]
        missing = [n.id for n in tmpl.inputs if n.id not in bound]
        extra = sorted(set(bound) - {n.id for n in tmpl.inputs})
        if missing or extra:
            want = ", ".join(n.id for n in tmpl.inputs) or "none"
            self.fail(f"block '{name}' takes inputs ({want}); "
                      + (f"missing {', '.join(missing)}" if missing else
                         f"unknown {', '.join(extra)}"),
                      hint="bind each of its inputs once, under inputs:, carry: or feed:"
                      if _runs_steps(self.node) else "bind each of its inputs once: from: {"
                      + ", ".join(f"{n.id}: <node>" for n in tmpl.inputs) + "}")
        nodes = [replace(n, types={"": bound[n.id]}) if n.is_input else n for n in tmpl.nodes]
        sub = replace(tmpl, nodes=tuple(nodes), blocks=self.graph.blocks)
        try:
            return self.infer(sub, ids=ids or {})
        except AttnGraphError as exc:
            d = exc.diagnostics[0]
            msg = f"in block '{name}' (used by node '{self.node.id}'): {d.message}"
            raise ShapeError(msg, d.loc, d.hint) from None


#: A shape rule: ``rule(ctx) -> {port: type}``.
ShapeRule = Callable[[RuleCtx], dict[str, TensorType]]


def _runs_steps(node: Node[Any]) -> bool:
    """Whether ``node`` binds body inputs per step as well (its spec has ``carry:`` and
    ``feed:``, as a loop's, of :data:`~attngraph.kinds.base.BodyRun` ``steps``)."""
    fields = type(node.spec).model_fields if node.spec is not None else {}
    return "carry" in fields and "feed" in fields
