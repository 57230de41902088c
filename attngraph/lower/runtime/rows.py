"""Rows read alone: a value of which only a few fixed items are read is made at those
items alone, as far back as the nodes that make it work on each item alone.

BERT's pooler reads the first item of the last layer's output (``take(h, 0, items)``),
so that layer's residual, norms and MLP, and its attention's readout, have one row to
compute, not N: the keys and values, and every weight an output asks for, are still
made over every item. A hand-written model computes every row and reads one.

:func:`plan_rows` reads this from the IR, working back from the readers:

- a formula that reads a value only at whole-number constants along one of its length
  axes (``take(h, 0, items)``), or at one position per example that lengths and
  numbers give (``take(h, N - 1, items)``, worked out before the forward runs), reads
  those *rows* of it: the value may be made on them alone and put back in place (zeros
  elsewhere, which nothing reads) for the formula;
- a node all of whose values are read on the rows alone runs on them when it works on
  each item alone: a *pointwise* step trait whose formula, if any, keeps each item to
  itself (:mod:`attngraph.lower.decode.cache`); an attention (a scorer, weights, a
  readout, a fused attention) without causal, window or adjacency mask and normalised
  over the items, whose query side is then read on the rows and item side (keys,
  values) whole; a repeat, whose last round runs so, its earlier rounds whole; a block,
  whose body does;
- a value a node on the rows reads, but which is made whole (the queries, stacked with
  the keys and values), is read at the rows; over pairs of items (scores, weights) the
  rows are the queries' axis. A pointwise node over pairs (scores plus a bias) runs
  whole: the padding of its queries, on the rows, and of its items, whole, would be
  one mask.

:func:`run_rows` runs a plan on the rows :func:`rows_of` gives: fixed when the plan is
made (a formula's constants, ``(R,)``), each example's own (``(B, 1)``), or the caller's
(a repeat's last round). A batch that does not hold them runs whole, so the formula's
own error names the position.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from attngraph.algebra.program import operands
from attngraph.kinds.base import traits_of
from attngraph.lower.decode.cache import (
    _ATTEND,
    _ITEMS,
    STEP_TRAITS,
    _elementwise,
    _type,
)
from attngraph.lower.decode.cache import _outs as _made
from attngraph.lower.runtime.steps import Step, StepInput, last_uses

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph, Node, TensorType
    from attngraph.lower.runtime.graph import GraphModule
    from attngraph.lower.runtime.node import Runtime

__all__ = ["RowsPlan", "pick", "plan_rows", "put_back", "row_axis", "rows_of", "run_rows"]

#: what a reader asks of a value: its rows alone (``rows``: made on them, reduced),
#: its rows in place (``view``: a formula's take), or all of it
_ROWS, _VIEW, _ALL = "rows", "view", "all"


def row_axis(t: TensorType, sym: str) -> int | None:
    """The tensor axis of the rows of ``sym`` in a value of type ``t``: its one axis of
    ``sym``, or, over pairs of items (``[.., sym, sym]``), the queries' one."""
    lead = 1 + (1 if t.heads else 0)
    n = t.dims.count(sym)
    if n == 1:
        return lead + t.dims.index(sym)
    if n == 2 and t.dims[-2:] == (sym, sym):
        return lead + t.rank - 2
    return None


def _pair(t: TensorType, sym: str) -> bool:
    return t.dims.count(sym) == 2 and t.dims[-2:] == (sym, sym)


@dataclass(frozen=True)
class RowsPlan:
    """How one graph module runs on rows of the length ``sym``.

    ``steps``: its schedule, the inputs of the steps on the rows renamed to the rows of
    a value made whole (``key@rows``); ``on_rows``: those steps' node ids, ``attend``
    the attentions among them (they keep the items' mask); ``gather``: per step index,
    the values to read at the rows before it, ``(key, alias, axis)``; ``expand``: per
    step index, the values made on the rows to put back in place after it; ``inner``:
    a repeat's last round's or a block's own plan; ``returned``: the outputs the caller
    reads on the rows (made whole here: read at the rows at the end); ``rows``: the
    rows, when fixed by the graph (else the caller's, or ``index``'s).
    """

    sym: str
    rows: tuple[int, ...]
    steps: tuple[Step, ...]
    on_rows: frozenset[str]
    attend: frozenset[str]
    gather: dict[int, tuple[tuple[str, str, int], ...]]
    expand: dict[int, tuple[tuple[str, int], ...]]
    inner: dict[str, RowsPlan]
    returned: tuple[tuple[str, int], ...]
    drop: tuple[tuple[str, ...], ...] = field(default=())
    #: the formula node and register of one position per example, worked out from the
    #: lengths (``N - 1``), when the rows are those
    index: tuple[str, int] | None = None


