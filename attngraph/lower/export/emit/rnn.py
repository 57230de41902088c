"""Emit rule of ``rnn``: ``nn.GRU``/``nn.LSTM`` over a sequence (packed over the real
items when padded), or one ``nn.GRUCell``/``nn.LSTMCell`` step on a vector or on each
item; the lowering: :mod:`attngraph.lower.rules.rnn`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_rnn"]


def emit_rnn(ctx: EmitCtx) -> bool:
    """The sequence, one step, or a step on each item (module doc)."""
    m = ctx.mod
    if m.vector:
        return _cell(ctx)
    if m.step:
        return _each(ctx)
    return _sequence(ctx)


def _zeros(ctx: EmitCtx, like: str, rows: str) -> str:
    return f"{like}.new_zeros({rows}, {ctx.mod.hidden})"


def _cell(ctx: EmitCtx) -> bool:
    """One step on (B, d) from the states (B, h), or zeros."""
    m = ctx.mod
    v = ctx.x("from")
    cell = ctx.module("cell", name=ctx.node.id)
    rows = f"{v}.shape[0]"
    h = ctx.x("init") if ctx.has("init") else _zeros(ctx, v, rows)
    if m.kind == "gru":
        out = ctx.out(f"{cell}({v}, {h})")
        ctx.alias("out", out)
        ctx.alias("state", out)
        return True
    c = ctx.x("init_cell") if ctx.has("init_cell") else _zeros(ctx, v, rows)
    out = ctx.w.value_var(ctx.scope, ctx.node.id)
    cs = ctx.w.value_var(ctx.scope, f"{ctx.node.id}.cell_state")
    ctx.line(f"{out}, {cs} = {cell}({v}, ({h}, {c}))  # (B, {m.hidden}) x2")
    ctx.alias("out", out)
    ctx.alias("state", out)
    return True


def _each(ctx: EmitCtx) -> bool:
    """One cell step on every item alone: (B, N, d) with states (B, N, h)."""
    m = ctx.mod
    if m.kind != "gru":
        return False
    v = ctx.x("from")
    cell = ctx.module("cell", name=ctx.node.id)
    lead = f"{v}.shape[:-1]"
    h = f"{ctx.x('init')}.expand(*{lead}, {m.hidden})" if ctx.has("init") else \
        f"{v}.new_zeros(*{lead}, {m.hidden})"
    y = f"{cell}({v}.reshape(-1, {v}.shape[-1]), {h}.reshape(-1, {m.hidden}))" \
        f".reshape(*{lead}, {m.hidden})"
    pad = ctx.mask(m.t.dims[0])
    if pad is not None:
        y = ctx.out(y)
        y = f"{y} * {pad}[..., None].to({y}.dtype)  # padded items keep zeros"
    out = ctx.out(y)
    ctx.alias("out", out)
    ctx.alias("state", out)
    return True


def _initial(ctx: EmitCtx, role: str) -> str | None:
    """The initial states (layers·dirs, B, h) from ``init``/``init_cell``, or None."""
    m = ctx.mod
    if not ctx.has(role):
        return None
    v = ctx.x(role)
    per_dir = f"[{v}] * {m.dirs}" if ctx.t(role).dims[-1] == m.hidden else \
        f"list({v}.split({m.hidden}, -1))"
    if m.dirs == 1:
        per_dir = f"[{v}]"
    return f"{ctx.torch}.stack({per_dir}" + (f" * {m.layers}" if m.layers > 1 else "") + ", 0)"


def _sequence(ctx: EmitCtx) -> bool:
    """``nn.GRU``/``nn.LSTM`` over the items; each row over its real ones (packed)."""
    m = ctx.mod
    nn, rw, t = ctx.nn, m.rnn, ctx.torch
    lstm = m.kind == "lstm"
    ctor = (f"{nn}.{'LSTM' if lstm else 'GRU'}({rw.input_size}, {rw.hidden_size}, "
            + (f"num_layers={m.layers}, " if m.layers > 1 else "") + "batch_first=True"
            + (", bidirectional=True)" if rw.bidirectional else ")"))
    rnn = ctx.module("rnn", ctor=ctor, name=ctx.node.id)
    v = ctx.x("from")
    h0, c0 = _initial(ctx, "init"), _initial(ctx, "init_cell")
    if lstm and (h0 or c0):
        h0 = h0 or f"{t}.zeros_like({c0})"
        c0 = c0 or f"{t}.zeros_like({h0})"
    state = f"({h0}, {c0})" if lstm and h0 else h0
    last = ctx.tmp(f"{ctx.node.id}_last")
    cell = ctx.tmp(f"{ctx.node.id}_cell") if lstm else ""
    got = f"({last}, {cell})" if lstm else last
    args = f"{v}" + (f", {state}" if state else "")
    mask = ctx.mask(m.t.dims[0])
    if mask is None:
        out = ctx.w.value_var(ctx.scope, ctx.node.id)
        ctx.line(f"{out}, {got} = {rnn}({args})  # (B, N, h·dirs), (layers·dirs, B, h)")
    else:
        pack = ctx.tmp("packed")
        r = f"{nn}.utils.rnn"
        ctx.line(f"{pack} = {r}.pack_padded_sequence({v}, {mask}.sum(1).cpu(), "
                 "batch_first=True,\n"
                 f"    enforce_sorted=False)  # each row over its real items")
        ctx.line(f"{pack}, {got} = {rnn}({pack}" + (f", {state})" if state else ")"))
        out = ctx.out(f"{r}.pad_packed_sequence({pack}, batch_first=True, "
                      f"total_length={v}.shape[1])[0]")
    ctx.alias("", out)
    ctx.alias("out", out)
    top = f"[-{m.dirs}:]" if m.layers > 1 else ""
    if ctx.reads("state"):
        ctx.out(f"{t}.cat(list({last}{top}.unbind(0)), -1)", "state")
    if lstm and ctx.reads("cell_state"):
        ctx.out(f"{t}.cat(list({cell}{top}.unbind(0)), -1)", "cell_state")
    return True
