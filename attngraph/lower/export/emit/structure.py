"""Emit rules of ``block``, ``repeat`` and ``loop``: a body's statements written
where it runs, a repeat's and a loop's inside a Python ``for`` (the lowerings:
:mod:`attngraph.lower.rules.structure`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.lower.export.emit.writer import Scope, graph_reads

if TYPE_CHECKING:
    from attngraph.lower.export.emit import EmitCtx

__all__ = ["emit_block", "emit_loop", "emit_map", "emit_repeat"]


def _body_scope(ctx: EmitCtx, indent: int, gm: Any = None) -> Scope:
    body = ctx.body
    outer = ctx.scope
    return Scope({}, outer.masks, indent, graph_reads(body)
                 | {k for _, k, _ in (gm or ctx.mod).out_keys},
                 prefix=f"{outer.prefix}{ctx.node.id}/", index=outer.index, lines=outer.lines,
                 parent=outer)


def _gpaths(ctx: EmitCtx) -> list[str]:
    return [f"{p}." for p in ctx.paths]


def emit_block(ctx: EmitCtx) -> bool:
    """The block's nodes, in place, on its inputs."""
    m = ctx.mod
    inner = _body_scope(ctx, ctx.scope.indent)
    for role, name in m.bind:
        inner.vals[name] = ctx.x(role)
    ctx.w.run_graph(ctx.body, ctx.mods, _gpaths(ctx), inner)
    outs = {name: inner.vals[k] + (".detach()" if d else "") for name, k, d in m.out_keys}
    _ports(ctx, outs)
    return True


def _ports(ctx: EmitCtx, outs: dict[str, str]) -> None:
    """The node's ports: the body's outputs (``""``: the first)."""
    names = list(outs)
    ctx.alias("", outs[names[0]])
    for name in names:
        if name:
            ctx.alias(name, outs[name])


def emit_map(ctx: EmitCtx) -> bool:
    """The block on every element of the first axis: (B, S, ...) flattened to a batch of
    B·S (the inner masks too), its outputs back to (B, S, ...), 0 at padded elements."""
    m, w = ctx.mod, ctx.w
    types = ctx.node.types
    if any(types[name].heads for name, _, _ in m.out_keys if name in types):
        return False
    inner = _body_scope(ctx, ctx.scope.indent)
    first = ctx.x(m.bind[0][0])
    nested = {str(a.t.dims[1]): a.name for a in w.model.binder.args
              if a.port == "mask" and a.t.rank == 2}
    masks = {}
    for sym, var in nested.items():
        if ctx.scope.masks.get(sym) == var:
            masks[sym] = ctx.tmp(f"{var}_flat")
            ctx.line(f"{masks[sym]} = {var}.flatten(0, 1)  # (B·S, ...)")
    inner.masks = masks
    for role, name in m.bind:
        var = ctx.tmp(f"{name}_flat")
        ctx.line(f"{var} = {ctx.x(role)}.flatten(0, 1)  # (B·S, ...): one element per row")
        inner.vals[name] = var
    old = w.batch
    w.batch = f"{inner.vals[m.bind[0][1]]}.shape[0]"
    try:
        w.run_graph(ctx.body, ctx.mods, _gpaths(ctx), inner)
    finally:
        w.batch = old
    real = ctx.mask(types[""].dims[0])
    outs = {}
    for name, key, det in m.out_keys:
        t = types[name] if name in types else types[""]
        var = ctx.out(f"{_val(inner, key, det)}.unflatten(0, {first}.shape[:2])",
                      name if name in types else "")
        if real is not None and t.dtype == "float":  # 0 at padded elements
            r = f"{real}[:, :{', None' * (t.rank - 1)}]" if t.rank > 1 else real
            ctx.line(f"{var} = {var} * {r}.to({var}.dtype)")
        outs[name] = var
    _ports(ctx, outs)
    return True


def emit_repeat(ctx: EmitCtx) -> bool:
    """``for i in range(K)``: the body on the last round's output."""
    m = ctx.mod
    if ctx.scope.index is not None and len(m.rounds) > 1 and len(ctx.mods) > 1:
        return False
    if len(ctx.mods) > 1:
        return False
    i = ctx.tmp("i") if len(m.rounds) > 1 else "_"
    h = ctx.tmp(m.input)
    kept = {k: ctx.tmp(f"{k}_rounds") for k in m.stacked}
    ctx.line(f"{h} = {ctx.x('from')}")
    for var in kept.values():
        ctx.line(f"{var} = []")
    ctx.line(f"for {i} in range({m.times}):")
    inner = _body_scope(ctx, ctx.scope.indent + 4, m.rounds[0])
    inner.index = i if len(m.rounds) > 1 else None
    inner.vals[m.input] = h
    for role, name in getattr(m, "fixed", ()):  # the same value in every round
        inner.vals[name] = ctx.x(role)
    old = ctx.w.scope_index
    ctx.w.scope_index = i
    ctx.w.run_graph(ctx.body, list(m.rounds), [f"{p}.rounds.{r}." for p in ctx.paths
                                                    for r in range(len(m.rounds))], inner)
    ctx.w.scope_index = old
    pad = " " * 4
    keys = {name: key for name, key, _ in m.rounds[0].out_keys}
    for k, var in kept.items():
        ctx.line(f"{pad}{var}.append({inner.vals[keys[k]]})")
    ctx.line(f"{pad}{h} = {inner.vals[keys[m.output]]}")
    out = ctx.out(h)
    ctx.alias(m.output, out)
    for k, var in kept.items():
        ctx.out(f"{ctx.torch}.stack({var}, dim={m.stacked[k]})", k)
    return True