#: the instructions a position per example may be worked out with (from lengths and
#: numbers: ``N - 1``, ``max(N - 2, 0)``)
_OF_LENGTHS = frozenset({"num", "len", "neg", "bin", "call", "align"})


def taken_rows(mod: Any, role: str, sym: str) -> tuple[int, ...] | int | None:
    """Where along ``sym`` a formula's module reads the value of edge ``role``, when it
    reads it there alone: the whole-number constants (``take(x, 0, items)``), or the
    register of one position per example worked out from lengths and numbers
    (``take(x, N - 1, items)``, the last real item); None otherwise."""
    program = getattr(mod, "program", None)
    if not program or not role.startswith("formula."):
        return None
    name = role.removeprefix("formula.")
    reg = next((r for r, ins in enumerate(program) if ins[:2] == ("in", name)), None)
    if reg is None or getattr(mod, "out", None) == reg:
        return None
    rows: set[int] = set()
    each: set[int] = set()
    for ins in program:
        if reg not in operands(ins):
            continue
        if ins[0] != "take" or ins[2] != reg or ins[3] == reg or ins[7] != sym \
                or any(d != -1 for d in ins[6]):  # one position, not one per entry of an axis
            return None
        at = program[ins[3]]
        if at[0] == "num" and float(at[1]).is_integer() and at[1] >= 0:
            rows.add(int(at[1]))
        elif at[0] != "num" and _of_lengths(program, ins[3]):
            each.add(ins[3])
        else:
            return None
    if each:
        return each.pop() if len(each) == 1 and not rows else None
    return tuple(sorted(rows)) or None


def _of_lengths(program: tuple[tuple[Any, ...], ...], reg: int) -> bool:
    """Whether register ``reg`` is worked out from lengths and numbers alone."""
    need = {reg}
    for i in range(reg, -1, -1):
        if i in need:
            if program[i][0] not in _OF_LENGTHS:
                return False
            need.update(operands(program[i]))
    return True


def _pointwise_ok(graph: Graph, gm: GraphModule, st: Step, sym: str) -> tuple[str, ...] | None:
    """The inputs a pointwise step reads on the rows, when it works on each item alone;
    None when it does not. Not over pairs of items (scores plus a bias): the padding of
    its queries, on the rows, and of its items, whole, would be one mask."""
    nodes = [graph.node(nid) for nid in gm.groups.get(st.node, (st.node,))]
    if any(STEP_TRAITS.get(n.kind) != "pointwise" or not _elementwise(gm.nodes[n.id])
           for n in nodes):
        return None
    ins = [(inp.key, t) for inp in st.inputs if sym in (t := _type(graph, inp.key)).dims]
    if any(row_axis(t, sym) is None or _pair(t, sym)
           for t in [t for _, t in ins] + [t for n in nodes for t in n.types.values()]):
        return None
    return tuple(k for k, _ in ins)


def _attend_ok(graph: Graph, node: Node[Any], st: Step, sym: str) -> tuple[str, ...] | None:
    """The inputs an attention reads on the rows (its query side), when its rows are its
    queries, each their own: no causal, window or adjacency mask, weights over the
    items."""
    mask = getattr(node.spec, "mask", None)
    if (mask is not None and (getattr(mask, "causal", False) or getattr(mask, "window", None)
                              is not None)) or node.edge("mask.adjacency") is not None \
            or getattr(node.spec, "axis", None) == "queries":
        return None

    def queries(t: TensorType) -> bool:  # (.., M, d) or (.., M, N): M is sym
        return t.rank >= 2 and t.dims[-2] == sym and row_axis(t, sym) is not None

    if not all(queries(t) for t in node.types.values()):
        return None
    rows: list[str] = []
    for inp in st.inputs:
        t = _type(graph, inp.key)
        if inp.role.split(".")[0] in _ITEMS or sym not in t.dims:
            continue
        if not queries(t):
            return None
        rows.append(inp.key)
    return tuple(rows) if rows else None


