"""What a node kind is: one :class:`Kind` per kind, in the :data:`KINDS` registry.

A kind is defined in one place, by one call of :func:`kind` on its shape rule::

    @kind("glimpse", GlimpseSpec, lowering="attngraph.lower.glimpse:GlimpseNode",
          role="sensor", style=Style("#f9cb9c", "box"))
    def glimpse_shape(ctx: RuleCtx) -> dict[str, TensorType]:
        ...

which holds its spec model (validation and the JSON Schema read it; which fields
are sizes and references is derived from it), its shape rule, its lowering (a
callable ``(LowerCtx) -> nn.Module``, or a lazy ``"module:attribute"`` reference
so that nothing imports torch before a spec is compiled) and the traits the
renderers and ``describe`` read: its *role* in a mechanism, its diagram style,
and whether tracing a query or key back to its origin passes through it.

The built-in kinds live in one module per family (``attention``, ``scorers``,
``hard``, ``glimpse``, ``memory``, ``rnn``, ``structure``, ``support``,
``inputs``); their lowerings in the module of the same name under
:mod:`attngraph.lower`. A user's package defines a kind the same way.

A shape rule gets a :class:`RuleCtx` and returns ``{port: TensorType}`` (``""`` is
the default port); it may add to ``ctx.params`` and fail with ``ctx.fail``.

A kind may also say what one run of a node costs (``work=``, a :data:`WorkRule`):
multiply-adds and the largest tensor it makes inside, per example, at given
lengths. The resource guard (:mod:`attngraph.analysis.sizes`) reads it; without
one, a node costs its parameters once per position of its output (a dense layer).

Two traits serve the loop hoisting pass (:mod:`attngraph.passes.hoist`): ``pure``
says the same inputs give the same outputs, each example of the batch on its own,
with nothing else touched (no sampling, nothing put in ``rt.aux``), so that a node
whose inputs do not change from step to step may run once before a loop's steps,
and one no carried state depends on once after them, on every step's values as one
batch (a callable ``(node) -> bool`` when it depends on the node's settings; a kind
that samples, or mixes the rows of a batch, says ``pure=False``); ``hoist`` names
the one input a node can prepare alone with its own parameters (an additive score's
keys, ``U k``) and the type of the prepared value: a :data:`HoistRule`.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, NoReturn, TypeVar

from attngraph.errors import AttnGraphError, RegistryError, ShapeError, did_you_mean
from attngraph.ir.graph import Dim, Edge, Graph, Node, TensorType
from attngraph.registry import Registry
from attngraph.spec.models import Model

__all__ = [
    "Kind", "KINDS", "Style", "NodeCtx", "RuleCtx", "ShapeRule", "KindRole", "kind",
    "DEFAULT_STYLE", "spec_kinds", "Bound", "Work", "WorkCtx", "WorkRule", "dense_work",
    "elementwise_work", "no_work", "HoistRule", "FIXED_IMAGE", "MagnitudeCtx", "MagnitudeRule",
]

SpecT = TypeVar("SpecT", bound=Model)

#: The hint of an image size that is a length (``fixed``'s default speaks of weights):
#: what makes an image of fixed sizes.
FIXED_IMAGE = ("an image has three fixed sizes [C, H, W]: give it an image input {type: image, "
               "height: H, width: W}, a conv of one, or to_image of items made from one")

#: What a kind does in an attention mechanism (read by the renderers and describe):
#: ``items`` makes items; ``projection`` queries, keys or values; ``scorer`` scores;
#: ``weights`` normalises scores into weights (softmax, policy); ``readout`` reads
#: values with weights; ``attention`` the fused scorer-softmax-readout; ``sensor``
#: crops an input where it looks (glimpse); ``memory`` holds or addresses slots;
#: ``recurrent`` carries state over items; ``structure`` instantiates a block body;
#: ``support`` everything else (linear layers, norms, sums).
KindRole = Literal["input", "items", "projection", "scorer", "weights", "readout",
                   "attention", "sensor", "memory", "recurrent", "structure", "support"]


@dataclass(frozen=True)
class Style:
    """How the architecture view draws a kind: fill colour and Graphviz shape."""

    fill: str = "#ffffff"
    shape: str = "box"


DEFAULT_STYLE = Style()


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
                      if self.node.kind == "loop" else "bind each of its inputs once: from: {"
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


@dataclass(frozen=True)
class Work:
    """What one run of a node costs for one example: ``macs`` multiply-adds;
    ``inner``, the elements of the largest tensor it makes besides its outputs
    (the ``(M, N, hidden)`` sum of an additive scorer over all pairs, an mlp's
    hidden layer); ``kept``, the elements of all such tensors together (what the
    backward pass keeps; default ``inner``)."""

    macs: int = 0
    inner: int = 0
    kept: int | None = None


@dataclass(frozen=True)
class Bound:
    """A length that a node caps: ``symbol`` is at most ``most`` (its ``field`` says so)."""

    symbol: str
    most: int
    node: Node[Any]
    field: str


class WorkCtx(NodeCtx):
    """What a work rule may read: an inferred node, its inputs' types, and ``n(dim)``,
    the size of a dimension at the lengths the guard assumes. A rule whose node
    holds a table over positions says how long a length may be with :meth:`at_most`."""

    def __init__(self, node: Node[Any], graph: Graph, length: Callable[[str], int]) -> None:
        super().__init__(node, graph)
        self.length = length
        self.bounds: list[Bound] = []

    def at_most(self, dim: Dim, most: int, field: str) -> None:
        """Record that the length ``dim`` (if symbolic) is at most ``most``."""
        if isinstance(dim, str):
            self.bounds.append(Bound(dim, most, self.node, field))

    def n(self, dim: Dim) -> int:
        """A dimension's size: its number, or the assumed size of its length."""
        return dim if isinstance(dim, int) else self.length(dim)

    def elements(self, t: TensorType) -> int:
        """Elements of one example's value of type ``t`` (heads included)."""
        return (t.heads or 1) * math.prod(self.n(d) for d in t.dims)

    def positions(self, t: TensorType) -> int:
        """How many feature vectors a value of type ``t`` holds (all but its last axis)."""
        return (t.heads or 1) * math.prod(self.n(d) for d in t.dims[:-1])

    def out(self) -> TensorType:
        """The node's default output type."""
        return self.node.types[""]


