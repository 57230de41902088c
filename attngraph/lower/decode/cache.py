"""A key/value cache for a causal decoder, derived from its graph.

Generating token t of a causal decoder only needs the new position: every node that
works on each position alone (embeddings, projections, norms, MLPs, elementwise
formulas) runs on that position; a node that reads its position's index (learned
or sinusoidal positions, rotary) runs at the step's absolute index, and a bias of
relative positions (ALiBi, T5) at the distances from it to the kept positions; an attention
over the target's positions (a scorer's keys, a readout's values, a fused
attention's keys and values) reads the new position's query against the keys and
values of every position so far, kept from the earlier steps. What does not
depend on the target (an encoder, its keys and values) runs once. What depends on
the target's positions but on none of its values (a formula of ``i`` and ``j`` over
the target, a bias per bucket of j − i made once for every layer) is worked out
over a grid of positions and read at the new position (queries) and at every kept
one (items).

:func:`plan_cache` reads this from the IR: the target's length symbol ``T`` in the
nodes' types, each kind's role (``scorer``, ``weights``, ``readout``, ``attention``:
the item side is the ``key`` and ``values`` fields) and the *step trait* of the
other kinds (:attr:`attngraph.kinds.base.Kind.step`, a :data:`StepTrait`; for a kind
that does not declare one, :data:`STEP_TRAITS`): ``pointwise``: each position alone;
``indexed``: each position alone and its index; ``relative``: a bias of j - i on
scores; ``rounds``/``body``: a repeat's rounds, each with its own cache, or a block's
body; a repeat's ``inputs`` bound to the target reach its rounds as such. A kind
without a trait, a node that mixes the target's positions otherwise (a pool, a
convolution, an attention over the target that is not causal, a softmax over the
queries), or one that samples is refused with :class:`CacheRefused`, naming the node
and why; generation then re-runs the prefix (:mod:`attngraph.lower.decode.decoders`).
:mod:`attngraph.lower.decode.cached` runs the plan.

A plugin kind that works on each position alone says so where it is defined::

    @kind("my_gate", MyGateSpec, lowering=..., step="pointwise")

or, for a kind defined elsewhere, here::

    STEP_TRAITS.register("my_gate", "pointwise")
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from attngraph.errors import LoweringError, RegistryError, did_you_mean
from attngraph.kinds import KINDS
from attngraph.kinds.base import StepTrait, traits_of
from attngraph.registry import Registry

if TYPE_CHECKING:
    from collections.abc import Iterator

    from torch import nn

    from attngraph.ir.graph import Graph, Node, TensorType
    from attngraph.lower.runtime.module import GraphModule, Step

__all__ = ["STEP_TRAITS", "CachePlan", "CacheRefused", "Site", "StepTrait", "plan_cache"]


class _StepTraits(Registry[StepTrait]):
    """The step trait of each kind by name: the kind's own (its ``step``) first, else
    the one registered here for a kind that does not declare it (a plugin's)."""

    @staticmethod
    def _own(name: object) -> StepTrait | None:
        return traits_of(name).step if isinstance(name, str) else None

    def __getitem__(self, name: str) -> StepTrait:
        own = self._own(name)
        if own is not None:
            return own
        if name not in self:
            names = self.names()
            hint = did_you_mean(name, names)
            if hint.startswith("did you mean"):
                hint += f" (known: {', '.join(names)})"
            msg = f"unknown {self.what} '{name}'"
            raise RegistryError(msg, hint=hint)
        return super().__getitem__(name)

    def get(self, name: str) -> StepTrait | None:
        return self[name] if name in self else None

    def __contains__(self, name: object) -> bool:
        return self._own(name) is not None or super().__contains__(name)

    def names(self) -> list[str]:
        return sorted({*super().names(), *(n for n, k in KINDS.items() if k.step is not None)})

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())


#: How each kind runs when one position is added (kinds with an attention role need
#: none): a kind's ``step`` trait, else the trait registered here under its name.
STEP_TRAITS: Registry[StepTrait] = _StepTraits("step trait")

#: The attention roles, and the fields of their item side (read over every position).
_ATTEND = frozenset({"scorer", "weights", "readout", "attention"})
_ITEMS = frozenset({"key", "values"})
#: The instructions of a formula that keep each position to itself.
_ELEMENTWISE = frozenset({"in", "num", "neg", "bin", "call", "align"})