def plan_rows(gm: GraphModule, graph: Graph, *, sym: str | None = None,
              returned: tuple[str, ...] = ()) -> RowsPlan | None:
    """The plan of ``gm`` (lowered from ``graph``) on rows: the rows its own formulas
    read alone (``sym`` None), or those of ``sym`` the caller reads of the outputs
    ``returned``. None when no node would run on rows."""
    fixed: set[int] = set()
    index: tuple[str, int] | None = None
    if sym is None:  # where the graph's formulas take, along the first length they take
        found: list[tuple[str, tuple[int, ...] | int]] = []
        for st in gm.plan:
            for inp in st.inputs:
                for s in _syms(graph, inp.key) if inp.role.startswith("formula.") else ():
                    taken = _taken(graph, gm, st, inp, s)
                    if taken is not None and sym in (None, s):
                        sym = s
                        found.append((st.node, taken))
        each = [(nid, t) for nid, t in found if isinstance(t, int)]
        if len(each) == 1 and len(found) == 1:  # one position per example
            index = each[0]
        fixed.update(r for _, t in found if isinstance(t, tuple) for r in t)
        if sym is None or not (fixed or index):
            return None

    def covered(st: Step, inp: StepInput) -> bool:
        """A formula's take that reads this plan's rows in place."""
        taken = _taken(graph, gm, st, inp, sym) if fixed or index else None
        return (set(taken) <= fixed if isinstance(taken, tuple)
                else taken is not None and (st.node, taken) == index)

    #: per value, what its readers ask of it
    asked: dict[str, set[str]] = {}
    for _, k, _ in gm.out_keys:
        asked.setdefault(k, set()).add(_ROWS if k in returned else _ALL)
    on_rows: dict[str, tuple[str, ...]] = {}  # node -> the inputs it reads on the rows
    inner: dict[str, RowsPlan] = {}
    for st in reversed(gm.plan):
        reads = _on_rows(graph, gm, st, asked, sym, inner)
        if reads is not None:
            on_rows[st.node] = reads
        for inp in st.inputs:
            view = reads is None and covered(st, inp)
            how = _ROWS if reads is not None and inp.key in reads else _VIEW if view else _ALL
            asked.setdefault(inp.key, set()).add(how)
    if not on_rows:
        return None
    return _schedule(graph, gm, sym, tuple(sorted(fixed)), index, on_rows, inner, asked,
                     returned)


def _syms(graph: Graph, key: str) -> list[str]:
    """The lengths of the value ``key``."""
    return [d for d in _type(graph, key).dims if isinstance(d, str)]


def _taken(graph: Graph, gm: GraphModule, st: Step, inp: StepInput,
           sym: str) -> tuple[int, ...] | int | None:
    """Where along ``sym`` step ``st`` reads input ``inp`` alone, if it does
    (:func:`taken_rows`)."""
    if not inp.role.startswith("formula."):
        return None
    t = _type(graph, inp.key)
    if row_axis(t, sym) is None or _pair(t, sym):
        return None
    return taken_rows(gm.nodes[st.node], inp.role, sym)


def _on_rows(graph: Graph, gm: GraphModule, st: Step, asked: dict[str, set[str]], sym: str,
             inner: dict[str, RowsPlan]) -> tuple[str, ...] | None:
    """The inputs step ``st`` reads on the rows when it runs on them, else None."""
    node = graph.node(st.node)
    if not traits_of(node).is_pure(node):
        return None
    if STEP_TRAITS.get(node.kind) in ("rounds", "body"):
        return _structure(graph, gm, st, node, asked, sym, inner)
    wants = [asked[k] for k in _made(graph, gm, st) if k in asked]
    if not wants or any(_ALL in w for w in wants):
        return None
    if traits_of(node).role in _ATTEND and st.node not in gm.groups:
        return _attend_ok(graph, node, st, sym)
    return _pointwise_ok(graph, gm, st, sym)