#: A work rule: ``rule(ctx) -> Work`` for one run of a node.
WorkRule = Callable[[WorkCtx], Work]

@dataclass(frozen=True)
class MagnitudeCtx:
    """What a magnitude rule reads: the node, the magnitudes of its inputs (one per
    input edge, in order, by role in ``by_role``), their types, and ``n(dim)``, the
    size of a dimension at the lengths the guard assumes."""

    node: Node[Any]
    ins: tuple[float, ...]
    by_role: Mapping[str, float]
    in_types: tuple[TensorType, ...]
    n: Callable[[Dim], int]

    def most(self) -> float:
        """The largest input magnitude (1 for a node without inputs)."""
        return max(self.ins, default=1.0)


#: ``rule(ctx) -> float``: how large the node's output values can grow, given its
#: inputs' (the numerics guard, :mod:`attngraph.analysis.magnitude`); None: the
#: largest input's (a node that mixes or selects its inputs without amplifying them).
MagnitudeRule = Callable[[MagnitudeCtx], float]

#: ``rule(node, graph) -> (role, type) | None``: the input (role) the node can
#: prepare alone, with its own parameters, and the type of the prepared value.
HoistRule = Callable[[Node[Any], Graph], "tuple[str, TensorType] | None"]


def dense_work(ctx: WorkCtx) -> Work:
    """Each parameter used once per output position (linear layers, rnn), plus a few
    operations per output element."""
    out = ctx.out()
    return Work(ctx.node.params * ctx.positions(out) + ctx.elements(out))


def elementwise_work(ctx: WorkCtx) -> Work:
    """A few operations per output element, whatever the parameters (lookups, sums)."""
    return Work(ctx.elements(ctx.out()))


def no_work(ctx: WorkCtx) -> Work:
    """Nothing of its own (an input; a block, repeat or loop, whose body the guard counts)."""
    return Work()


@dataclass(frozen=True)
class Kind(Generic[SpecT]):
    """Everything attngraph knows about one node kind (see the module docstring)."""

    name: str
    spec: type[SpecT]
    shape: ShapeRule
    lowering: str | Callable[..., Any] | None = None
    role: KindRole = "support"
    style: Style = field(default=DEFAULT_STYLE)
    #: tracing where a query or key comes from passes through this kind
    transparent: bool = False
    #: made by a pass, never written in a spec (not in the schema or validation)
    internal: bool = False
    #: what one run costs (the resource guard); None: :func:`dense_work`
    work: WorkRule | None = None
    #: the same inputs give the same outputs and nothing else is touched (see above)
    pure: bool | Callable[[Node[Any]], bool] = True
    #: the input the node can prepare alone (see above), or None
    hoist: HoistRule | None = None
    #: how its output's magnitude follows its inputs' (the numerics guard), or None
    magnitude: MagnitudeRule | None = None
    #: how ``--format python`` writes a node as plain PyTorch (a callable
    #: ``(EmitCtx) -> bool`` or a lazy ``"module:attribute"``, see
    #: :mod:`attngraph.lower.emit`); None: its lowering class is copied instead
    emit: str | Callable[..., Any] | None = None

    def is_pure(self, node: Node[Any]) -> bool:
        """Whether this node may run once for many uses (see ``pure``)."""
        return self.pure(node) if callable(self.pure) else self.pure

    @property
    def doc(self) -> str:
        """First line of the shape rule's docstring: what the kind computes."""
        return (self.shape.__doc__ or "").strip().splitlines()[0] if self.shape.__doc__ else ""


#: Every node kind by name (graph inputs are kind ``input``).
KINDS: Registry[Kind[Any]] = Registry("node kind")


def spec_kinds() -> dict[str, type[Model]]:
    """The models of the kinds a spec may write under ``nodes:`` (by kind name)."""
    return {name: k.spec for name, k in KINDS.items() if k.role != "input" and not k.internal}


def kind(name: str, spec: type[SpecT], *, lowering: str | Callable[..., Any] | None = None,
         role: KindRole = "support", style: Style = DEFAULT_STYLE,
         transparent: bool = False, internal: bool = False, work: WorkRule | None = None,
         pure: bool | Callable[[Node[Any]], bool] = True, hoist: HoistRule | None = None,
         magnitude: MagnitudeRule | None = None,
         emit: str | Callable[..., Any] | None = None) -> Callable[[ShapeRule], Kind[SpecT]]:
    """Define and register kind ``name`` whose shape rule is the decorated function.

    Returns the :class:`Kind` (so the module-level name refers to the definition).
    """

    tag = spec.model_fields.get("kind")
    if role != "input" and (tag is None or typing.get_args(tag.annotation) != (name,)):
        msg = f"kind '{name}': its model {spec.__name__} does not say kind: Literal['{name}']"
        raise RegistryError(msg, hint=f'add  kind: Literal["{name}"]  to {spec.__name__}')

    def deco(rule: ShapeRule) -> Kind[SpecT]:
        k = Kind(name, spec, rule, lowering, role, style, transparent, internal, work, pure,
                 hoist, magnitude, emit)
        KINDS.register(name, k)
        return k

    return deco
