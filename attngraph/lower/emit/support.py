"""Emit rules of the support kinds (linear, mlp, embedding, norm, add, mul, concat,
dropout, gain, pool, position), of ``rnn`` and of the algebra's ``expr``; the
lowerings: :mod:`attngraph.lower.support`, ``rnn``, ``algebra``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.codegen_body import FORWARD_GLOBALS, _not_hidden

if TYPE_CHECKING:
    from attngraph.lower.emit import EmitCtx

__all__ = ["emit_add", "emit_concat", "emit_dropout", "emit_embedding", "emit_expr",
           "emit_gain", "emit_linear", "emit_mlp", "emit_norm", "emit_pool",
           "emit_position", "emit_rnn"]


def emit_linear(ctx: EmitCtx) -> bool:
    """``nn.Linear``, then its activation."""
    m = ctx.mod
    if m._act is not None:
        return False
    d, out = int(m.weight.shape[1]), int(m.weight.shape[0])
    lin = ctx.module(ctor=f"{ctx.nn}.Linear({d}, {out}, bias={m.bias is not None})")
    ctx.out(f"{lin}({ctx.x('from')})")
    return True


def emit_mlp(ctx: EmitCtx) -> bool:
    ctx.out(f"{ctx.module('net', name=ctx.node.id)}({ctx.x('from')})")
    return True


def emit_embedding(ctx: EmitCtx) -> bool:
    vocab, dim = ctx.mod.weight.shape
    ctx.out(f"{ctx.module(ctor=f'{ctx.nn}.Embedding({vocab}, {dim})')}({ctx.x('from')})")
    return True


def emit_norm(ctx: EmitCtx) -> bool:
    m = ctx.mod
    if m.fn == "layer":
        eps = 1e-5 if m.eps is None else m.eps
        ctor = f"{ctx.nn}.LayerNorm({m.d}, eps={eps!r})"
    else:
        ctor = f"{ctx.nn}.RMSNorm({m.d}, eps={m.eps!r})"
    ctx.out(f"{ctx.module(ctor=ctor)}({ctx.x('from')})")
    return True


def emit_add(ctx: EmitCtx) -> bool:
    """The inputs' sum (or product), a vector broadcasting over the items."""
    m = ctx.mod
    if any(m.trail):
        return False
    full = 1 + (1 if m.out_type.heads else 0) + m.out_type.rank
    terms = []
    for r in m.roles:
        t = ctx.t(r)
        missing = full - (1 + (1 if t.heads else 0) + t.rank)
        v = ctx.x(r)
        terms.append(f"{v}[:, {'None, ' * missing}...]" if missing > 0 else v)
    ctx.out((" * " if m.mul else " + ").join(terms))
    return True


def emit_concat(ctx: EmitCtx) -> bool:
    vals = ", ".join(ctx.x(r) for r in ctx.mod.roles)
    ctx.out(f"{ctx.torch}.cat([{vals}], dim=-1)")
    return True


def emit_dropout(ctx: EmitCtx) -> bool:
    ctx.out(f"{ctx.F}.dropout({ctx.x('from')}, {ctx.mod.p!r}, self.training)")
    return True


def emit_gain(ctx: EmitCtx) -> bool:
    ctx.out(f"{ctx.param('gamma', f'{ctx.node.id}_gamma')} * {ctx.x('from')}")
    return True


def emit_pool(ctx: EmitCtx) -> bool:
    """Mean, max or sum over the real items (the algebra's reduction)."""
    m = ctx.mod
    pad = ctx.padding(m.t, axis=0)
    pad = f"{pad}[..., None]" if pad is not None and m.t.rank == 2 and "None" not in pad \
        else pad
    ctx.out(f"{ctx.helper(m.reduce)}({ctx.x('from')}, 1, {pad or 'None'})")
    return True


def emit_position(ctx: EmitCtx) -> bool:
    """A learned table's first N rows, for every row of the batch."""
    m = ctx.mod
    if type(m).__name__ != "Position" or m.weight is None:
        return False
    src = ctx.x("from")
    n = f"{src}.shape[{m.axis}]"
    ctx.out(f"{ctx.param('weight', ctx.node.id)}[:{n}].unsqueeze(0).expand({src}.shape[0], "
            f"{n}, {m.dim})")
    return True


def emit_rnn(ctx: EmitCtx) -> bool:
    """``nn.GRU``/``nn.LSTM`` over the real items (packed), or one cell step."""
    m = ctx.mod
    if m.vector and m.kind == "gru":
        return _cell(ctx)
    if m.step or m.kind != "gru" or ctx.has("init") or m.layers != 1:
        return False
    nn = ctx.nn
    rw = m.rnn
    ctor = (f"{nn}.GRU({rw.input_size}, {rw.hidden_size}, batch_first=True"
            + (", bidirectional=True)" if rw.bidirectional else ")"))
    gru = ctx.module("rnn", ctor=ctor, name=ctx.node.id)
    v = ctx.x("from")
    mask = ctx.mask(m.t.dims[0])
    last = ctx.tmp(f"{ctx.node.id}_last")
    if mask is None:
        out = ctx.w.value_var(ctx.scope, ctx.node.id)
        ctx.line(f"{out}, {last} = {gru}({v})  # (B, N, h·dirs), (dirs, B, h)")
    else:
        pack = ctx.tmp("packed")
        rnn = f"{nn}.utils.rnn"
        ctx.line(f"{pack} = {rnn}.pack_padded_sequence({v}, {mask}.sum(1).cpu(), "
                 "batch_first=True,\n"
                 f"    enforce_sorted=False)  # each row over its real items")
        ctx.line(f"{pack}, {last} = {gru}({pack})")
        out = ctx.out(f"{rnn}.pad_packed_sequence({pack}, batch_first=True, "
                      f"total_length={v}.shape[1])[0]")
    ctx.alias("", out)
    ctx.alias("out", out)
    if ctx.reads("state"):
        ctx.out(f"{ctx.torch}.cat(list({last}.unbind(0)), -1)", "state")
    return True


def _cell(ctx: EmitCtx) -> bool:
    """One GRU step on (B, d) from the state (B, h), or zeros."""
    m = ctx.mod
    cell = ctx.module("cell", name=ctx.node.id)
    h = ctx.x("init") if ctx.has("init") else f"{ctx.x('from')}.new_zeros({ctx.x('from')}" \
        f".shape[0], {m.hidden})"
    out = ctx.out(f"{cell}({ctx.x('from')}, {h})")
    ctx.alias("out", out)
    ctx.alias("state", out)
    return True


def emit_expr(ctx: EmitCtx) -> bool:
    """A formula as one line of torch (the algebra writes it from its registry)."""
    m = ctx.mod
    if any(True for _ in m.parameters()) or any(True for _ in m.buffers()):
        return False
    line = m.python_line(dict(ctx.ins), ctx.rt(), ctx.helper)
    _not_hidden(line, ctx.node.id, ctx.graph, ctx.w.params & FORWARD_GLOBALS)
    if "torch." in line:
        ctx.w.bundle.add_import("torch", None, "torch")
    if "F." in line:
        ctx.w.bundle.add_import("torch.nn", "functional", "F")
    ctx.out(line)
    return True
