"""Running a :class:`~attngraph.lower.decode.cache.CachePlan`: a causal decoder with a cache.

:class:`CachedDecoder` first runs the model on the prompt (or the start id) as its
forward does, keeping every attention's keys and values over the target (each
repeat round its own) and the values made once (the encoder); then each step runs
the new position only: the position-wise nodes on it, the indexed ones at its
absolute index, each attention from its query over the kept keys and values grown
by one; a value of the target's positions alone (a relative position bias made
once for every layer) is worked out over a grid of positions, kept while the
positions fit it (its width doubles when they outgrow it), and read at the new
position (queries) and the kept ones (items). Prompts are padded last (a
``<target>_mask``); row i's next token sits at its own position, after its real
tokens, while the cache grows by one slot for every row (its padded slots masked).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor

from attngraph.errors import AttnGraphError
from attngraph.lower.rules.structure import _result
from attngraph.lower.runtime.module import Runtime

if TYPE_CHECKING:
    from attngraph.lower.decode.cache import CachePlan, Site
    from attngraph.lower.runtime.module import AttnModel

__all__ = ["CachedDecoder", "at_rows"]


def at_rows(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """``x`` at ``index[b]`` along ``axis`` for each row b (the axis removed)."""
    shape = [x.shape[0]] + [1] * (x.dim() - 1)
    idx = index.view(shape).expand(*x.shape[:axis], 1, *x.shape[axis + 1:])
    return x.gather(axis, idx).squeeze(axis)


@dataclass
class _State:
    """What the steps keep: the grown values, the values made once, the runtimes."""

    t: str
    caches: dict[str, Tensor] = field(default_factory=dict)
    statics: dict[str, Tensor] = field(default_factory=dict)
    #: the new position's runtime (the target's mask absent: the new position is real)
    rt_new: Runtime = field(default_factory=Runtime)
    #: the attentions' runtime (the target's mask over the kept slots)
    rt_items: Runtime = field(default_factory=Runtime)
    pos: Tensor | None = None  # (B, 1): the new position of each row
    slot_pos: Tensor | None = None  # (B, S): the position of each kept slot
    slot_mask: Tensor | None = None  # (B, S): real slots (None: all)
    #: the values of the target's positions alone, over grid_w positions (pairs)
    grids: dict[str, Tensor] = field(default_factory=dict)
    grid_w: int = 0


def _call(plan: CachePlan, site: Site, mod: Any, x: dict[str, Tensor], rt: Runtime) -> Any:
    """A module's forward, its failure located at its node."""
    try:
        return mod.forward(x, rt)
    except AttnGraphError:
        raise
    except (RuntimeError, ValueError, IndexError, TypeError) as exc:
        raise plan.gm._fail(site.step.node, site.step.kind, exc) from exc


def _put(vals: dict[str, Tensor], nid: str, out: Any) -> None:
    if isinstance(out, dict):
        for port, v in out.items():
            vals[f"{nid}.{port}" if port else nid] = v
    else:
        vals[nid] = out


def _indexed(plan: CachePlan, site: Site, x: dict[str, Tensor], s: _State) -> Tensor:
    """A node that reads its position's index, at each row's new position: its input
    placed at that index in a zero value of the positions so far, the output read there."""
    assert s.pos is not None
    width = int(s.pos.max()) + 1
    node = plan.graph.node(site.step.node)
    src = next(i for i in site.step.inputs if i.role == "from")
    u = x["from"]
    t_in = plan.graph.node(src.key.split(".")[0]).types[src.key.partition(".")[2]]
    a = 1 + (1 if t_in.heads else 0) + t_in.dims.index(s.t)
    shape = list(u.shape)
    shape[a] = width
    full = u.new_zeros(shape)
    idx = s.pos.view(-1, *([1] * (u.dim() - 1))).expand_as(u)
    full = full.scatter(a, idx, u)
    out = _call(plan, site, plan.gm.nodes[node.id], {**x, "from": full}, s.rt_new)
    b = site.axis
    return out.gather(b, s.pos.view(-1, *([1] * (out.dim() - 1)))
                      .expand(*out.shape[:b], 1, *out.shape[b + 1:]))


