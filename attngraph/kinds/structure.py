"""Structure: ``block``, ``repeat`` and ``loop`` instantiate a block's body.

A loop runs its body once per step: ``carry`` entries are state passed from one
step to the next, ``feed`` entries give the body one element per step (teacher
forcing) or the previous step's prediction. Lowered in :mod:`attngraph.lower.rules.structure`;
the loop's shape rule is in :mod:`attngraph.kinds.loop`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Literal

from pydantic import Field

from attngraph.errors import did_you_mean
from attngraph.ir.graph import Edge, Graph, TensorType
from attngraph.kinds.base import RuleCtx, Style, kind, no_work
from attngraph.spec.models import SIZE, BlockName, Ident, Model, NodeModel, PosInt, Ref, Size


class BlockUseSpec(NodeModel):
    """One use of a block, its inputs bound by ``from``."""

    kind: Literal["block"]
    block: BlockName
    """The block to use, defined under ``blocks:``."""
    from_: Ref | dict[Ident, Ref] = Field(alias="from")
    """What the block's inputs are bound to: one reference for a one-input block, else a mapping
    from each of its inputs to a reference."""


class MapSpec(NodeModel):
    """A block run on each element of its inputs' first axis alone (each sentence of a
    document), the results stacked on that axis."""

    kind: Literal["map"]
    block: BlockName
    """The block to run on each element, defined under ``blocks:``."""
    from_: Ref | dict[Ident, Ref] = Field(alias="from")
    """Values ``[N, ...]`` with at least two axes, all of one first axis N (nested tokens, items of
    items); the block sees ``[...]``. One reference for a one-input block, else a mapping from each
    of its inputs to a reference."""


class RepeatSpec(NodeModel):
    """``times`` rounds of a block, each feeding the next (its first output to its first
    input; its other inputs the same in every round); the block's other named outputs are
    stacked over the rounds, as ports ``[times, ...]``."""

    kind: Literal["repeat"]
    block: BlockName
    """The block each round runs, defined under ``blocks:``."""
    times: Annotated[Annotated[int, Field(ge=1, le=1024)] | Ident, SIZE]
    """Number of rounds: a number or a dims name."""
    from_: Ref = Field(alias="from")
    """The first round's input; each round feeds the next."""
    inputs: dict[Ident, Ref] = Field(default_factory=dict)
    """The block's other inputs, the same value in every round (the encoder's states that
    each decoder layer reads, a position bias the layers share): a reference by block input."""
    # a repeat's own share: between its rounds, not with another node
    share: bool = False  # type: ignore[assignment]
    """All rounds share one set of parameters (otherwise each round has its own); a repeat's own
    ``share``, between its rounds."""


class CarrySpec(Model):
    """Carried loop state: starts from ``init``, then takes body output ``next``."""

    init: Ref | None = None
    """The initial state: a reference (or give ``zeros``, ``zeros_over``, ``onehot`` or
    ``zeros_like``)."""
    zeros: Size | None = None
    """Start from a zero vector of this size instead; a size."""
    onehot: Size | None = None
    """Start from the one-hot vector of this size with its 1 first: weights over slots focused on
    slot 0, as an NTM head's location addressing needs (a shift moves focused weights; uniform or
    zero weights stay uniform); a size."""
    zeros_over: Ref | None = None
    """Start from zeros ``[N]``, one per item of this reference (N its first axis, a length known
    only at run time): a coverage or the previous alignment."""
    zeros_like: Ref | None = None
    """Start from zeros of this reference's type (any float shape, e.g. an empty canvas shaped
    like the image it will draw)."""
    next: Ident
    """The body output that becomes the state at the next step."""