class CacheRefused(LoweringError):
    """A graph the cache cannot step: ``node`` and ``why``."""

    def __init__(self, node: Node[Any], why: str) -> None:
        self.node, self.why = node, why
        super().__init__(f"node '{node.id}' ({node.kind}) {why}", node.loc,
                         "generate(..., cache=False) re-runs the prefix at every step")


@dataclass(frozen=True)
class Site:
    """One scheduled step of a graph, and how it runs when a position is added.

    ``how``: ``static`` (reads nothing of the target: runs once), ``positions`` (a
    function of the target's positions alone: run over a grid of positions, read at
    the step's), ``pointwise``, ``indexed``, ``attend``, ``rounds`` or ``body``;
    ``most``: a ``positions`` site's largest grid (a table of that many positions);
    ``extend``: the values it makes
    that later steps read over every position, with their position axis (kept and
    grown); ``module``: an attention's module with its causal and window masks off
    (one new position sees every kept one; the window is applied by position);
    ``window``: that window; ``inner``: a repeat's rounds' plans, or a block's body's.
    """

    step: Step
    how: str
    extend: tuple[tuple[str, int], ...] = ()
    module: nn.Module | None = None
    window: int | None = None
    inner: tuple[CachePlan, ...] = ()
    axis: int = 0
    most: int | None = None


@dataclass(frozen=True)
class CachePlan:
    """A graph module's sites, and the values made once that the steps read."""

    gm: GraphModule
    graph: Graph
    sites: tuple[Site, ...]
    keep: tuple[str, ...]


def _axis(t: TensorType, sym: str) -> int | None:
    """The tensor axis of ``sym`` in a value of type ``t`` (once), else None."""
    if t.dims.count(sym) != 1:
        return None
    return 1 + (1 if t.heads else 0) + t.dims.index(sym)


def pair(t: TensorType, sym: str) -> bool:
    """Whether ``t`` is over pairs of positions of ``sym``: ``[.., sym, sym]`` (queries,
    items), and ``sym`` nowhere else."""
    return t.dims[-2:] == (sym, sym) and t.dims.count(sym) == 2


def _type(graph: Graph, key: str) -> TensorType:
    nid, _, port = key.partition(".")
    return graph.node(nid).types[port]


def _pure(node: Node[Any]) -> bool:
    return bool(traits_of(node).is_pure(node))


def _outs(graph: Graph, gm: GraphModule, st: Step) -> list[str]:
    """The value keys a scheduled step makes (a stacked linear: each member's)."""
    return [f"{m}.{p}" if p else m for m in gm.groups.get(st.node, (st.node,))
            for p in graph.node(m).types]


def _elementwise(mod: nn.Module) -> bool:
    """A module that runs no formula (its ``program``, an ``expr``'s), or one whose
    instructions all keep each position to itself."""
    program = getattr(mod, "program", None)
    return program is None or all(ins[0] in _ELEMENTWISE for ins in program)


def _mixes(program: tuple[tuple[Any, ...], ...], t: str) -> bool:
    """Whether a formula reads the length ``t`` or reduces, scans, contracts or takes
    along an axis of it (its value at a position then depends on the others)."""
    at = {"len": 1, "axis": 4, "proj": 4, "mm": 7, "take": 7}
    return any(ins[0] in at and ins[at[ins[0]]] == t for ins in program)


def _positional(graph: Graph, gm: GraphModule, st: Step, node: Node[Any], t: str) -> Site:
    """A value over the target's positions that reads none of its values: one whose
    entry at a position (or pair) does not depend on the other positions."""
    if STEP_TRAITS.get(node.kind) != "pointwise":
        raise CacheRefused(node, "makes a value over the target's positions without a "
                           "pointwise step trait")
    most = None
    for nid in gm.groups.get(st.node, (st.node,)):
        mod: Any = gm.nodes[nid]
        if _mixes(getattr(mod, "program", ()), t):
            raise CacheRefused(graph.node(nid), f"reads the length {t} or mixes its positions")
        value = getattr(mod, "value", None)  # a table over the positions holds so many
        for d, sym in getattr(mod, "lengths", ()):
            if sym == t and value is not None:
                most = int(value.shape[d]) if most is None else min(most, int(value.shape[d]))
    for port, ty in node.types.items():
        if t in ty.dims and not pair(ty, t) and _axis(ty, t) is None:
            what = f"port '{port}'" if port else "its value"
            raise CacheRefused(node, f"makes {what} {ty}: not one value per position, or pair "
                               f"of positions, of {t}")
    return Site(st, "positions", most=most)


