"""The ``loop`` kind: a block run once per step, with carried state (``carry``) and
per-step inputs (``feed``); its spec models are in :mod:`attngraph.kinds.structure`.
Lowered in :mod:`attngraph.lower.rules.loop`.
"""

from __future__ import annotations

from attngraph.ir.graph import Dim, TensorType
from attngraph.kinds.base import RuleCtx, kind, no_work
from attngraph.kinds.structure import CarrySpec, FeedSpec, LoopSpec, _ids, _outputs_hint

__all__ = ["loop_shape"]


def _steps(ctx: RuleCtx) -> Dim:
    """The number of steps: a number, or the first axis of the ``steps`` reference."""
    s = ctx.spec
    steps: Dim
    if isinstance(s.steps, int):
        steps = s.steps
    else:
        st = ctx.t("steps")
        if st.rank == 0:
            ctx.fail(f"steps '{ctx.edge('steps').ref}' has no length", "steps",
                     "give a sequence whose first axis is the steps (e.g. the targets), or "
                     "a number")
        steps = st.dims[0]
    return steps


def _carry_start(ctx: RuleCtx, cname: str, c: CarrySpec) -> TensorType:
    """The type carried state ``cname`` starts as (one of its five starts)."""
    starts = [f for f in ("init", "zeros", "zeros_over", "onehot", "zeros_like")
              if getattr(c, f) is not None]
    if len(starts) > 1:
        ctx.fail(f"carry '{cname}' gives {' and '.join(starts)}; it starts one way",
                 hint="keep one of init, zeros, zeros_over, onehot and zeros_like",
                 field="carry")
    if c.init is not None:
        return ctx.t(f"carry.{cname}.init")
    elif c.zeros is not None:
        return TensorType((c.zeros,))
    elif c.onehot is not None:
        return TensorType((c.onehot,), simplex=True, weights=True)
    elif c.zeros_over is not None:
        role = f"carry.{cname}.zeros_over"
        over = ctx.t(role)
        if over.rank == 0:
            ctx.fail(f"carry '{cname}': zeros_over '{ctx.edge(role).ref}' is {over}, with "
                     "no items", role,
                     "give it items [N, d] (or ids [N]): the carry starts as zeros [N]")
        return TensorType(over.dims[:1])
    elif c.zeros_like is not None:
        role = f"carry.{cname}.zeros_like"
        like = ctx.t(role)
        if like.dtype != "float" or like.heads or like.rank == 0:
            ctx.fail(f"carry '{cname}': zeros_like '{ctx.edge(role).ref}' is {like}; the "
                     "carry starts as float zeros of its shape", role,
                     "give it float values without heads (e.g. an image)")
        return TensorType(like.dims)
    else:
        ctx.fail(f"carry '{cname}' needs 'init: <node>', 'zeros: <size>', "
                 "'zeros_over: <items>', 'onehot: <size>' or 'zeros_like: <node>'",
                 hint=f"e.g. {cname}: {{zeros: 64, next: <output>}}, or zeros_over: <items> "
                 "for zeros [N] over a length N known at run time", field="carry")


def _feed_type(ctx: RuleCtx, fname: str, f: FeedSpec, steps: Dim,
               ids: dict[str, int]) -> TensorType:
    """The type feed ``fname`` gives the body at one step (adds to ``ids`` the ids it
    may take, where known)."""
    if f.from_ is not None:
        ft = ctx.t(f"feed.{fname}.from")
        if ft.rank == 0:
            ctx.fail(f"feed '{fname}' reads one element per step; "
                     f"'{ctx.edge(f'feed.{fname}.from').ref}' has no steps axis",
                     f"feed.{fname}.from", "feed a sequence [T, ...]; give a "
                     "value the same at every step under inputs: instead")
        if ft.dims[0] != steps:
            ctx.fail(f"feed '{fname}' reads one element per step, but "
                     f"'{ctx.edge(f'feed.{fname}.from').ref}' has {ft.dims[0]} of them "
                     f"for {steps} steps", f"feed.{fname}.from",
                     f"give steps: {ctx.edge(f'feed.{fname}.from').src} (the steps are "
                     "its length)")
        if f.feedback is not None and (ft.dtype != "long" or ft.rank != 1):
            ctx.fail(f"feed '{fname}' feeds back ids, so its 'from' must be the target ids "
                     f"[T], got {ft}", f"feed.{fname}.from",
                     "give the targets, a tokens or labels input")
        n_ids = ctx.id_bound(ctx.edge(f"feed.{fname}.from"))
        if n_ids is not None:
            ids[fname] = n_ids
        return TensorType(ft.dims[1:], dtype=ft.dtype, index_of=ft.index_of)
    elif f.feedback is not None:
        return TensorType((), dtype="long")
    else:
        ctx.fail(f"feed '{fname}' needs 'from: <input>' or 'feedback: <output>'",
                 hint=f"e.g. {fname}: {{from: <targets>, feedback: <logits output>}}",
                 field="feed")


