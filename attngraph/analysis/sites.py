"""What every attention site shares: the axes, :class:`Axis`, :class:`Site`, and the
reasons that read the same for every kind of site (where a value is exposed, how a
step recurs, how many heads).

:mod:`attngraph.analysis.axes` finds the sites formed by weights and a readout;
:mod:`attngraph.analysis.sensor_sites` those of the kinds that place their own
weights (a glimpse, a DRAW filterbank, Graves' window). Both build on this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from attngraph.analysis.cost import Cost
from attngraph.analysis.scope import Origin, Scope
from attngraph.ir.graph import Node
from attngraph.kinds.base import traits_of

__all__ = ["AXES", "ESTIMATORS", "Axis", "Site", "exposed", "phrase", "recurrence",
           "heads_axis"]

#: Axis names in report order.
AXES = ("hardness", "basis", "source", "reach", "heads", "recurrence", "exposure")

#: A policy's estimator, as a reason names it.
ESTIMATORS = {"reinforce": "REINFORCE", "straight_through": "straight-through",
               "gumbel": "Gumbel-softmax"}


@dataclass(frozen=True)
class Axis:
    """A site's place on one axis and why."""

    value: str
    reason: str


@dataclass(frozen=True)
class Site:
    """One attention site: what forms it, where its inputs come from, its axes."""

    id: str
    form: str
    chain: tuple[str, ...]
    fn: str | None
    formula: str | None
    heads: int
    query: tuple[Origin, ...]
    keys: tuple[Origin, ...]
    values: tuple[Origin, ...]
    axes: dict[str, Axis]
    cost: Cost
    params: dict[str, int] = field(default_factory=dict)


def exposed(scope: Scope, nid: str, ports: tuple[str, ...] = ("", "sample")) -> str | None:
    """The declared output that carries node ``nid``'s value out, if any."""
    for name, e in scope.graph.outputs:
        src = scope.graph.node(e.src) if e.src in scope.graph else None
        hit = e.src == nid and e.port in ports
        if src is not None and traits_of(src).passthrough and src.inputs[0].src == nid:
            hit = True
        if not hit:
            continue
        if scope.owner is None:
            return name
        assert scope.parent is not None
        port = name if traits_of(scope.owner).body == "steps" or name else ""
        outer = exposed(scope.parent, scope.owner.id, (port,))
        if outer is not None:
            return outer
    return None


def phrase(os: tuple[Origin, ...]) -> str:
    """The origins joined for a reason (``nothing`` when there are none)."""
    return " + ".join(o.text for o in os) if os else "nothing"


def recurrence(scope: Scope, query: tuple[Origin, ...]) -> Axis:
    """Recurrent inside a loop that carries state, or with an rnn-state query."""
    loops = scope.enclosing("steps")
    if loops:
        lid, lp = loops[0]
        steps = lp.types[""].dims[0] if lp.types else "T"
        passed = [*lp.spec.carry, *(f for f, x in lp.spec.feed.items()
                                    if x.feedback is not None)]
        if passed:
            return Axis("recurrent", f"inside the body of loop '{lid}', run once per step "
                        f"({steps} steps), carrying {', '.join(passed)} from step to step")
        return Axis("not recurrent", f"run once per step of loop '{lid}' ({steps} steps), "
                    "but no state passes between steps (no carry, no feedback)")
    rnn = [o for o in query if traits_of(o.kind).role == "recurrent" and o.port == "state"]
    if rnn:
        return Axis("recurrent", f"queries come from the state of rnn '{rnn[0].qid}'")
    return Axis("not recurrent", "computed once per input; no loop, no rnn-state query")


def heads_axis(h: int, readout: Node | None, kv: int | None = None) -> Axis:
    """Single-, multi-, multi-query or grouped-query heads, and how they merge."""
    comb = f", merged by {readout.spec.combine}" if readout is not None else ""
    if h > 1 and kv is not None and kv < h:
        if kv == 1:
            return Axis("multi-query", f"{h} query heads share one key/value head "
                        f"(Shazeer 2019){comb}")
        return Axis("grouped-query", f"{h} query heads in {kv} groups, each group sharing "
                    f"one key/value head (Ainslie et al. 2023){comb}")
    if h > 1:
        return Axis("multi-head", f"{h} heads score and read out in parallel{comb}")
    return Axis("single-head", "one set of weights per query")