def emit_loop(ctx: EmitCtx) -> bool:
    """The body's nodes in a ``for`` over the steps; carries and feeds as variables."""
    m = ctx.mod
    if len(ctx.mods) > 1 or any(c.onehot and c.init is not None for c in m.carry):
        return False
    t = ctx.torch
    steps = str(m.steps) if m.steps is not None else f"{ctx.x('steps')}.shape[1]"
    inner = _body_scope(ctx, ctx.scope.indent + 4)
    for name in m.inputs_:
        inner.vals[name] = ctx.x(f"inputs.{name}")
    for c in m.carry:
        var = ctx.w.value_var(inner, c.name)
        ctx.line(f"{var} = {_carry_start(ctx, c)}")
        if c.onehot:
            ctx.line(f"{var}[:, 0] = 1  # focused on the first slot")
    once = {st.node for st in m.once}
    before = _shift(inner, -4)  # the nodes that run once, before the steps
    inner.parent = before  # (the steps see what those make)
    ctx.w.run_graph(ctx.body, ctx.mods, _gpaths(ctx), before, only=once)
    fed = _feeds(ctx, inner)
    outs = [(name, key, det) for name, key, det in m.out_keys
            if ctx.reads(name) or (name == m.out_keys[0][0] and ctx.reads(""))]
    stacks = {name: ctx.tmp(f"{name}_steps") for name, _, _ in outs}
    both = ", ".join(stacks.values()) + " = " + ", ".join("[]" for _ in stacks)
    for line in [both] if len(both) < 80 else [f"{v} = []" for v in stacks.values()]:
        ctx.line(line)
    step = ctx.tmp("t")
    ctx.line(f"for {step} in range({steps}):")
    head = len(ctx.scope.lines) - 1
    for f, var in fed:
        if f.feedback is None:
            ctx.line(f"    {var} = {ctx.x(f.source)}[:, {step}]")
    ctx.w.run_graph(ctx.body, ctx.mods, _gpaths(ctx), inner,
                    only={st.node for st in m.plan} - once)
    for name, key, det in outs:
        ctx.line(f"    {stacks[name]}.append({_val(inner, key, det)})")
    for c in m.carry:
        key, det = m.keys[c.next]
        ctx.line(f"    {inner.vals[c.name]} = {_val(inner, key, det)}")
    for f, var in fed:
        if f.feedback is not None:
            nxt = f"{_val(inner, m.keys[f.feedback][0], False)}.argmax(-1)"
            if f.source is not None and f.teacher_forcing:  # the true token in training
                nxt = f"{ctx.x(f.source)}[:, {step}] if self.training else {nxt}"
            ctx.line(f"    {var} = {nxt}")
    if not any(f"[:, {step}]" in line for line in ctx.scope.lines[head:]):
        ctx.scope.lines[head] = ctx.scope.lines[head].replace(f"for {step} in", "for _ in")
    res: dict[str, str] = {}
    for name, _, _ in outs:
        res[name] = ctx.out(f"{t}.stack({stacks[name]}, {m.stack_axis[name]})", name)
    if m.out_keys[0][0] in res:
        ctx.alias("", res[m.out_keys[0][0]])
    for c in m.carry:
        ctx.alias(f"final_{c.name}", inner.vals[c.name])
    return True


def _carry_start(ctx: EmitCtx, c: Any) -> str:
    """A carry's first value: its ``init``, or zeros (of a size, over an input's items,
    or like an input; a one-hot carry's 1 is set after)."""
    t = ctx.torch
    if c.init is not None:
        return ctx.x(c.init)
    if c.like is not None:
        return f"{t}.zeros_like({ctx.x(c.like)}, dtype={ctx.dtype()})"
    on = f"dtype={ctx.dtype()}, device={ctx.device()})"
    size = f"{ctx.x(c.over)}.shape[1]" if c.over is not None else str(c.zeros)
    return f"{t}.zeros({ctx.batch()}, {size}, {on}"


def _shift(scope: Scope, by: int) -> Scope:
    return Scope(scope.vals, scope.masks, scope.indent + by, scope.reads, scope.prefix,
                 scope.index, scope.lines, scope.parent)


def _val(scope: Scope, key: str, det: bool) -> str:
    return scope.vals[key] + (".detach()" if det else "")


def _feeds(ctx: EmitCtx, inner: Scope) -> list[tuple[Any, str]]:
    """A variable per feed; a fed-back one starts at its start id."""
    out = []
    for f in ctx.mod.feed:
        var = ctx.w.value_var(inner, f.name)
        if f.feedback is not None:
            t = ctx.torch
            ctx.line(f"{var} = {t}.full(({ctx.batch()},), {f.start}, dtype={t}.long, "
                     f"device={ctx.device()})")
        out.append((f, var))
    return out