def _fed_back(ctx: RuleCtx, body_out: dict[str, TensorType],
              ids: dict[str, int]) -> dict[str, int]:
    """How many ids each fed-back feed may take: its logits' size (checked), at least
    what its ``from`` takes."""
    fed_back: dict[str, int] = {}
    for fname, f in ctx.spec.feed.items():
        if f.feedback is None:
            continue
        logits = body_out[f.feedback]
        if logits.rank != 1 or logits.dtype != "float" or logits.heads:
            ctx.fail(f"feedback '{f.feedback}' must be logits [V] to pick the next id, "
                     f"got {logits}", hint="feed back a linear's output (out: <vocab>)",
                     field="feed")
        v = ctx.fixed(logits.dims[0], f"the size of feedback '{f.feedback}'", field="feed")
        if f.start >= v:
            ctx.fail(f"feed '{fname}' starts from id {f.start}, but feedback '{f.feedback}' "
                     f"picks ids below {v}", hint=f"use a start id below {v} (e.g. the BOS "
                     "id of the targets' vocab)", field="feed")
        fed_back[fname] = max(v, ids.get(fname, 0))
    return fed_back


@kind("loop", LoopSpec, lowering="attngraph.lower.rules.loop:Loop",
      emit="attngraph.lower.export.emit.structure:emit_loop", role="structure",
      work=no_work, body="steps")
def loop_shape(ctx: RuleCtx) -> dict[str, TensorType]:
    """Runs the body once per step; each body output is stacked to [T, ...]."""
    s = ctx.spec
    name = s.body
    tmpl = ctx.graph.blocks[name]
    steps = _steps(ctx)
    bound: dict[str, TensorType] = {}
    ids = _ids(ctx, {str(e.role.key): e for e in ctx.node.edges("inputs")})
    for e in ctx.node.edges("inputs"):
        bound[str(e.role.key)] = ctx.type_of(e)
    outs = dict(tmpl.outputs)
    for cname, c in s.carry.items():
        bound[cname] = _carry_start(ctx, cname, c)
        if c.next not in outs:
            ctx.fail(f"carry '{cname}': body '{name}' has no output '{c.next}'",
                     hint=_outputs_hint(c.next, outs), field="carry")
    for fname, f in s.feed.items():
        bound[fname] = _feed_type(ctx, fname, f, steps, ids)
        if f.feedback is not None and f.feedback not in outs:
            ctx.fail(f"feed '{fname}': body '{name}' has no output '{f.feedback}'",
                     hint=_outputs_hint(f.feedback, outs), field="feed")
    body = ctx.infer_block(name, bound, ids)
    body_out = body.output_types()
    for cname, c in s.carry.items():
        got = body_out[c.next]
        start = bound[cname]
        if (got.dims, got.heads, got.dtype) != (start.dims, start.heads, start.dtype):
            ctx.fail(f"carry '{cname}' starts as {bound[cname]} but output '{c.next}' is {got}",
                     hint="a carried state keeps its shape from step to step")
    fed_back = _fed_back(ctx, body_out, ids)
    if fed_back and {**ids, **fed_back} != ids:
        # the body's embeddings meet the ids its own logits pick, too
        body = ctx.infer_block(name, bound, {**ids, **fed_back})
        body_out = body.output_types()
    ctx.body_graph = body
    ctx.params += body.params
    ports = {k: TensorType((steps, *t.dims), heads=t.heads, dtype=t.dtype, simplex=t.simplex,
                            weights=t.weights)
             for k, t in body_out.items()}
    for cname, c in s.carry.items():
        ports[f"final_{cname}"] = body_out[c.next]
    first = next(iter(ports.values()))
    return {"": ports.get("", first), **ports}