class FeedSpec(Model):
    """Per-step input: ``from``[t] (teacher forcing) or the previous step's output."""

    from_: Ref | None = Field(default=None, alias="from")
    """A sequence ``[T, ...]`` whose first axis is the step axis (as long as ``steps``): step t
    reads ``from[t]``; with ``feedback``, the target ids ``long[T]``."""
    feedback: Ident | None = None
    """A body output, logits ``[V]``: the feed becomes the previous token of a decoder (the argmax
    of that output at the step before, or the target when teacher forcing)."""
    start: Annotated[int, Field(ge=0, le=1_000_000_000)] = 0
    """feedback: the id read at step 0 (the start-of-sequence id), below the feedback logits' size.
    """
    teacher_forcing: bool = True
    """With ``from`` and ``feedback``: read the targets in training mode; false feeds back always.
    """


class LoopSpec(NodeModel):
    """A block run once per step, with carried state and per-step inputs."""

    kind: Literal["loop"]
    body: BlockName
    """The block run at each step, defined under ``blocks:``."""
    steps: PosInt | Ref
    """The number of steps T: a positive integer; the name of an entry of ``dims`` (that many
    steps); or a reference to a node or input (``node`` or ``node.port``), one step per item of its
    first axis (e.g. the target tokens: T steps). A name that is both a dims entry and a node is
    an error."""
    inputs: dict[Ident, Ref] = Field(default_factory=dict)
    """Body inputs that get the same value at every step (e.g. the encoder states): a reference by
    body input."""
    carry: dict[Ident, CarrySpec] = Field(default_factory=dict)
    """Body inputs carried from step to step (keeping shape, heads and dtype): how each starts and
    which body output it becomes next."""
    feed: dict[Ident, FeedSpec] = Field(default_factory=dict)
    """Body inputs that get one element per step: a sequence's step t, or the previous step's
    output."""


def _ids(ctx: RuleCtx, edges: dict[str, Edge]) -> dict[str, int]:
    """How many ids each block input bound to token ids may take, where known."""
    out: dict[str, int] = {}
    for name, e in edges.items():
        n = ctx.id_bound(e)
        if n is not None:
            out[name] = n
    return out


def _ports(body: Graph) -> dict[str, TensorType]:
    outs = body.output_types()
    if "" in outs:
        return {"": outs[""]}
    first = next(iter(outs.values()))
    return {"": first, **outs}


@kind("block", BlockUseSpec, lowering="attngraph.lower.rules.structure:Block",
      emit="attngraph.lower.export.emit.structure:emit_block", role="structure",
      style=Style("#ffffff", "box"), work=no_work, body="once", step="body")
def block_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """The block's output(s), with its inputs bound to ``from``."""
    name = ctx.spec.block
    edges = _bound_edges(ctx, name)
    bound = {k: ctx.type_of(e) for k, e in edges.items()}
    body = ctx.infer_block(name, bound, _ids(ctx, edges))
    ctx.body_graph = body
    ctx.params += body.params
    return _ports(body)


def _bound_edges(ctx: RuleCtx, name: str) -> dict[str, Edge]:
    """The body input each edge of ``from`` binds (a mapping, or the single input)."""
    names = [n.id for n in ctx.graph.blocks[name].inputs]
    if isinstance(ctx.spec.from_, dict):
        return {str(e.role.key): e for e in ctx.node.edges("from")}
    if len(names) != 1:
        ctx.fail(f"block '{name}' takes inputs ({', '.join(names)}); give from as a "
                 "mapping", "from", "from: {" + ", ".join(f"{n}: <node>" for n in names) + "}")
    return {names[0]: ctx.edge("from")}


@kind("map", MapSpec, lowering="attngraph.lower.rules.structure:Map", role="structure",
      emit="attngraph.lower.export.emit.structure:emit_map",
      style=Style("#ffffff", "box3d"), work=no_work, body="each")