def _pointwise(graph: Graph, gm: GraphModule, st: Step, live: set[str], t: str) -> None:
    """Refuse a position-wise step whose values hold the target's axis other than once,
    or, over pairs of positions (scores plus a bias), other than as such a pair."""
    for nid in gm.groups.get(st.node, (st.node,)):
        node = graph.node(nid)
        if not _elementwise(gm.nodes[nid]):
            raise CacheRefused(node, "reduces, multiplies or indexes over an axis: its "
                               "positions may mix")
        pairs = any(pair(ty, t) for ty in node.types.values())
        for inp in st.inputs:
            ty = _type(graph, inp.key)
            if inp.key in live and not (pair(ty, t) if pairs else _axis(ty, t) is not None):
                each = "pair of positions" if pairs else "position"
                raise CacheRefused(node, f"reads '{inp.key}' {ty}, not one value per {each} "
                                   f"of {t}")
        for port, ty in node.types.items():
            if _axis(ty, t) is None and not pair(ty, t):
                what = f"port '{port}'" if port else "its value"
                raise CacheRefused(node, f"makes {what} {ty} from the target's positions: "
                                   f"not one value per position of {t}")


def _relative(graph: Graph, st: Step, node: Node[Any], live: set[str], t: str) -> None:
    """Refuse a relative bias over anything but scores of the target over itself."""
    for inp in st.inputs:
        if inp.key in live and _type(graph, inp.key).dims[-2:] != (t, t):
            raise CacheRefused(node, f"reads '{inp.key}' {_type(graph, inp.key)}, not scores "
                               f"[{t}, {t}] of the target over itself")


def _attend(graph: Graph, gm: GraphModule, st: Step, node: Node[Any], live: set[str],
            t: str, wanted: dict[str, int]) -> Site:
    """An attention step: its live item side is kept over every position."""
    items = [i for i in st.inputs if i.key in live and i.role.split(".")[0] in _ITEMS]
    queries = [i for i in st.inputs if i.key in live and i.role.split(".")[0] not in _ITEMS]
    if items and not queries:
        raise CacheRefused(node, "reads every position of the target from a query that is "
                           "no position of it")
    for i in items:
        axis = _axis(_type(graph, i.key), t)
        if axis is None:
            raise CacheRefused(node, f"reads '{i.key}' {_type(graph, i.key)} as items, not "
                               f"one item per position of {t}")
        wanted[i.key] = axis
    scores = next((i for i in st.inputs if i.role == "scores"), None)
    over_t = bool(items) or (scores is not None and scores.key in live
                             and _type(graph, scores.key).dims[-1:] == (t,))
    role = traits_of(node).role
    if not over_t or role not in ("weights", "attention"):
        return Site(st, "attend")
    mask = getattr(node.spec, "mask", None)
    if getattr(node.spec, "axis", None) == "queries":
        raise CacheRefused(node, "normalises over the queries: every position's weights "
                           "change when one is added")
    if not getattr(mask, "causal", False):
        raise CacheRefused(node, "attends over the target's positions without mask: "
                           "{causal: true}")
    if node.edge("mask.adjacency") is not None:
        raise CacheRefused(node, "has an adjacency mask over the target's positions")
    mod: Any = gm.nodes[node.id]
    if not hasattr(mod, "causal"):
        raise CacheRefused(node, f"its module {type(mod).__name__} has no causal switch")
    step_mod: Any = copy.copy(mod)
    step_mod.causal = False  # one new position: every kept one is in its past
    window = getattr(mod, "window", None)
    if window is not None:
        step_mod.window = None  # applied by position instead
    return Site(st, "attend", module=step_mod, window=window)