def _relative(plan: CachePlan, site: Site, x: dict[str, Tensor], s: _State) -> Tensor:
    """Scores of the new position plus a bias of j - i: the node run on zero scores of
    every distance back, (W, 1), read at each kept slot's distance."""
    assert s.pos is not None and s.slot_pos is not None
    sc = x["scores"]  # (B, [h,] 1, S)
    width = int(s.pos.max()) + 1
    zeros = sc.new_zeros(1, *sc.shape[1:-2], width, 1)
    table = _call(plan, site, plan.gm.nodes[site.step.node], {**x, "scores": zeros},
                  s.rt_items)[..., 0]  # (1, [h,] W): the bias at distance i - j = 0..W-1
    back = (s.pos - s.slot_pos).clamp(min=0)  # (B, S) (padded slots: masked later)
    bias = table[0][..., back]  # ([h,] B, S)
    if sc.dim() == 4:
        bias = bias.transpose(0, 1)  # (B, h, S)
    return sc + bias.unsqueeze(-2)


def _at(g: Tensor, axis: int, index: Tensor) -> Tensor:
    """``g`` at ``index (B, L)`` along ``axis``, for each row b (``g``'s batch of one
    spread over the rows)."""
    if g.shape[0] != index.shape[0]:
        g = g.expand(index.shape[0], *g.shape[1:])
    shape = [index.shape[0]] + [1] * (g.dim() - 1)
    shape[axis] = index.shape[1]
    return g.gather(axis, index.view(shape).expand(*g.shape[:axis], index.shape[1],
                                                   *g.shape[axis + 1:]))


def _positions(plan: CachePlan, site: Site, vals: dict[str, Tensor], s: _State,
               prefix: str) -> None:
    """A value of the target's positions alone: over the grid (made once per grid
    width), read at each row's new position and, over pairs, at its kept slots."""
    from attngraph.lower.decode.cache import _outs, pair

    assert s.pos is not None and s.slot_pos is not None
    st = site.step
    keys = _outs(plan.graph, plan.gm, st)
    if prefix + keys[0] not in s.grids:
        x = {role: s.grids.get(prefix + k, vals[k]) for role, k, _ in st.inputs}
        rt = replace(s.rt_new, sizes={**s.rt_new.sizes, s.t: s.grid_w})
        made: dict[str, Tensor] = {}
        _put(made, st.node, _call(plan, site, plan.gm.nodes[st.node], x, rt))
        s.grids.update({prefix + k: v for k, v in made.items()})
    for key in keys:
        g = s.grids[prefix + key]
        t = plan.graph.node(key.split(".")[0]).types[key.partition(".")[2]]
        lead = 1 + (1 if t.heads else 0)
        for d, size in enumerate(t.dims):
            if size == s.t:  # the items of a pair at the kept slots, else the new position
                last = pair(t, s.t) and d == len(t.dims) - 1
                g = _at(g, lead + d, s.slot_pos if last else s.pos)
        vals[key] = g


def _site_rt(site: Site, s: _State) -> Runtime:
    """The attentions' runtime, with a window applied by position."""
    if site.window is None or s.pos is None or s.slot_pos is None:
        return s.rt_items
    near = (s.pos - s.slot_pos).abs() <= site.window  # (B, S)
    mask = near if s.slot_mask is None else near & s.slot_mask
    return replace(s.rt_items, masks={**s.rt_items.masks, s.t: mask})


def run_plan(plan: CachePlan, vals: dict[str, Tensor], s: _State, step: bool,
             prefix: str = "") -> None:
    """Run ``plan``: the whole prompt (``step`` False; keeps what the steps read), or
    the new position (``step`` True)."""
    gm = plan.gm
    if step:
        vals.update({k: s.statics[prefix + k] for k in plan.keep})
    for site in plan.sites:
        st = site.step
        if site.how == "static":
            if not step:
                gm._exec([st], vals, s.rt_items)
            continue
        x = {role: (vals[k].detach() if det else vals[k]) for role, k, det in st.inputs}
        if site.how in ("rounds", "body"):
            _structure(gm, site, x, vals, s, step, prefix)
        elif not step:
            gm._exec([st], vals, s.rt_items)
        elif site.how == "indexed":
            vals[st.node] = _indexed(plan, site, x, s)
        elif site.how == "relative":
            vals[st.node] = _relative(plan, site, x, s)
        elif site.how == "positions":
            _positions(plan, site, vals, s, prefix)
        elif site.how == "attend":
            mod = site.module if site.module is not None else gm.nodes[st.node]
            _put(vals, st.node, _call(plan, site, mod, x, _site_rt(site, s)))
        else:
            gm._exec([st], vals, s.rt_new)
        for key, axis in site.extend:
            name = prefix + key
            full = torch.cat([s.caches[name], vals[key]], axis) if step else vals[key]
            s.caches[name] = vals[key] = full
    if not step:
        s.statics.update({prefix + k: vals[k] for k in plan.keep})


