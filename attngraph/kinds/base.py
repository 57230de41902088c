"""What a node kind is: one :class:`Kind` per kind, in the :data:`KINDS` registry.

A kind is defined in one place, by one call of :func:`kind` on its shape rule::

    @kind("glimpse", GlimpseSpec, lowering="attngraph.lower.rules.glimpse:GlimpseNode",
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

The analysis traits say what a node of the kind means, so that the passes, the
analyses (``describe``, ``diff``), the renderers and the pictures read them, never a
kind's name, and a package's kind that declares one is treated as the built-in
kinds that do: ``body`` (how a structure kind runs its block: ``once``, ``each``
element, ``rounds``, ``steps``), ``passthrough`` (its value is its input's: dropout),
``sums`` (its value sums its inputs: add, a position bias), ``positions`` (how it
brings in positions: ``vectors``, ``bias``, ``rotary``), ``samples`` (it samples its
weights: hard attention), ``addresses`` (it makes weights from content weights:
NTM addressing), ``table`` (a lookup table a linear may tie to), ``phrase`` (how a
traced origin names it), ``site`` (its own attention site), ``picture`` (the
attention picture that draws it) and ``part`` (its work is a part of another node's,
with that node's parameters: an additive score's keys prepared before a loop's
steps). :func:`traits_of` gives a node's kind, or a kind of no traits for an unknown
one.

One trait serves generation's key/value cache (:mod:`attngraph.lower.decode.cache`):
``step``, how a node runs when the target gains one position (a :data:`StepTrait`).
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from attngraph.errors import RegistryError
from attngraph.ir.graph import Graph, Node, TensorType
from attngraph.kinds.context import NodeCtx, RuleCtx, ShapeRule
from attngraph.kinds.work import (
    Bound,
    MagnitudeCtx,
    MagnitudeRule,
    Work,
    WorkCtx,
    WorkRule,
    dense_work,
    elementwise_work,
    no_work,
)
from attngraph.registry import Registry
from attngraph.spec.models import Model

__all__ = [
    "Kind", "KINDS", "Style", "NodeCtx", "RuleCtx", "ShapeRule", "KindRole", "kind",
    "DEFAULT_STYLE", "spec_kinds", "Bound", "Work", "WorkCtx", "WorkRule", "dense_work",
    "elementwise_work", "no_work", "HoistRule", "FIXED_IMAGE", "MagnitudeCtx", "MagnitudeRule",
    "BodyRun", "Positions", "StepTrait", "TableRule", "traits_of",
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


#: ``rule(node, graph) -> (role, type) | None``: the input (role) the node can
#: prepare alone, with its own parameters, and the type of the prepared value.
HoistRule = Callable[[Node[Any], Graph], "tuple[str, TensorType] | None"]

#: How a structure kind runs its block's body: ``once`` (a block), ``each`` element of
#: its inputs' first axis alone (a map), ``rounds`` (a repeat: ``times`` rounds, each
#: feeding the next; its spec says ``times`` and ``share``), ``steps`` (a loop: once
#: per step, state carried from step to step; its spec says ``carry`` and ``feed``,
#: its outputs are ``[T, ...]``).
BodyRun = Literal["once", "each", "rounds", "steps"]

#: How a kind brings positions in: ``vectors`` (vectors of the positions of its
#: ``from``, which it reads only for its length), ``bias`` (a relative position bias
#: added to the scores it reads; its spec's ``fn`` names it), ``rotary`` (rotates a
#: query or key by its position, RoPE).
Positions = Literal["vectors", "bias", "rotary"]

#: How a kind runs when a decoder's target gains one position (the key/value cache,
#: :mod:`attngraph.lower.decode.cache`): ``pointwise`` (each position alone),
#: ``indexed`` (each position alone and its index), ``relative`` (scores [T, T] plus a
#: bias of the relative position j - i alone: ALiBi, T5), ``rounds`` (a repeat's
#: rounds, each with its own cache), ``body`` (a block's body).
StepTrait = Literal["pointwise", "indexed", "relative", "rounds", "body"]

#: ``rule(node) -> (vocab, d) | None``: the lookup table of ids a linear may tie its
#: weight to (``tie:``), None when this node holds none.
TableRule = Callable[[Node[Any]], "tuple[int, int] | None"]


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
    #: :mod:`attngraph.lower.export.emit`); None: its lowering class is copied instead
    emit: str | Callable[..., Any] | None = None
    #: how a structure kind runs its block's body (:data:`BodyRun`); None: no body
    body: BodyRun | None = None
    #: its value is its one input's, up to noise the analyses look through (dropout)
    passthrough: bool = False
    #: its value is the sum of its inputs: scores reach the weights through it (the
    #: lowering ``add`` and ``mul`` share sums the inputs of such a kind, else multiplies)
    sums: bool = False
    #: how it brings positions in (:data:`Positions`), or None
    positions: Positions | None = None
    #: it samples its weights (hard attention); its spec says ``dist`` and ``estimator``
    samples: bool = False
    #: it makes weights over slots from the content weights on its ``content`` edge,
    #: interpolated with the previous ones, shifted and sharpened (NTM addressing)
    addresses: bool = False
    #: the lookup table a linear may tie its weight to (a :data:`TableRule`), or None
    table: TableRule | None = None
    #: how a query's or key's origin traced through it names it ("a linear
    #: projection"); None: it stays silent (queries, keys, values, norms)
    phrase: str | None = None
    #: the attention site it is, for ``describe``: ``(Scope, Node) -> Site`` or a lazy
    #: ``"module:attribute"`` (see :mod:`attngraph.analysis.sensor_sites`); None: its
    #: role says (a readout, weights no readout reads)
    site: str | Callable[..., Any] | None = None
    #: the attention picture (``attend``) that draws it: ``glimpses`` (patches of its
    #: spec's ``size`` at the locations), ``window`` (its ``weights`` port over time)
    picture: str | None = None
    #: its work is a part of the work of the node its spec's ``of`` names, with that
    #: node's parameters (a ``prepare`` the hoisting pass makes): it is lowered just
    #: before that node, its module is bound to that node's (``bind(owner)``), and
    #: that node reads its value in place of the input it prepares
    part: bool = False
    #: how it runs when the target gains one position (:data:`StepTrait`); None: the
    #: cache asks :data:`attngraph.lower.decode.cache.STEP_TRAITS` (a plugin's kind)
    step: StepTrait | None = None

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
         emit: str | Callable[..., Any] | None = None,
         body: BodyRun | None = None, passthrough: bool = False, sums: bool = False,
         positions: Positions | None = None, samples: bool = False, addresses: bool = False,
         table: TableRule | None = None, phrase: str | None = None,
         site: str | Callable[..., Any] | None = None,
         picture: str | None = None, part: bool = False,
         step: StepTrait | None = None) -> Callable[[ShapeRule], Kind[SpecT]]:
    """Define and register kind ``name`` whose shape rule is the decorated function.

    The keywords are the :class:`Kind`'s fields (see there). Returns the
    :class:`Kind` (so the module-level name refers to the definition).
    """

    tag = spec.model_fields.get("kind")
    if role != "input" and (tag is None or typing.get_args(tag.annotation) != (name,)):
        msg = f"kind '{name}': its model {spec.__name__} does not say kind: Literal['{name}']"
        raise RegistryError(msg, hint=f'add  kind: Literal["{name}"]  to {spec.__name__}')

    def deco(rule: ShapeRule) -> Kind[SpecT]:
        k = Kind(name, spec, rule, lowering=lowering, role=role, style=style,
                 transparent=transparent, internal=internal, work=work, pure=pure, hoist=hoist,
                 magnitude=magnitude, emit=emit, body=body, passthrough=passthrough, sums=sums,
                 positions=positions, samples=samples, addresses=addresses, table=table,
                 phrase=phrase, site=site, picture=picture, part=part, step=step)
        KINDS.register(name, k)
        return k

    return deco


def _no_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Nothing: the kind of a node no kind defines."""
    return {}


#: What :func:`traits_of` gives for a name no kind has: every trait at its default.
_UNKNOWN: Kind[Any] = Kind("", Model, _no_shape)


def traits_of(node: Node[Any] | str) -> Kind[Any]:
    """The :class:`Kind` of ``node`` (or of a kind name), whose traits the passes, the
    analyses and the renderers read; for a name no kind has (an origin's tag such as
    ``carry``), a kind with every trait at its default."""
    name = node if isinstance(node, str) else node.kind
    return KINDS.get(name) or _UNKNOWN