def plan_cache(gm: GraphModule, graph: Graph, live: set[str], t: str) -> CachePlan:
    """How to run ``gm`` (lowered from ``graph``) one new position of length ``t`` at a
    time, given the value keys that depend on the target (``live``).

    Raises
    ------
    CacheRefused
        A node the cache cannot step, with the reason.
    """
    live = set(live)
    #: the values of the target's positions alone
    positional: set[str] = set()
    sites: list[Site] = []
    wanted: dict[str, int] = {}
    for st in gm.plan:
        node = graph.node(st.node)
        fresh = any(i.key in live and i.key not in positional for i in st.inputs)
        if not fresh and not any(t in ty.dims for ty in node.types.values()) \
                and not any(i.key in positional for i in st.inputs):
            sites.append(Site(st, "static"))
            continue
        if not _pure(node):
            raise CacheRefused(node, "samples or mixes the rows of a batch")
        if fresh:
            sites.append(_stepped(graph, gm, st, node, live, t, wanted))
        else:
            sites.append(_positional(graph, gm, st, node, t))
            positional.update(_outs(graph, gm, st))
        live.update(_outs(graph, gm, st))
    return _plan(gm, graph, sites, wanted, live)


def _stepped(graph: Graph, gm: GraphModule, st: Step, node: Node[Any], live: set[str],
             t: str, wanted: dict[str, int]) -> Site:
    """A step that reads the target's values: how it runs on the new position, by its
    step trait or, for an attention, its role."""
    trait = STEP_TRAITS.get(node.kind)
    if trait in ("pointwise", "indexed"):
        _pointwise(graph, gm, st, live, t)
        return Site(st, str(trait), axis=_axis(node.types[""], t) or 0)
    if trait == "relative":
        _relative(graph, st, node, live, t)
        return Site(st, "relative")
    if trait in ("rounds", "body"):
        return _structure(gm, st, node, live, t, str(trait))
    if traits_of(node).role in _ATTEND:
        return _attend(graph, gm, st, node, live, t, wanted)
    raise CacheRefused(node, "has no step trait: it may mix the target's positions "
                       "(a kind that works on each position alone says "
                       f"@kind('{node.kind}', ..., step='pointwise'), or registers "
                       f"STEP_TRAITS.register('{node.kind}', 'pointwise'))")


def _plan(gm: GraphModule, graph: Graph, sites: list[Site], wanted: dict[str, int],
          live: set[str]) -> CachePlan:
    """The plan of ``sites``: each keeps the values of ``wanted`` (key -> position axis)
    it makes; the values made once that the other sites or the outputs read are kept."""
    made = {k: i for i, s in enumerate(sites) for k in _outs(graph, gm, s.step)}
    readers: dict[str, set[str]] = {}
    for s in sites:
        for i in s.step.inputs:
            readers.setdefault(i.key, set()).add(i.role.split(".")[0])
    for key in wanted:
        if key not in made:  # a body's input read over every position: kept by the caller
            raise CacheRefused(graph.node(key.split(".")[0]), "is read as items over the "
                               "target's positions, but comes from outside its body")
        if readers[key] - _ITEMS:
            raise CacheRefused(graph.node(key.split(".")[0]), "is read both as items over "
                               "every position and for the new position alone")
    sites = [Site(s.step, s.how, tuple((k, a) for k, a in wanted.items() if made[k] == i),
                  s.module, s.window, s.inner, s.axis, s.most) for i, s in enumerate(sites)]
    static = {k for s in sites if s.how == "static" for k in _outs(graph, gm, s.step)}
    static |= {n.id for n in graph.inputs if n.id not in live}
    keep = sorted({i.key for s in sites if s.how != "static" for i in s.step.inputs} & static)
    keep += [k for _, k, _ in gm.out_keys if k in static and k not in keep]
    return CachePlan(gm, graph, tuple(sites), tuple(keep))


def _structure(gm: GraphModule, st: Step, node: Node[Any], live: set[str], t: str,
               trait: str) -> Site:
    """A repeat (one plan per round: each its own cache) or a block (its body's plan)."""
    body = node.body
    mod: Any = gm.nodes[node.id]
    if body is None:
        raise CacheRefused(node, "has no body")
    keys = {i.role: i.key for i in st.inputs}
    if trait == "rounds":
        # the round's input, and the inputs bound for every round to the target's values
        fed = {mod.input} | {name for role, name in getattr(mod, "fixed", ())
                             if keys.get(role) in live}
        inner = tuple(plan_cache(r, body, fed, t) for r in mod.rounds)
        return Site(st, "rounds", inner=inner)
    body_live = {name for role, name in mod.bind if keys.get(role) in live}
    return Site(st, "body", inner=(plan_cache(mod, body, body_live, t),))
