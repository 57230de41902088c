"""The attention sites of the kinds that place their own weights: a ``glimpse``
(a crop at a location), DRAW's ``filterbank`` (a grid of Gaussian filters, read or
write) and Graves' ``window`` (a mixture of Gaussians over a string's positions).
Each kind names its rule here in its ``site=`` trait, which
:func:`attngraph.analysis.axes.find_sites` calls; a package's kind may name its own.
"""

from __future__ import annotations

from attngraph.analysis.cost import Cost, glimpse_cost
from attngraph.analysis.scope import Scope, origins, qid
from attngraph.analysis.sites import (
    ESTIMATORS,
    Axis,
    Site,
    exposed,
    heads_axis,
    phrase,
    recurrence,
)
from attngraph.ir.graph import Edge, Node
from attngraph.kinds.base import traits_of

__all__ = ["glimpse_site", "filterbank_site", "window_site"]


def _glimpse_exposure(scope: Scope, le: Edge | None, loc: Node | None) -> Axis:
    """Explicit when the glimpse's location (as read, or as made) is a declared output."""
    for nid in (le.src if le is not None else None, loc.id if loc is not None else None):
        out = exposed(scope, nid) if nid is not None else None
        if out is not None:
            return Axis("explicit", f"the glimpse locations are the declared output '{out}'")
    return Axis("implicit", "the location is not a declared output")


def glimpse_site(scope: Scope, g: Node) -> Site:

    le = g.edge("loc")
    loc = scope.graph.node(le.src) if le is not None and le.src in scope.graph else None
    when = ""
    if loc is not None and loc.is_input and scope.owner is not None \
            and traits_of(scope.owner).body == "steps":
        carry = scope.owner.spec.carry.get(loc.id)
        if carry is not None:
            # the location carried from the previous step: look at what produced it
            e = dict(scope.graph.outputs).get(carry.next)
            if e is not None and e.src in scope.graph:
                loc, when = scope.graph.node(e.src), " at the previous step"
    chooser = loc
    if loc is not None and traits_of(loc).role == "readout":
        # l = Σ_i w_i x_i with a policy's one-hot weights: a location chosen among items
        we = loc.edge("weights")
        w = scope.graph.node(we.src) if we is not None and we.src in scope.graph else None
        chooser = w if w is not None and traits_of(w).samples else loc
    if chooser is not None and traits_of(chooser).samples:
        est = ESTIMATORS[chooser.spec.estimator]
        how = "sampled" if chooser is loc or loc is None else \
            f"picked among the values of readout '{loc.id}'"
        hard = Axis("hard", f"the location is {how} by policy '{chooser.id}' "
                    f"({chooser.spec.dist}, {est}){when}; the glimpse crops there")
        where = tuple(origins(scope, chooser.edge("mean") or chooser.edge("scores")))
    else:
        hard = Axis("hard", f"the glimpse crops the image at location '{le.ref}'"
                    if le is not None else "the glimpse crops the image")
        where = tuple(origins(scope, le)) if le is not None else ()
    img = tuple(origins(scope, g.edge("image"))) if g.edge("image") is not None else ()
    s = g.spec
    axes = {
        "hardness": hard,
        "basis": Axis("location", f"the glimpse is placed by a location from "
                      f"{phrase(where)}, not by scores over the image's content"),
        "source": Axis("external", f"the location comes from {phrase(where)}, "
                       f"the pixels from {phrase(img)}"),
        "reach": Axis("local", f"a glimpse of {s.size}×{s.size} px at {s.scales} scale(s)"),
        "heads": heads_axis(1, None),
        "recurrence": recurrence(scope, where),
        "exposure": _glimpse_exposure(scope, le, loc),
    }
    chain = tuple(qid(scope, x) for x in ((loc.id,) if loc is not None else ()) + (g.id,))
    params = {qid(scope, chooser.id): chooser.params} \
        if chooser is not None and chooser.params else {}
    return Site(
        id=qid(scope, g.id), form="glimpse", chain=chain, fn=None, formula=None, heads=1,
        query=where, keys=img, values=img, axes=axes, cost=glimpse_cost(scope, g),
        params=params,
    )