def map_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Each input [S, ...] is bound to the body as [...] (one element, e.g. a sentence of
    words [W]); the body's outputs [...] come back as [S, ...]."""
    name = ctx.spec.block
    edges = _bound_edges(ctx, name)
    bound: dict[str, TensorType] = {}
    lead: Any = None
    for k, e in edges.items():
        t = ctx.type_of(e)
        role = str(e.role)
        if t.rank < 2 or t.heads:
            ctx.fail(f"map runs the block on each element of the first axis, so '{e.ref}' "
                     f"needs items of items ([S, W] or [S, W, d]), got {t}", role,
                     "map over nested tokens (type: tokens, nested: true) or over items of "
                     "items; a plain [N, d] goes to a block as it is")
        if lead is not None and t.dims[0] != lead:
            ctx.fail(f"map's inputs share their first axis, but '{e.ref}' has {t.dims[0]} "
                     f"and another {lead}", role, "map inputs of one length")
        lead = t.dims[0]
        bound[k] = replace(t, dims=t.dims[1:])
    body = ctx.infer_block(name, bound, _ids(ctx, edges))
    ctx.body_graph = body
    ctx.params += body.params
    ports = {}
    for port, t in _ports(body).items():
        if t.heads:
            ctx.fail(f"block '{name}' returns {t} with heads; map stacks results per element",
                     hint="merge heads in the block's readout")
        ports[port] = replace(t, dims=(lead, *t.dims))
    return ports


@kind("repeat", RepeatSpec, lowering="attngraph.lower.rules.structure:Repeat",
      emit="attngraph.lower.export.emit.structure:emit_repeat", role="structure",
      style=Style("#ffffff", "box3d"), work=no_work, body="rounds", step="rounds")
def repeat_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """K rounds of a block whose (first) output has its (first) input's type, its other
    inputs bound under ``inputs`` to one value for every round; each further named
    output is stacked over the rounds, ``[K, ...]`` (every layer's attention weights,
    say)."""
    name = ctx.spec.block
    tmpl = ctx.graph.blocks[name]
    fixed = {str(e.role.key): e for e in ctx.node.edges("inputs")}
    if tmpl.inputs and tmpl.inputs[0].id in fixed:
        ctx.fail(f"'{tmpl.inputs[0].id}' is the input each round feeds (the block's first); "
                 "it cannot be bound under inputs: too", field="inputs",
                 hint="list the round's input first among the block's inputs")
    if len(tmpl.inputs) != 1 + len(fixed) or not tmpl.outputs:
        ctx.fail(f"repeat stacks a block whose first input each round feeds, its others bound "
                 f"under inputs: ({len(fixed)} here); '{name}' has {len(tmpl.inputs)} inputs "
                 f"and {len(tmpl.outputs)} outputs",
                 hint="bind every input but the first under inputs: {name: <node>}, or use "
                 "kind: block for a block of other outputs")
    t = ctx.t("from")
    first = tmpl.inputs[0].id
    bound = {first: t, **{k: ctx.type_of(e) for k, e in fixed.items()}}
    body = ctx.infer_block(name, bound, _ids(ctx, {first: ctx.edge("from"), **fixed}))
    outs = body.output_types()
    carried = tmpl.outputs[0][0]
    out = outs[carried]
    if out.dims != t.dims or out.heads != t.heads or out.dtype != t.dtype:
        ctx.fail(f"repeat feeds each round's output to the next, but block '{name}' maps "
                 f"{t} to {out}", hint="make the block return its input's shape (its first "
                 "output; the others are stacked over the rounds)")
    ctx.body_graph = body
    ctx.params += body.params * (1 if ctx.spec.share else ctx.spec.times)
    if len(outs) == 1:
        return {"": out}
    times = int(ctx.spec.times)
    stacked = {k: TensorType((times, *v.dims), heads=v.heads, dtype=v.dtype, simplex=v.simplex,
                             weights=v.weights)
               for k, v in outs.items() if k != carried}
    return {"": out, carried: out, **stacked}


def _outputs_hint(name: str, outs: dict[str, Any]) -> str:
    """Did-you-mean among a body's named outputs; a body with one unnamed ``output``
    is told how to name it."""
    named = [k for k in outs if k]
    if named:
        return did_you_mean(name, named)
    return f"the body gives one unnamed 'output:'; name it: outputs: {{{name}: <node>}}"