def _structure(gm: Any, site: Site, x: dict[str, Tensor], vals: dict[str, Tensor],
               s: _State, step: bool, prefix: str) -> None:
    """A repeat's rounds (each its own cache) or a block's body."""
    nid = site.step.node
    mod = gm.nodes[nid]
    if site.how == "body":
        sub = site.inner[0]
        inner = {name: x[role] for role, name in mod.bind}
        run_plan(sub, inner, s, step, f"{prefix}{nid}/")
        _put(vals, nid, _result(sub.gm._outputs(inner)))
        return
    v = x["from"]
    kept: dict[str, list[Tensor]] = {k: [] for k in mod.stacked}
    for i in range(mod.times):
        sub = site.inner[i if len(site.inner) > 1 else 0]
        inner = {mod.input: v, **{name: x[role] for role, name in getattr(mod, "fixed", ())}}
        run_plan(sub, inner, s, step, f"{prefix}{nid}#{i}/")
        outs = sub.gm._outputs(inner)
        v = outs[mod.output]
        for k in kept:
            kept[k].append(outs[k])
    if not kept:
        vals[nid] = v
        return
    _put(vals, nid, {"": v, mod.output: v,
                     **{k: torch.stack(t, dim=mod.stacked[k]) for k, t in kept.items()}})


def _tail(plan: CachePlan, out_key: str, others: set[str]) -> tuple[int, ...]:
    """The sites (indices into ``plan.sites``) that work on each position alone and
    make only what the generated output reads (a final norm, the output layer): the
    prompt's step runs them on each row's last position alone, as the steps do, since
    nothing reads them at the others. Empty when the output is made otherwise."""
    from attngraph.lower.decode.cache import _outs

    readers: dict[str, list[int]] = {}
    for i, site in enumerate(plan.sites):
        for inp in site.step.inputs:
            readers.setdefault(inp.key, []).append(i)
    tail: set[int] = set()
    for i in reversed(range(len(plan.sites))):
        site = plan.sites[i]
        if site.how != "pointwise" or site.extend:
            continue
        made = _outs(plan.graph, plan.gm, site.step)
        if all(k not in plan.keep and k not in others
               and (k == out_key or readers.get(k))
               and all(r in tail for r in readers.get(k, ())) for k in made):
            tail.add(i)
    made_out = any(out_key in _outs(plan.graph, plan.gm, plan.sites[i].step) for i in tail)
    return tuple(sorted(tail)) if made_out else ()


def _last_rows(plan: CachePlan, x: dict[str, Tensor], t: str, last: Tensor) -> None:
    """Each value of ``x`` over the target's positions at each row's ``last`` one
    (the axis kept, of size 1)."""
    from attngraph.lower.decode.cache import _axis, _type

    for k, v in x.items():
        axis = _axis(_type(plan.graph, k), t)
        if axis is not None:
            x[k] = at_rows(v, axis, last).unsqueeze(axis)


def _most(plan: CachePlan) -> int | None:
    """The fewest positions a table over them holds, in ``plan`` and its bodies."""
    found = [site.most for site in plan.sites if site.most is not None]
    found += [m for site in plan.sites for sub in site.inner if (m := _most(sub)) is not None]
    return min(found, default=None)