def _main(graph: Graph, nid: str) -> set[str]:
    """The keys of a repeat's or block's first output (its default port too)."""
    body = graph.node(nid).body
    assert body is not None
    return {nid, f"{nid}.{body.outputs[0][0]}"}


def _structure(graph: Graph, gm: GraphModule, st: Step, node: Node[Any],
               asked: dict[str, set[str]], sym: str,
               inner: dict[str, RowsPlan]) -> tuple[str, ...] | None:
    """A repeat or block whose first output alone is read on the rows: its body (a
    repeat's last round) planned to return it so; it reads its inputs whole."""
    mod: Any = gm.nodes[st.node]
    body = node.body
    if body is None or not body.outputs or not hasattr(mod, "rows_forward"):
        return None
    main = _main(graph, st.node)
    wants = [asked[k] for k in main if k in asked]
    if not wants or any(_ALL in w for w in wants) or row_axis(node.types[""], sym) is None:
        return None
    sub = mod.rounds[-1] if hasattr(mod, "rounds") else mod
    first = body.outputs[0][0]
    key = next(k for name, k, _ in sub.out_keys if name == first)
    plan = plan_rows(sub, body, sym=sym, returned=(key,))
    if plan is None:
        return None
    inner[st.node] = plan
    return ()


def _schedule(graph: Graph, gm: GraphModule, sym: str, rows: tuple[int, ...],
              index: tuple[str, int] | None, on_rows: dict[str, tuple[str, ...]],
              inner: dict[str, RowsPlan], asked: dict[str, set[str]],
              returned: tuple[str, ...]) -> RowsPlan:
    """The plan's schedule: the values read at the rows before the steps on them, the
    values made on them put back in place (``key@whole``) for the steps that read
    them so."""
    made_on = {k: st.node for st in gm.plan if st.node in on_rows
               for k in (_main(graph, st.node) if st.node in inner else _made(graph, gm, st))}
    steps: list[Step] = []
    gather: dict[int, tuple[tuple[str, str, int], ...]] = {}
    expand: dict[int, tuple[tuple[str, int], ...]] = {}
    for i, st in enumerate(gm.plan):
        here: list[tuple[str, str, int]] = []
        ins: list[StepInput] = []
        for inp in st.inputs:
            if st.node in on_rows and inp.key in on_rows[st.node] and inp.key not in made_on:
                alias = f"{inp.key}@rows"  # made whole, read on the rows
                axis = row_axis(_type(graph, inp.key), sym)
                assert axis is not None
                if (inp.key, alias, axis) not in here:
                    here.append((inp.key, alias, axis))
                ins.append(inp._replace(key=alias))
            elif st.node not in on_rows and inp.key in made_on:
                ins.append(inp._replace(key=f"{inp.key}@whole"))  # made on the rows
            else:
                ins.append(inp)
        if here:
            gather[i] = tuple(here)
        back = tuple((k, a) for k, node in made_on.items() if node == st.node
                     and _VIEW in asked.get(k, ())
                     if (a := row_axis(_type(graph, k), sym)) is not None)
        if back:
            expand[i] = back
        steps.append(st._replace(inputs=tuple(ins)))
    ret = tuple((k, a) for k in returned if k not in made_on
                if (a := row_axis(_type(graph, k), sym)) is not None)
    # a value read at the rows is read there before the step that reads it so
    uses = [st._replace(inputs=st.inputs + tuple(StepInput("", k, False)
                                                 for k, _, _ in gather.get(i, ())))
            for i, st in enumerate(steps)]
    return RowsPlan(sym, rows, tuple(steps), frozenset(on_rows),
                    frozenset(n for n in on_rows if n not in inner
                              and traits_of(graph.node(n)).role in _ATTEND),
                    gather, expand, inner, ret,
                    last_uses(uses, {k for _, k, _ in gm.out_keys}), index)


