"""Emit rules of the support kinds (linear, mlp, embedding, norm, add, mul, concat,
dropout, gain, pool, position); the lowerings: :mod:`attngraph.lower.rules.support`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from attngraph.lower.rules.support import sinusoid

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_add", "emit_concat", "emit_dropout", "emit_embedding",
           "emit_gain", "emit_linear", "emit_mlp", "emit_norm", "emit_pool",
           "emit_position"]


def emit_linear(ctx: EmitCtx) -> bool:
    """``nn.Linear``, then its activation."""
    m = ctx.mod
    d, out = int(m.weight.shape[1]), int(m.weight.shape[0])
    lin = ctx.module(ctor=f"{ctx.nn}.Linear({d}, {out}, bias={m.bias is not None})")
    y = f"{lin}({ctx.x('from')})"
    ctx.out(y if m._act is None else f"{ctx.fn(m._act)}({y})")
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
    full = 1 + (1 if m.out_type.heads else 0) + m.out_type.rank
    terms = []
    for r, n in zip(m.roles, m.trail, strict=True):
        t = ctx.t(r)
        missing = full - (1 + (1 if t.heads else 0) + t.rank + n)  # axes of 1 after B
        v = ctx.x(r)
        if missing > 0:
            v = f"{v}[:, {'None, ' * missing}...{', None' * n}]"
        elif n:  # one value per channel: axes of 1 after it
            v = f"{v}[...{', None' * n}]"
        terms.append(v)
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
    """A learned table's first N rows, or the sinusoids of positions 0..N-1 (computed
    in float32 at least), for every row of the batch; an image's patch centres."""
    m = ctx.mod
    src = ctx.x("from")
    if type(m).__name__ == "PatchCentres":
        c = ctx.buffer("centres", ctx.node.id)
        if c is None:
            return False
        ctx.out(f"{c}.to({src}.dtype).unsqueeze(0).expand({src}.shape[0], -1, -1)")
        return True
    if type(m).__name__ != "Position":
        return False
    n = f"{src}.shape[{m.axis}]"
    if m.weight is not None:
        table = f"{ctx.param('weight', ctx.node.id)}[:{n}]"
    else:
        t = ctx.torch
        dt = f"{src}.dtype" if ctx.t("from").dtype == "float" else ctx.dtype()
        table = ctx.tmp("table")
        ctx.line(f"{table} = {ctx.helper(sinusoid)}({n}, {m.dim}, {src}.device, "
                 f"{t}.promote_types({dt}, {t}.float32)).to({dt})  # (N, {m.dim})")
    ctx.out(f"{table}.unsqueeze(0).expand({src}.shape[0], {n}, {m.dim})")
    return True
