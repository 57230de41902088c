"""The ``rnn`` kind: a GRU or LSTM over items, one cell step on a vector, or one
step on each item alone (``each``).

Lowered in :mod:`attngraph.lower.rules.rnn`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from attngraph.ir.graph import TensorType
from attngraph.kinds.base import RuleCtx, Work, WorkCtx, kind
from attngraph.spec.models import NodeModel, Ref, Size


class RnnSpec(NodeModel):
    """A GRU or LSTM over items, or one cell step on a vector."""

    kind: Literal["rnn"]
    from_: Ref = Field(alias="from")
    """A sequence ``[N, d]``, or one step ``[d]``."""
    cell: Literal["gru", "lstm"] = "gru"
    """The recurrent cell."""
    hidden: Size
    """The state size h; a size."""
    bidirectional: bool = False
    """Run both directions and concatenate them (``2h`` features)."""
    layers: Annotated[int, Field(ge=1, le=16)] = 1
    """Number of stacked layers."""
    init: Ref | None = None
    """The initial state ``[h]`` (``[h·dirs]`` when bidirectional), used by every layer; with
    ``each``, also one per item ``[N, h]``. Zeros if unset."""
    init_cell: Ref | None = None
    """LSTM: the initial cell state c, in the forms ``init`` takes (zeros if unset)."""
    each: bool = False
    """One cell step on each item of ``[N, d]`` alone, the cell shared over the items (Slot
    Attention's per-slot GRU): ``[N, d]`` to ``[N, h]``."""


def _rnn_work(ctx: WorkCtx) -> Work:
    """Its weights once per item; the gates of every item, layer and direction are kept."""
    s = ctx.spec
    out = ctx.out()
    steps = ctx.positions(out)
    gates = (3 if s.cell == "gru" else 4) * s.hidden * (2 if s.bidirectional else 1)
    return Work(ctx.node.params * steps + ctx.elements(out), inner=steps * gates,
                kept=steps * gates * s.layers)


@kind("rnn", RnnSpec, lowering="attngraph.lower.rules.rnn:Rnn",
      emit="attngraph.lower.export.emit.rnn:emit_rnn", role="recurrent", work=_rnn_work)
def rnn_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Ports ``out`` [N, h·dirs] (default) and ``state`` [h·dirs]; on a vector, one step."""
    s = ctx.spec
    t = ctx.t("from")
    if t.dtype != "float" or t.rank == 0:
        ctx.fail(f"'{ctx.edge('from').ref}' is {t}; an rnn reads float features", "from",
                 "token ids become vectors through items (embed:) or embedding")
    if t.rank not in (1, 2) or t.heads:
        ctx.fail(f"rnn reads a sequence [N, d] or one step [d], got {t}", "from",
                 "merge heads in the readout (combine: concat) first" if t.heads else
                 "give it items [N, d] (a sequence) or a vector [d] (one step)")
    d, h = ctx.features("from"), s.hidden
    dirs = 2 if s.bidirectional else 1
    step = t.rank == 1 or s.each
    if s.each and t.rank != 2:
        ctx.fail(f"each: true steps every item of [N, d] alone, got {t}", "from",
                 "give it items [N, d], or drop 'each' for one step on a vector")
    if step and (s.bidirectional or s.layers > 1):
        what = "each item's step (each: true)" if s.each else "one rnn step (input [d])"
        ctx.fail(f"{what} is a single unidirectional layer", "from",
                 "drop bidirectional and layers, or read a sequence [N, d]")
    gates = 3 if s.cell == "gru" else 4
    for layer in range(s.layers):
        d_in = d if layer == 0 else h * dirs
        ctx.params += dirs * gates * (d_in * h + h * h + 2 * h)
    lead = t.dims[:1] if s.each else ()
    for role in ("init", "init_cell"):
        if not ctx.has(role):
            continue
        if role == "init_cell" and s.cell != "lstm":
            ctx.fail("init_cell is an LSTM's initial cell state, but this rnn is a gru",
                     role, "use cell: lstm, or drop init_cell")
        it = ctx.t(role)
        sizes = (h,) if step else (h, h * dirs)
        shapes = [(x,) for x in sizes] + ([(*lead, h)] if s.each else [])
        if it.dtype != "float" or it.heads or tuple(it.dims) not in shapes:
            want = " or ".join("[" + ", ".join(str(v) for v in x) + "]" for x in shapes)
            what = "init state" if role == "init" else "init_cell"
            ctx.fail(f"{what} must be {want}, got {it}", role,
                     f"give it a float vector of the hidden size {h}"
                     + (" (or one per item)" if s.each else ""))
    if s.each:
        state = TensorType((t.dims[0], h))
        out = state
    else:
        state = TensorType((h * dirs,))
        out = TensorType((t.dims[0], h * dirs)) if t.rank == 2 else state
    ports = {"": out, "out": out, "state": state}
    if s.cell == "lstm":
        ports["cell_state"] = state
    return ports
