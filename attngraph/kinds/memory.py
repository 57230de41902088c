"""External memory (Graves et al., 2014): the ``memory``, ``write`` and ``address`` kinds.

A memory is read by ordinary attention (a ``cosine`` scorer, a softmax over
slots, a readout); lowered in :mod:`attngraph.lower.rules.memory`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from attngraph.ir.graph import Dim, TensorType
from attngraph.kinds.base import RuleCtx, Style, Work, WorkCtx, elementwise_work, kind
from attngraph.spec.models import NodeModel, Ref, Size


class MemorySpec(NodeModel):
    """External memory: ``slots`` rows of ``width`` numbers per example."""

    kind: Literal["memory"]
    slots: Size
    """Number of slots S (rows); a size."""
    width: Size
    """Size W of each slot; a size."""
    init: Literal["learned", "zeros", "constant"] = "constant"
    """Initial contents: a learned ``[S, W]`` parameter, zeros, or a small constant (1e-6, as in the
    NTM)."""
    from_: Ref | None = Field(default=None, alias="from")
    """A node whose batch the memory follows (one fresh memory per example); its value is not read.
    Unset, the batch comes from the inputs."""


class WriteSpec(NodeModel):
    """An erase/add write of a memory at the given weights over its slots."""

    kind: Literal["write"]
    memory: Ref
    """The memory ``[S, W]`` written."""
    weights: Ref
    """Write weights over the S slots, normalised (a softmax or an address)."""
    erase: Ref
    """The erase vector ``[W]`` (squashed by a sigmoid)."""
    add: Ref
    """The add vector ``[W]``."""


class AddressSpec(NodeModel):
    """NTM location addressing: interpolate, shift and sharpen content weights."""

    kind: Literal["address"]
    shifts: Annotated[int, Field(ge=1, le=8)] = 1
    """The largest shift k, in slots, either way: shifts range over -k … k."""
    content: Ref
    """Content weights ``[S]`` (a softmax, e.g. over cosine scores)."""
    prev: Ref
    """The previous step's weights ``[S]``."""
    control: Ref
    """The controller state ``[d]`` that sets the gate, shift and sharpening."""


@kind("memory", MemorySpec, lowering="attngraph.lower.rules.memory:MemoryNode", role="memory",
      emit="attngraph.lower.export.emit.memory:emit_memory",
      style=Style("#d0e0e3", "cylinder"), work=elementwise_work)
def memory_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Slots [S, width]; learned, zero or small-constant initial contents."""
    s = ctx.spec
    if s.init == "learned":
        ctx.params += s.slots * s.width
    return {"": TensorType((s.slots, s.width))}


def write_work(ctx: WorkCtx) -> Work:
    """M ⊙ (1 - w eᵀ) + w aᵀ makes four memory-sized tensors besides the new memory
    (w eᵀ, 1 - w eᵀ, the product, w aᵀ), all kept for the backward pass."""
    e = ctx.elements(ctx.out())
    return Work(macs=4 * e, inner=e, kept=4 * e)


@kind("write", WriteSpec, lowering="attngraph.lower.rules.memory:WriteNode", role="memory",
      emit="attngraph.lower.export.emit.memory:emit_write",
      style=Style("#d0e0e3", "box"), work=write_work)
def write_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """M' = M ⊙ (1 - w eᵀ) + w aᵀ with erase e = sigmoid(.), add a."""
    mem = ctx.need_rank("memory", 2, "write needs a memory [S, width]",
                         "give it a memory node, or the carried memory of a loop")
    w = ctx.t("weights")
    if not w.simplex or w.dims != mem.dims[:1]:
        ctx.fail(f"write weights must be normalised over the {mem.dims[0]} slots, got {w}",
                 "weights", "address the memory with a softmax over its slots")
    for role in ("erase", "add"):
        v = ctx.t(role)
        if v.rank != 1 or v.dims[0] != mem.dims[1] or v.dtype != "float" or v.heads:
            ctx.fail(f"{role} vector must be [{mem.dims[1]}], got {v}", role,
                     _vector_hint(ctx.edge(role).ref, v, mem.dims[1]))
    return {"": mem}


def _vector_hint(ref: str, v: TensorType, width: Dim) -> str:
    """How to make one vector [width] of ``v``: a linear maps a fixed feature size; a
    length (one value per item) or several items must become one vector first."""
    to = f"a linear with out: {width}"
    if v.dtype != "float":
        return f"ids become vectors through an embedding first, then {to}"
    if v.heads:
        return f"merge the heads of '{ref}' in a readout (combine: concat) first, then {to}"
    if v.rank == 0:
        return f"give {to} of the controller state instead"
    if v.rank == 1 and isinstance(v.dims[0], str):
        return (f"'{ref}' holds one value per item ({v.dims[0]}, a length known only when a "
                f"batch arrives, which no linear can map): read the items out with such "
                f"weights (a readout gives [d]), then {to}")
    if v.rank > 1:
        return (f"'{ref}' holds {v.dims[0]} vectors: make one (a pool, or a readout of the "
                f"items), then {to}")
    return f"project it with {to}"


@kind("address", AddressSpec, lowering="attngraph.lower.rules.memory:AddressNode", role="memory",
      emit="attngraph.lower.export.emit.memory:emit_address",
      style=Style("#d0e0e3", "box"), addresses=True)
def address_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """NTM location addressing of content weights [S]: gate, shift, sharpen."""
    c, p, ctl = ctx.t("content"), ctx.t("prev"), ctx.t("control")
    if not c.simplex or c.rank != 1:
        ctx.fail(f"content weights must be a softmax over slots, got {c}", "content",
                 "give it a softmax of the memory's cosine scores")
    if p.dims != c.dims:
        ctx.fail(f"previous weights {p} do not match content weights {c}", "prev",
                 "give prev the last step's addressing weights over the same slots")
    ctx.need_rank("control", 1, "control is the controller state [d]",
                  "give it the controller's state vector, e.g. an rnn step's output")
    if ctl.dtype != "float" or ctl.heads:
        ctx.fail(f"control is the controller state, a float vector [d], got {ctl}", "control",
                 "give it the controller's state vector, e.g. an rnn step's output")
    k = 2 * ctx.spec.shifts + 1
    ctx.params += (ctx.features("control") + 1) * (1 + k + 1)
    return {"": TensorType(c.dims, simplex=True, weights=True)}
