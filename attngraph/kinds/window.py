"""Graves' soft window (Graves 2013, "Generating sequences with recurrent neural
networks", section 5.1): the ``window`` kind. Lowered in :mod:`attngraph.lower.rules.window`.

A window reads a character string ``c_1 … c_U`` with weights that are a mixture
of K Gaussians over the character positions, whose centres only move forward:

    (α̂, β̂, κ̂) = W h_t + b,    α = exp(α̂),  β = exp(β̂),  κ_t = κ_{t-1} + exp(κ̂)
    φ(t, u) = Σ_k α_k exp(−β_k (κ_k − u)²),    u = 1 … U
    w_t = Σ_u φ(t, u) c_u

The weights φ are not a distribution (they need not sum to one), so the window
is marked as giving attention weights but not a simplex.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Style, Work, WorkCtx, kind
from attngraph.spec.models import SIZE, Ident, NodeModel, Ref


class WindowSpec(NodeModel):
    """Graves' soft window over ``items`` (a string's characters) with centres ``prev`` + a step."""

    kind: Literal["window"]
    items: Ref
    """The characters ``[U, d]`` read (one-hot or embedded); padded characters get no weight."""
    control: Ref
    """The controller state ``[h]`` that sets the K Gaussians' weights, widths and steps, e.g. an
    rnn step's output."""
    prev: Ref
    """The previous centres κ_{t-1} ``[K]``: a loop carry that starts from zeros and takes the
    window's ``centres`` port."""
    components: Annotated[Union[Annotated[int, Field(ge=1, le=64)], Ident], SIZE] = 1
    """Number K of Gaussians in the mixture: a number or a dims name."""


def _window_work(ctx: WorkCtx) -> Work:
    """The projection (h·3K), φ over U positions (K each) and the read (U·d)."""
    u, d = (ctx.n(x) for x in ctx.t("items").dims)
    k = ctx.spec.components
    h = ctx.n(ctx.t("control").dims[0])
    return Work(macs=3 * k * h + k * u + u * d, inner=k * u)


@kind("window", WindowSpec, lowering="attngraph.lower.rules.window:WindowNode", role="attention",
      emit="attngraph.lower.export.emit.indexing:emit_window",
      style=Style("#ead1dc", "box"), work=_window_work,
      site="attngraph.analysis.sensor_sites:window_site", picture="window")
def window_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Items [U, d], control [h], prev [K] -> the window [d]; ports ``weights`` φ [U]
    (attention weights, not normalised) and ``centres`` κ [K]."""
    items = ctx.t("items")
    if items.dtype != "float" or items.heads:
        ctx.fail(f"window reads float items [U, d] (the characters), got {items}", "items",
                 "turn the character ids into vectors first: {kind: onehot, from: <tokens>} "
                 "or {kind: embedding, from: <tokens>, dim: d}")
    ctx.need_rank("items", 2, "window reads items [U, d] (the characters)",
                  "give it the characters, e.g. {kind: onehot, from: <tokens>}")
    ctl = ctx.t("control")
    if ctl.rank != 1 or ctl.dtype != "float" or ctl.heads:
        ctx.fail(f"control is the controller state, a float vector [h], got {ctl}", "control",
                 "give it the controller's state vector, e.g. an rnn step's output")
    k = ctx.spec.components
    prev = ctx.t("prev")
    if prev.rank != 1 or prev.dims[0] != k or prev.dtype != "float" or prev.heads:
        ctx.fail(f"prev holds the previous centres, [{k}] for components: {k}, got {prev}",
                 "prev", f"in a loop, carry the centres: carry: {{<this input>: {{zeros: {k}, "
                 f"next: <the body output of '{ctx.node.id}.centres'>}}}}; outside one, a "
                 f"float vector [{k}]")
    ctx.params += (ctx.features("control") + 1) * 3 * k
    return {"": TensorType(items.dims[1:]),
            "weights": TensorType(items.dims[:1], weights=True),
            "centres": TensorType((k,))}