class CachedDecoder:
    """A causal decoder stepped through its cache plan (see the module docstring)."""

    def __init__(self, model: AttnModel, plan: CachePlan, given: dict[str, Tensor],
                 target: str, out: str, start: int, vocab: int, axes: dict[str, int],
                 prompt: Tensor | None, prompt_mask: Tensor | None, t: str) -> None:
        self.model, self.plan, self.given, self.target = model, plan, given, target
        self.out_key = {n: k for n, k, _ in model.out_keys}[out]
        self.start, self.axes = start, axes
        self.vocab: int | None = vocab
        first = prompt if prompt is not None else next(iter(given.values()))
        self.device = first.device
        self.batch = int(first.shape[0])
        self.prompt = prompt if prompt is not None else torch.full(
            (self.batch, 1), start, dtype=torch.long, device=self.device)
        self.prompt_mask = prompt_mask
        self.state = _State(t)
        #: the widest grid of positions the plan's tables allow (None: any)
        self.most = _most(plan)
        self.lens = (prompt_mask.sum(1) if prompt_mask is not None else
                     torch.full((self.batch,), self.prompt.shape[1], device=self.device))
        self.started = False
        #: the sites the prompt runs on each row's last position alone (see _tail)
        self.tail = _tail(plan, self.out_key,
                          {k for _, k, _ in model.out_keys if k != self.out_key})

    def _prefill(self) -> tuple[Tensor, dict[str, Tensor]]:
        """The prompt, as forward runs it; what the steps read is kept."""
        m = self.model
        s = self.state
        given = {**self.given, self.target: self.prompt}
        if self.prompt_mask is not None and not bool(self.prompt_mask.all()):
            given[f"{self.target}_mask"] = self.prompt_mask
            s.slot_mask = self.prompt_mask.clone()
        vals, rt = m._bind(given)
        s.rt_items = rt
        s.rt_new = replace(rt, masks={k: v for k, v in rt.masks.items() if k != s.t})
        last = (self.lens - 1).long()
        plan = self.plan
        tail = [plan.sites[i] for i in self.tail]
        run_plan(replace(plan, sites=tuple(site for i, site in enumerate(plan.sites)
                                           if i not in self.tail)), vals, s, step=False)
        if tail:  # on each row's last position alone, as a step runs them
            from attngraph.lower.decode.cache import _outs

            made = {k for site in tail for k in _outs(plan.graph, plan.gm, site.step)}
            rows = {i.key: vals[i.key] for site in tail for i in site.step.inputs
                    if i.key not in made}
            _last_rows(plan, rows, s.t, last)
            part = {**vals, **rows}
            plan.gm._exec([site.step for site in tail], part, s.rt_new)
            vals[self.out_key] = part[self.out_key]
        s.rt_items = replace(rt, masks=dict(s.rt_new.masks))
        p = self.prompt.shape[1]
        s.slot_pos = torch.arange(p, device=self.device).expand(self.batch, p)
        res = cast(dict[str, Tensor], m._outputs(vals))
        out = vals[self.out_key]
        logits = out[:, 0] if tail else at_rows(out, 1, last)  # (B, V)
        return logits, {k: at_rows(res[k], a, last) for k, a in self.axes.items()}

    def step(self, prev: Tensor | None) -> tuple[Tensor, dict[str, Tensor]]:
        if not self.started:
            self.started = True
            return self._prefill()
        assert prev is not None
        s = self.state
        b = prev.shape[0]
        s.pos = self.lens.view(b, 1).long()  # (B, 1): after each row's real tokens
        s.slot_pos = torch.cat([cast(Tensor, s.slot_pos), s.pos], 1)
        if s.slot_mask is not None:
            s.slot_mask = torch.cat([s.slot_mask, s.slot_mask.new_ones(b, 1)], 1)
            s.rt_items = replace(s.rt_items, masks={**s.rt_new.masks, s.t: s.slot_mask})
        s.rt_new.sizes[s.t] = s.rt_items.sizes[s.t] = int(s.slot_pos.shape[1])
        need = int(s.pos.max()) + 1
        if need > s.grid_w:  # every value of positions alone over a wider grid
            wider = max(need, 2 * s.grid_w, 16)
            s.grid_w = need if self.most is not None and wider > self.most else wider
            s.grids.clear()
        vals: dict[str, Tensor] = {self.target: prev[:, None]}
        run_plan(self.plan, vals, s, step=True)
        self.lens = self.lens + 1
        res = cast(dict[str, Tensor], self.model._outputs(vals))
        return vals[self.out_key][:, -1], {k: res[k].select(a, -1) for k, a in self.axes.items()}

    def reorder(self, index: Tensor) -> None:
        s = self.state
        if not self.started:
            self.given = {k: v.index_select(0, index) for k, v in self.given.items()}
            self.prompt = self.prompt.index_select(0, index)
            if self.prompt_mask is not None:
                self.prompt_mask = self.prompt_mask.index_select(0, index)
            self.batch = int(index.shape[0])
        else:
            rows = s.rt_new.batch
            for d in (s.caches, s.statics):
                for k, v in d.items():  # a parameter (a batch of one) serves every row
                    d[k] = v.index_select(0, index) if v.dim() and v.shape[0] == rows else v
            s.grids.clear()  # made again, for the new rows, at the next step
            for rt in (s.rt_new, s.rt_items):
                rt.masks = {k: v.index_select(0, index) for k, v in rt.masks.items()}
                rt.batch = int(index.shape[0])
            s.slot_pos = cast(Tensor, s.slot_pos).index_select(0, index)
            if s.slot_mask is not None:
                s.slot_mask = s.slot_mask.index_select(0, index)
        self.lens = self.lens.index_select(0, index)