def _port_exposure(scope: Scope, n: Node, ports: tuple[str, ...], what: str) -> Axis:
    """Explicit when one of node ``n``'s weight ports reaches a declared output (through
    the bodies it sits in), else implicit."""
    out = exposed(scope, n.id, ports)
    if out is not None:
        return Axis("explicit", f"{what} of '{n.id}' are the declared output '{out}'")
    return Axis("implicit", f"{what} of '{n.id}' are internal (not a declared output)")


def filterbank_site(scope: Scope, f: Node) -> Site:
    """DRAW's read (or write): soft weights over pixel rows and columns placed by
    predicted params."""
    pe = f.edge("params")
    where = tuple(origins(scope, pe)) if pe is not None else ()
    ie = f.edge("image") or f.edge("patch")
    img = tuple(origins(scope, ie)) if ie is not None else ()
    write = f.edge("patch") is not None
    n = f.spec.size
    axes = {
        "hardness": Axis("soft", f"each of the {n}×{n} filters is a normalised Gaussian over "
                         "pixel rows (F_Y) and columns (F_X): differentiable weights"),
        "basis": Axis("location", f"the grid's centre, stride and width are predicted from "
                      f"{phrase(where)}, not scored from the image's content"),
        "source": Axis("external", f"the placement comes from {phrase(where)}, the "
                       f"{'patch written' if write else 'pixels'} from {phrase(img)}"),
        "reach": Axis("local", f"a grid of {n}×{n} filters whose stride and width set how "
                      "much of the image it covers"),
        "heads": heads_axis(1, None),
        "recurrence": recurrence(scope, where),
        "exposure": _port_exposure(scope, f, ("fx", "fy"), "the filterbanks fx, fy"),
    }
    out = f.types[""].dims  # the read [C, N, N] (x and x̂: 2C) or the written [C, H, W]
    if write:
        c, h, w = out
    else:
        _, h, w = scope.graph.node(ie.src).types[ie.port].dims if ie is not None else (1, 1, 1)
        c = out[0]
    cost = Cost(("C", "N", "H", "W"), (("C", int(c)), ("N", n), ("H", int(h)), ("W", int(w))),
                "F_Yᵀ w F_X per channel: the N×N patch spread over H×W pixels" if write
                else "F_Y x F_Xᵀ per channel: N rows of the image's H×W pixels each")
    return Site(id=qid(scope, f.id), form="filterbank", chain=(qid(scope, f.id),), fn=None,
                formula=None, heads=1, query=where, keys=img, values=img, axes=axes,
                cost=cost, params={})


def window_site(scope: Scope, w: Node) -> Site:
    """Graves' soft window: Gaussian weights over a string's positions, moving forward."""
    ce = w.edge("control")
    where = tuple(origins(scope, ce)) if ce is not None else ()
    items = tuple(origins(scope, w.edge("items"))) if w.edge("items") is not None else ()
    k = w.spec.components
    axes = {
        "hardness": Axis("soft", f"a mixture of {k} Gaussian(s) over the positions: "
                         "differentiable weights, not normalised"),
        "basis": Axis("location", f"the centres, widths and weights are predicted from "
                      f"{phrase(where)}; the scores never read the items' content"),
        "source": Axis("external", f"the placement comes from {phrase(where)}, the items "
                       f"from {phrase(items)}"),
        "reach": Axis("local", "each Gaussian covers the positions near its centre, and the "
                      "centres only move forward"),
        "heads": heads_axis(1, None),
        "recurrence": recurrence(scope, where),
        "exposure": _port_exposure(scope, w, ("weights",), "the weights"),
    }
    ie = w.edge("items")
    u, d = scope.graph.node(ie.src).types[ie.port].dims if ie is not None else ("U", 1)
    cost = Cost(("U", "m"), (("m", int(k) + int(d)),), f"at each of the U positions, {k} "
                f"Gaussian(s) and a read of its item of size {d} (m = K + d)")
    return Site(id=qid(scope, w.id), form="window", chain=(qid(scope, w.id),), fn=None,
                formula=None, heads=1, query=where, keys=items, values=items, axes=axes,
                cost=cost, params={})