def rows_of(gm: GraphModule, plan: RowsPlan, rt: Runtime) -> Tensor | None:
    """The rows of this forward: ``(R,)`` for rows fixed by the plan, ``(B, 1)`` for a
    position per example; None when the batch does not hold them (the forward then runs
    whole, and the formula's own error names the position)."""
    n = rt.sizes.get(plan.sym)
    if not isinstance(n, int):
        return None
    if plan.index is None:
        ok = bool(plan.rows) and max(plan.rows) < n
        return torch.tensor(plan.rows, device=rt.device) if ok else None
    nid, reg = plan.index
    try:
        pos = torch.as_tensor(gm.nodes[nid].register(reg, rt), device=rt.device)  # type: ignore[operator]
    except (AttributeError, TypeError, ValueError, RuntimeError):  # a length the runtime lacks
        return None
    pos = pos.expand(rt.batch) if pos.dim() == 0 else pos
    if pos.shape != (rt.batch,) or not bool(((pos >= 0) & (pos < n) & (pos == pos.floor())).all()):
        return None
    return pos.long().view(rt.batch, 1)


def pick(x: Tensor, axis: int, idx: Tensor) -> Tensor:
    """``x`` at the rows ``idx`` along ``axis``: ``(R,)`` the same for every example,
    ``(B, R)`` each example's own."""
    if idx.dim() == 1:
        return x.index_select(axis, idx)
    if x.shape[0] != idx.shape[0]:  # one value for every example
        x = x.expand(idx.shape[0], *x.shape[1:])
    return x.gather(axis, _spread(idx, x, axis))


def _spread(idx: Tensor, x: Tensor, axis: int) -> Tensor:
    """``idx (B, R)`` shaped to gather or scatter ``x`` along ``axis``."""
    shape = [idx.shape[0]] + [1] * (x.dim() - 1)
    shape[axis] = idx.shape[1]
    return idx.view(shape).expand(*x.shape[:axis], idx.shape[1], *x.shape[axis + 1:])


def put_back(v: Tensor, axis: int, idx: Tensor, n: int) -> Tensor:
    """``v``, made on the rows ``idx``, in place along an ``axis`` of ``n`` (zeros at the
    other rows)."""
    shape = list(v.shape)
    shape[axis] = n
    if idx.dim() == 1:
        return v.new_zeros(shape).index_copy(axis, idx, v)
    return v.new_zeros(shape).scatter(axis, _spread(idx, v, axis), v)


def run_rows(gm: GraphModule, plan: RowsPlan, vals: dict[str, Tensor], rt: Runtime,
             idx: Tensor) -> None:
    """Run ``gm`` by ``plan`` on the rows ``idx`` (:func:`rows_of`), adding its values
    to ``vals``."""
    sym = plan.sym
    n = rt.sizes[sym]
    mask = rt.masks.get(sym)
    rt_rows = replace(rt, masks={**rt.masks, sym: pick(mask, 1, idx)} if mask is not None
                      else rt.masks, sizes={**rt.sizes, sym: int(idx.shape[-1])})
    drop = plan.drop
    for i, st in enumerate(plan.steps):
        for key, alias, axis in plan.gather.get(i, ()):
            vals[alias] = pick(vals[key], axis, idx)
        sub = plan.inner.get(st.node)
        if sub is not None:
            _structure_rows(gm, st, sub, vals, rt, idx)
        else:
            gm._exec([st], vals, rt_rows if st.node in plan.on_rows
                     and st.node not in plan.attend else rt)
        for key, axis in plan.expand.get(i, ()):
            vals[f"{key}@whole"] = put_back(vals[key], axis, idx, n)
        for k in drop[i]:
            vals.pop(k, None)
        for _key, alias, _ in plan.gather.get(i, ()):
            vals.pop(alias, None)
    for key, axis in plan.returned:
        vals[key] = pick(vals[key], axis, idx)


def _structure_rows(gm: GraphModule, st: Step, sub: RowsPlan, vals: dict[str, Tensor],
                    rt: Runtime, idx: Tensor) -> None:
    """A repeat or block whose first output is made on the rows (see :func:`_structure`)."""
    x = {role: (vals[k].detach() if det else vals[k]) for role, k, det in st.inputs}
    try:
        out = gm.nodes[st.node].rows_forward(x, rt, sub, idx)  # type: ignore[operator]
    except (RuntimeError, ValueError, IndexError, TypeError) as exc:
        if torch.compiler.is_compiling():
            raise
        raise gm._fail(st.node, st.kind, exc) from exc
    if isinstance(out, dict):
        for port, v in out.items():
            vals[f"{st.node}.{port}" if port else st.node] = v
    else:
        vals[st.node] = out
