"""Lowering rules of structure: block, repeat and loop run a lowered body graph.

A block is a :class:`GraphModule` over its instantiated body, so its parameters
are ``nodes.<block node>.nodes.<inner node>.<param>``; a repeat holds one body per
round (``nodes.<id>.rounds.<i>.nodes...``) unless ``share: true``.

A loop (a body run once per step, with carried state and fed inputs) is lowered in
:mod:`attngraph.lower.rules.loop`; its names are importable from here too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

import torch
from torch import Tensor, nn

from attngraph.ir.graph import Graph
from attngraph.lower.rules.loop import Carry, Feed, Loop, LoopCursor, Stages
from attngraph.lower.runtime.module import GraphModule, LowerCtx, NodeModule, Runtime
from attngraph.lower.runtime.rows import RowsPlan

__all__ = ["Block", "Carry", "Feed", "Loop", "LoopCursor", "Map", "Repeat", "Stages"]


def _result(outs: dict[str, Tensor]) -> Tensor | dict[str, Tensor]:
    """A body's outputs as a node result: the tensor, or ports with ``""`` = first."""
    if list(outs) == [""]:
        return outs[""]
    res = dict(outs)
    res.setdefault("", next(iter(outs.values())))
    return res


def _binding(ctx: LowerCtx, body: Graph) -> list[tuple[str, str]]:
    """(the node's input role, the body input it binds) for each of ``from``'s values:
    each entry of a ``from:`` mapping, or the one value to the body's first input."""
    if isinstance(ctx.spec.from_, dict):
        return [(str(e.role), str(e.role.key)) for e in ctx.node.edges("from")]
    return [("from", body.inputs[0].id)]


class Block(GraphModule):
    """One use of a block: binds ``from`` to the body's inputs and runs it."""

    def __init__(self, ctx: LowerCtx) -> None:
        body = ctx.body()
        super().__init__(body)
        self.bind = _binding(ctx, body)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor | dict[str, Tensor]:  # type: ignore[override]
        return _result(self.run({name: x[role] for role, name in self.bind}, rt))

    def rows_forward(self, x: dict[str, Tensor], rt: Runtime, plan: RowsPlan,
                     idx: Tensor) -> Tensor | dict[str, Tensor]:
        """``forward``, its first output made on the rows ``idx`` alone (see
        :mod:`attngraph.lower.runtime.rows`)."""
        return _result(self.run_rows({name: x[role] for role, name in self.bind}, rt, plan,
                                     idx))


class Map(GraphModule):
    """A block run on each element of the first axis of its inputs: (B, S, ...) is run as
    a batch of B·S elements (the inner masks, (B, S, W), as (B·S, W)), and the results
    come back as (B, S, ...), zero at padded elements (a sentence with no real word)."""

    def __init__(self, ctx: LowerCtx) -> None:
        body = ctx.body()
        super().__init__(body)
        self.bind = _binding(ctx, body)
        self.lead = ctx.node.types[""].dims[0]

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor | dict[str, Tensor]:  # type: ignore[override]
        first = x[self.bind[0][0]]
        b, s = first.shape[0], first.shape[1]  # (not int(): symbols while exporting)
        flat = {name: x[role].reshape(b * s, *x[role].shape[2:]) for role, name in self.bind}
        inner = {sym: m.reshape(b * s, *m.shape[2:]) for sym, m in rt.masks.items()
                 if m.dim() == 3}
        sub = replace(rt, masks=inner, batch=b * s)
        outs = self.run(flat, sub)
        real = rt.masks.get(str(self.lead)) if isinstance(self.lead, str) else None
        res = {}
        for k, v in outs.items():
            v = v.reshape(b, s, *v.shape[1:])
            if real is not None and v.is_floating_point():
                v = v * real.reshape(b, s, *([1] * (v.dim() - 2))).to(v.dtype)
            res[k] = v
        return _result(res)


class Repeat(NodeModule):
    """K rounds of a block; each round its own parameters unless shared. The block's
    first output feeds the next round (its first input; the others, ``fixed``, are the
    same in every round); its other outputs are stacked over the rounds,
    (B, K, ...), or (B, h, K, ...) with heads."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()
        s = ctx.spec
        body = ctx.body()
        self.times = s.times
        self.input = body.inputs[0].id
        #: (role, block input) of the inputs bound to one value for every round
        self.fixed = [(str(e.role), str(e.role.key)) for e in ctx.node.edges("inputs")]
        self.output = body.outputs[0][0]
        types = ctx.node.types
        #: each stacked port and the axis its rounds stack on (after the heads)
        self.stacked = {k: 2 if types[k].heads else 1 for k, _ in body.outputs[1:]}
        n = 1 if s.share else s.times
        self.rounds = nn.ModuleList([GraphModule(body) for _ in range(n)])

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor | dict[str, Tensor]:  # type: ignore[override]
        return self._rounds(x, rt)

    def rows_forward(self, x: dict[str, Tensor], rt: Runtime, plan: RowsPlan,
                     idx: Tensor) -> Tensor | dict[str, Tensor]:
        """``forward``, the last round's output made on the rows ``idx`` alone (the
        earlier rounds' are read whole by the next; see
        :mod:`attngraph.lower.runtime.rows`)."""
        return self._rounds(x, rt, (plan, idx))

    def _rounds(self, x: dict[str, Tensor], rt: Runtime,
                rows: tuple[RowsPlan, Tensor] | None = None) -> Tensor | dict[str, Tensor]:
        v = x["from"]
        kept: dict[str, list[Tensor]] = {k: [] for k in self.stacked}
        for i in range(self.times):
            # ModuleList items are typed nn.Module; every round is a GraphModule
            body = cast(GraphModule, self.rounds[i if len(self.rounds) > 1 else 0])
            inner = {self.input: v, **{name: x[role] for role, name in self.fixed}}
            outs = (body.run_rows(inner, rt, *rows) if rows is not None and i == self.times - 1
                    else body.run(inner, rt))
            v = outs[self.output]
            for k in kept:
                kept[k].append(outs[k])
        if not kept:
            return v
        return {"": v, self.output: v,
                **{k: torch.stack(t, dim=self.stacked[k]) for k, t in kept.items()}}
