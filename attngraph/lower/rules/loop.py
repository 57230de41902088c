"""The lowering of a loop: a body run once per step, with carried state and fed inputs.

Loop semantics, per step t = 0..T-1 (T = ``steps``, or the length of the
``steps`` reference's first axis):

- ``inputs`` are passed unchanged to every step;
- each ``carry`` starts at ``init`` (or zeros of size ``zeros``, the one-hot vector
  of size ``onehot`` with its 1 first, zeros [N] over the items of ``zeros_over``,
  or zeros shaped like ``zeros_like``, in the dtype and
  on the device of the model's inputs) and then takes the body output ``next`` of
  the previous step;
- a ``feed`` without ``feedback`` reads ``from[:, t]``; a feed with ``feedback``
  is the previous output token, shifted right: step 0 gets the id ``start``, and
  step t > 0 gets ``from[:, t-1]`` (teacher forcing: in training mode, when
  ``teacher_forcing`` is true and ``from`` is given) or else the argmax of the
  body output ``feedback`` at step t-1 (greedy feedback);
- each body output is stacked to ``(B, T, ...)``; ``final_<carry>`` is the last
  carried value.

Body nodes that the hoisting pass marked (:mod:`attngraph.passes.hoist`) run once
per call, before the first step, from the loop's ``inputs``.

A loop can also be run a step at a time on tokens chosen outside it (generation,
:mod:`attngraph.lower.decode.generate`): :meth:`Loop.begin` gives a :class:`LoopCursor`,
:meth:`Loop.advance` runs one step from it, and the cursor's ``reorder`` follows beams.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

import torch
from torch import Tensor

from attngraph.errors import LoweringError
from attngraph.ir.graph import Graph
from attngraph.lower.rules.scan import loop_scan
from attngraph.lower.runtime.module import GraphModule, LowerCtx, Runtime, Step, last_uses
from attngraph.passes.hoist import ancestors

__all__ = ["Carry", "Feed", "Loop", "LoopCursor", "Stages"]


class Carry(NamedTuple):
    """A loop's carried state: the input that starts it (else ``zeros`` of that size),
    and the body output that becomes it at the next step."""

    name: str
    init: str | None
    zeros: int
    next: str
    #: zeros [N] over the first axis of this input (a length known at run time)
    over: str | None = None
    #: start one-hot (1 at index 0) instead of zeros
    onehot: bool = False
    #: zeros of this input's shape
    like: str | None = None


class Feed(NamedTuple):
    """A loop's per-step input: element t of ``source``, or (``feedback``) the argmax
    of the previous step's output, starting from id ``start``; with
    ``teacher_forcing``, training reads ``source`` shifted by one instead."""

    name: str
    source: str | None
    feedback: str | None
    start: int
    teacher_forcing: bool


class Stages(NamedTuple):
    """When a loop runs the nodes of its body, for one way of feeding it: ``before``
    nodes once before the steps, on every step's feeds as one batch of B·T rows;
    ``step`` nodes at each step; ``after`` nodes once after the steps, on ``record``
    (the per-step values they read, stacked over the steps into one batch)."""

    before: list[Step]
    step: list[Step]
    after: list[Step]
    record: tuple[str, ...]
    #: the feeds the ``before`` nodes read
    feeds: tuple[str, ...]
    #: the body's outputs made at each step: (name, key, detach)
    per_step: tuple[tuple[str, str, bool], ...]
    #: the values each step node reads last (see :func:`last_uses`)
    drop: tuple[tuple[str, ...], ...]


def _stages(body: GraphModule, early: set[str], late: set[str],
            keep: set[str]) -> Stages:
    """Stages that run the nodes ``early`` before the steps and ``late`` after them."""
    before = [st for st in body.schedule if st.node in early]
    step = [st for st in body.schedule if st.node not in early | late]
    after = [st for st in body.schedule if st.node in late]
    made = {st.node for st in before}
    feeds = {inp.key for st in before for inp in st.inputs if inp.key.split(".")[0] not in made}
    made_after = {st.node for st in after}
    record: dict[str, None] = {}
    for st in after:
        for inp in st.inputs:
            if inp.key.split(".")[0] not in made_after:
                record[inp.key] = None
    made_late = {st.node for st in after}
    per_step = tuple((name, key, det) for name, key, det in body.out_keys
                     if key.split(".")[0] not in made_late)
    kept = keep | set(record) | {key for _, key, _ in per_step}
    return Stages(before, step, after, tuple(record), tuple(sorted(feeds)), per_step,
                  last_uses(step, kept))


class Loop(GraphModule):
    """A body run once per step with carried state and fed inputs (see module doc)."""

    def __init__(self, ctx: LowerCtx) -> None:
        body = ctx.body()
        super().__init__(body)
        s = ctx.spec
        self.steps = s.steps if isinstance(s.steps, int) else None
        self.node_id, self.loc = ctx.node.id, ctx.node.where("steps")
        self.inputs_ = list(s.inputs)
        self.carry = [Carry(c, f"carry.{c}.init" if c_spec.init is not None else None,
                            int(c_spec.zeros or c_spec.onehot or 0), c_spec.next,
                            f"carry.{c}.zeros_over" if c_spec.zeros_over is not None else None,
                            c_spec.onehot is not None,
                            f"carry.{c}.zeros_like" if c_spec.zeros_like is not None else None)
                      for c, c_spec in s.carry.items()]
        self.feed = [Feed(f, f"feed.{f}.from" if f_spec.from_ is not None else None,
                          f_spec.feedback, f_spec.start, f_spec.teacher_forcing)
                     for f, f_spec in s.feed.items()]
        outs = dict(body.outputs)
        self.stack_axis = {k: 2 if body.node(e.src).types[e.port].heads else 1
                           for k, e in outs.items()}
        self.keys = {name: (key, det) for name, key, det in self.out_keys}
        early = {n.id for n in body.nodes if n.runs == "before"}
        late = {n.id for n in body.nodes if n.runs == "after"}
        # feeds known before the steps: read from an input, or teacher-forced
        plain = {f.name for f in self.feed if f.feedback is None and f.source is not None}
        every = {f.name for f in self.feed if f.source is not None}
        # values read after a step: the carries' next values and the fed-back outputs
        keep = {self.keys[c.next][0] for c in self.carry}
        keep |= {self.keys[str(f.feedback)][0] for f in self.feed if f.feedback is not None}
        #: with every feedback teacher-forced (or none): nothing late runs per step
        self.forced = _stages(self, self._fed(body, early, every), late, keep)
        #: with a feedback read: what it needs runs per step, what needs it too
        needed = ancestors(body, {outs[str(f.feedback)].src for f in self.feed
                                  if f.feedback is not None})
        self.free = _stages(self, self._fed(body, early, plain), late - needed, keep)

    @staticmethod
    def _fed(body: Graph, early: set[str], known: set[str]) -> set[str]:
        """The ``before`` nodes whose feeds are all ``known``."""
        out: set[str] = set()
        for nid in early:
            feeds = {a for a in ancestors(body, {nid}) if body.node(a).is_input}
            if feeds <= known:
                out.add(nid)
        return out

    def _stacked(self, k: str, v: list[Tensor]) -> Tensor:
        return torch.stack(v, dim=self.stack_axis[k])

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:  # type: ignore[override]
        steps = self.steps if self.steps is not None else x["steps"].shape[1]
        forced = all(f.feedback is None or (f.source is not None and f.teacher_forcing
                                            and self.training) for f in self.feed)
        stages = self.forced if forced else self.free
        fixed, state = self._start(x, rt)
        early = self._before(stages, x, steps, rt) if stages.before else {}
        # feeds known in advance, (B, T, ...) each; the others are fed back
        for f in self.feed:
            if f.source is not None and (f.feedback is None
                                         or (f.teacher_forcing and self.training)):
                early[f.name] = self._fed_all(f, x, steps, rt)
        fed_back = [f for f in self.feed if f.name not in early]
        if self.steps is None and torch.jit.is_tracing():
            self._refuse_trace()
        if self.steps is None and torch.compiler.is_exporting():
            # one step in the program, run over a dynamic number of steps
            res, records, state = loop_scan(self, stages, fixed, state, early, fed_back,
                                            x["steps"], rt)
        else:
            res, records = self._steps(stages, fixed, state, early, fed_back, steps, rt)
        if stages.after:
            res.update(self._after(stages, records, steps, rt))
        for name, value in state.items():
            res[f"final_{name}"] = value
        res[""] = res[self.out_keys[0][0]]  # the default port: the first body output
        return res

    def _start(self, x: dict[str, Tensor], rt: Runtime
               ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """What every step reads unchanged (the loop's inputs, and the outputs of the
        nodes that run once, before the steps) and the carries' first values."""
        state: dict[str, Tensor] = {}
        for c in self.carry:
            if c.like is not None:
                state[c.name] = torch.zeros_like(x[c.like], dtype=rt.dtype)  # (B, ...)
                continue
            size = x[c.over].shape[1] if c.over is not None else c.zeros
            state[c.name] = x[c.init] if c.init is not None \
                else torch.zeros(rt.batch, size, dtype=rt.dtype, device=rt.device)  # (B, zeros)
            if c.onehot:  # focused on the first slot
                state[c.name] = torch.cat([torch.ones_like(state[c.name][:, :1]),
                                           state[c.name][:, 1:]], -1)  # (B, onehot)
        fixed = {name: x[f"inputs.{name}"] for name in self.inputs_}
        if self.once:
            self._exec(self.once, fixed, rt)
        return fixed, state

    def _refuse_trace(self) -> None:
        """jit.trace would unroll the steps at the traced length: say so, not a program
        that is silently wrong at any other length."""
        msg = (f"loop '{self.node_id}' runs one step per item of its steps input: "
               "torch.jit.trace would record the traced number of steps and give wrong "
               "results at any other length")
        raise LoweringError(msg, self.loc, "export with torch.export (attngraph export "
                            "SPEC --format pt2), which keeps the number of steps dynamic")

    def _step(self, stages: Stages, vals: dict[str, Tensor], rt: Runtime
              ) -> tuple[dict[str, Tensor], dict[str, Tensor], dict[str, Tensor]]:
        """One step of the body on ``vals`` (what the step reads: the fixed values, the
        carries and the feeds; the body's values are added to it): the carries' next
        values and the step's per-step outputs, each detached where the loop asks, and
        the values the ``after`` stage reads. The eager loop (:meth:`_steps`), the
        exported scan (:func:`attngraph.lower.rules.scan.loop_scan`) and stepping
        (:meth:`advance`) all run a step through here."""
        self._exec(stages.step, vals, rt, stages.drop)

        def out(key: str, det: bool) -> Tensor:
            return vals[key].detach() if det else vals[key]

        return ({c.name: out(*self.keys[c.next]) for c in self.carry},
                {name: out(key, det) for name, key, det in stages.per_step},
                {k: vals[k] for k in stages.record})

    def _steps(self, stages: Stages, fixed: dict[str, Tensor], state: dict[str, Tensor],
               early: dict[str, Tensor], fed_back: list[Feed], steps: int,
               rt: Runtime) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """The steps as a Python loop (updating ``state``): the stacked per-step outputs,
        and the values the ``after`` stage reads, (B, T, ...)."""
        b = rt.batch
        seqs = {k: v.unbind(1) for k, v in early.items()}
        stacks: dict[str, list[Tensor]] = {name: [] for name, _, _ in stages.per_step}
        records: dict[str, list[Tensor]] = {k: [] for k in stages.record}
        vals: dict[str, Tensor] = {}
        for t in range(steps):
            prev = vals
            vals = {**fixed, **state}
            for k, seq in seqs.items():
                vals[k] = seq[t]
            for f in fed_back:  # the argmax of the previous step's output
                if t == 0:
                    vals[f.name] = torch.full((b,), f.start, dtype=torch.long, device=rt.device)
                else:
                    key, _ = self.keys[str(f.feedback)]
                    vals[f.name] = prev[key].argmax(-1)
            nxt, per, rec = self._step(stages, vals, rt)
            state.update(nxt)
            for k, v in per.items():
                stacks[k].append(v)
            for k, v in rec.items():
                records[k].append(v)
        return ({k: self._stacked(k, v) for k, v in stacks.items()},
                {k: torch.stack(v, 1) for k, v in records.items()})

    def _fed_all(self, f: Feed, x: dict[str, Tensor], steps: int, rt: Runtime) -> Tensor:
        """Feed ``f`` at every step, (B, T, ...): its input, or the input shifted right
        behind the start id (teacher forcing)."""
        src = x[str(f.source)]
        if f.feedback is None:
            return src[:, :steps]
        start = torch.full((rt.batch, 1), f.start, dtype=src.dtype, device=src.device)
        return torch.cat([start, src[:, :steps - 1]], 1)

    def _scaled(self, rt: Runtime, steps: int) -> Runtime:
        """The runtime of a batch of every step's rows (B·T, row b·T + t)."""
        masks = {sym: m.repeat_interleave(steps, dim=0) for sym, m in rt.masks.items()}
        return replace(rt, masks=masks, batch=rt.batch * steps)

    def _before(self, stages: Stages, x: dict[str, Tensor], steps: int,
                rt: Runtime) -> dict[str, Tensor]:
        """The early nodes, run once on every step's feeds as one batch; their outputs
        (and nothing else) come back stacked over the steps, (B, T, ...)."""
        b = rt.batch
        feeds = {f.name: f for f in self.feed}
        vals = {k: self._fed_all(feeds[k], x, steps, rt).flatten(0, 1) for k in stages.feeds}
        self._exec(stages.before, vals, self._scaled(rt, steps))
        return {k: v.reshape(b, steps, *v.shape[1:])
                for k, v in vals.items() if k not in stages.feeds}

    def _after(self, stages: Stages, records: dict[str, Tensor], steps: int,
               rt: Runtime) -> dict[str, Tensor]:
        """The late nodes, run once on every step's values (``records``, (B, T, ...)) as
        one batch of B·T rows; their outputs come back stacked over the steps like the
        others."""
        b = rt.batch
        vals = {k: v.flatten(0, 1) for k, v in records.items()}  # (B·T, ...)
        self._exec(stages.after, vals, self._scaled(rt, steps))
        res = {}
        for k, (key, det) in self.keys.items():
            if key in vals and key not in records:
                v = vals[key].detach() if det else vals[key]
                v = v.reshape(b, steps, *v.shape[1:])  # (B, T, [h,] ...)
                res[k] = v.transpose(1, 2) if self.stack_axis[k] == 2 else v
        return res

    # The step API: the decoder run one step at a time on the tokens a search chose
    # (attngraph.lower.decode.generate), rather than on the argmax forward feeds back.

    def begin(self, x: dict[str, Tensor], rt: Runtime) -> LoopCursor:
        """The cursor before the first step: the carries' start values, and the
        ``once`` nodes run (``x`` holds the loop's edges but ``steps`` and feeds)."""
        return LoopCursor(*self._start(x, rt), rt)

    def advance(self, cur: LoopCursor, feeds: dict[str, Tensor]) -> dict[str, Tensor]:
        """One step from ``cur`` given each feed, (B,) ids; ``cur.state`` takes the
        new carries. Returns every body output of the step, (B, ...), by name."""
        stages = self.__dict__.get("_step_stages")
        if stages is None:  # every node at each step: no feed is known in advance
            keep = {self.keys[c.next][0] for c in self.carry}
            stages = self.__dict__["_step_stages"] = _stages(self, set(), set(), keep)
        nxt, per, _ = self._step(stages, {**cur.fixed, **cur.state, **feeds}, cur.rt)
        cur.state.update(nxt)
        cur.rt.steps.clear()  # nodes' per-step records are not kept while stepping
        return per


class LoopCursor(NamedTuple):
    """A loop stopped between two steps (see :meth:`Loop.begin`): the values every
    step reads unchanged (the loop's inputs and its ``once`` nodes' outputs), the
    carried state, and the runtime of its batch. Every tensor has the batch first."""

    fixed: dict[str, Tensor]
    state: dict[str, Tensor]
    rt: Runtime

    def reorder(self, index: Tensor) -> LoopCursor:
        """The cursor whose row i is row ``index[i]`` of this one (a beam's parents;
        ``index`` may repeat rows, or grow the batch)."""
        def pick(d: dict[str, Tensor]) -> dict[str, Tensor]:
            return {k: v.index_select(0, index) for k, v in d.items()}

        rt = replace(self.rt, masks=pick(self.rt.masks), batch=int(index.shape[0]),
                     aux={}, steps={})
        return LoopCursor(pick(self.fixed), pick(self.state), rt)

