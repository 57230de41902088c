"""``diff(a, b) -> Diff``: how two mechanisms relate, read from their IRs.

Nodes are aligned by role (:mod:`attngraph.analysis.align`); attention sites are
paired through their aligned readouts (then in order). For each pair of sites
the report gives every axis (same or different), and the details that papers
contrast: the scorer function (additive vs general), where the query comes from
(the previous step's state vs the current step's rnn state), the encoder behind
the keys (bidirectional vs unidirectional), heads and cost. Matched nodes with
other settings get their field differences; the rest are nodes in only one.

Examples
--------
>>> from attngraph import loads_spec
>>> text = '''
... attngraph: 1
... name: NAME
... dims: {d: 8}
... inputs: {v: {type: vectors, dim: d}}
... nodes:
...   x: {kind: items, from: v}
...   s: {kind: scorer, fn: FN, query: x, key: x}
...   p: {kind: softmax, scores: s}
...   z: {kind: readout, weights: p, values: x}
... outputs: {z: z}
... '''
>>> a = loads_spec(text.replace("NAME", "a").replace("FN", "dot"))
>>> b = loads_spec(text.replace("NAME", "b").replace("FN", "general"))
>>> d = diff(a, b)
>>> d.sites[0].details[0]
('scorer', 'dot', 'general')
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from attngraph.analysis.align import Alignment, align, node_fields
from attngraph.analysis.axes import AXES, Site, find_sites
from attngraph.analysis.scope import Origin
from attngraph.ir.graph import Graph, Node
from attngraph.registry import Registry

__all__ = ["Diff", "SiteDiff", "diff", "to_dict", "render_diff", "DIFF_FORMATS"]


@dataclass(frozen=True)
class SiteDiff:
    """One pair of sites (or a site in only one spec).

    ``axes`` holds ``(axis, value in a, value in b)`` for every axis; ``details``
    holds ``(what, a, b)`` for each other difference.
    """

    a: str | None
    b: str | None
    axes: tuple[tuple[str, str | None, str | None], ...]
    details: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True)
class Diff:
    """The relation of two specs."""

    a: str
    b: str
    sites: tuple[SiteDiff, ...]
    changed: tuple[tuple[str, str, tuple[tuple[str, Any, Any], ...]], ...]
    same: tuple[tuple[str, str], ...]
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    alignment: Alignment


def _query_text(os: tuple[Origin, ...]) -> str:
    if not os:
        return "no query"
    o = os[0]
    if o.step == "previous":
        return f"the previous step's state ('{o.qid}')"
    if o.step == "current":
        return f"the current step's rnn state ('{o.qid}')"
    if o.kind == "learned":
        return "a learned query vector"
    return " + ".join(f"{x.kind} '{x.qid}'" for x in os)


def _encoder(os: tuple[Origin, ...]) -> str | None:
    flags = [o.bidirectional for o in os if o.bidirectional is not None]
    if not flags:
        return None
    return "bidirectional" if flags[0] else "unidirectional"


def _site_details(x: Site, y: Site) -> list[tuple[str, str, str]]:
    out = []
    pairs = [
        ("scorer", x.fn or x.form, y.fn or y.form),
        ("query from", _query_text(x.query), _query_text(y.query)),
        ("encoder (keys)", _encoder(x.keys) or "—", _encoder(y.keys) or "—"),
        ("heads", str(x.heads), str(y.heads)),
        ("cost", str(x.cost), str(y.cost)),
    ]
    for what, va, vb in pairs:
        if va != vb:
            out.append((what, va, vb))
    return out


def _pair_sites(sa: list[Site], sb: list[Site], al: Alignment) -> list[SiteDiff]:
    match = dict(al.pairs)
    by_b = {s.id: s for s in sb}
    used: set[str] = set()
    pairs: list[tuple[Site | None, Site | None]] = []
    s: Site | None
    t: Site | None
    for s in sa:
        t = by_b.get(match.get(s.id, ""))
        pairs.append((s, t))
        if t is not None:
            used.add(t.id)
    rest = [t for t in sb if t.id not in used]
    pairs = [(s, t if t is not None else (rest.pop(0) if rest else None)) for s, t in pairs]
    pairs += [(None, t) for t in rest]
    out = []
    for s, t in pairs:
        axes = tuple((k, s.axes[k].value if s else None, t.axes[k].value if t else None)
                     for k in AXES)
        details = tuple(_site_details(s, t)) if s and t else ()
        out.append(SiteDiff(s.id if s else None, t.id if t else None, axes, details))
    return out


def _node(g: Graph, q: str) -> Any:
    parts = q.split("/")
    for p in parts[:-1]:
        body = g.node(p).body
        assert body is not None  # qualified ids only pass through body owners
        g = body
    return g.node(parts[-1])


def _detached(x: Node[Any], y: Node[Any]) -> list[tuple[str, Any, Any]]:
    """The inputs one node reads with ``detach: true`` and its match does not
    (a stop-gradient is a setting of the reference, not of the node)."""
    da = {str(e.role): e.detach for e in x.inputs}
    db = {str(e.role): e.detach for e in y.inputs}
    return [(f"{r}.detach", da.get(r, False), db.get(r, False))
            for r in sorted(set(da) & set(db)) if da[r] != db[r]]


def diff(a: Graph, b: Graph) -> Diff:
    """Relate two inferred graphs.

    Parameters
    ----------
    a, b : Graph
        The IRs from :func:`attngraph.frontend.load_spec`.

    Returns
    -------
    Diff
        Per-site axes and details, field differences of matched nodes, nodes
        present in only one graph (block inputs left out), and the alignment.
    """
    sa, sb = find_sites(a), find_sites(b)
    al = align(a, b, sa, sb)
    changed: list[tuple[str, str, tuple[tuple[str, Any, Any], ...]]] = []
    same: list[tuple[str, str, tuple[tuple[str, Any, Any], ...]]] = []
    for x, y in al.pairs:
        nx_, ny = _node(a, x), _node(b, y)
        if nx_.is_input and nx_.spec is None:
            continue
        fa, fb = node_fields(nx_), node_fields(ny)
        fields: list[tuple[str, Any, Any]] = []
        if nx_.kind != ny.kind:
            fields.append(("kind", nx_.kind, ny.kind))
        else:
            for k in sorted(set(fa) | set(fb)):
                if fa.get(k) != fb.get(k):
                    fields.append((k, fa.get(k), fb.get(k)))
            fields.extend(_detached(nx_, ny))
        (changed if fields else same).append((x, y, tuple(fields)))
    def shown(g: Graph, qs: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(q for q in qs if not (_node(g, q).is_input and _node(g, q).spec is None))
    return Diff(
        a=a.name, b=b.name, sites=tuple(_pair_sites(sa, sb, al)), changed=tuple(changed),
        same=tuple((x, y) for x, y, _ in same), only_a=shown(a, al.only_a),
        only_b=shown(b, al.only_b), alignment=al,
    )


def to_dict(d: Diff) -> dict[str, Any]:
    """JSON-ready form with stable keys."""
    return {
        "a": d.a, "b": d.b,
        "sites": [{
            "a": s.a, "b": s.b,
            "axes": {k: {"a": va, "b": vb, "same": va == vb} for k, va, vb in s.axes},
            "details": [{"what": w, "a": va, "b": vb} for w, va, vb in s.details],
        } for s in d.sites],
        "changed": [{"a": x, "b": y, "fields": {k: {"a": va, "b": vb} for k, va, vb in f}}
                    for x, y, f in d.changed],
        "same": [{"a": x, "b": y} for x, y in d.same],
        "only_a": list(d.only_a), "only_b": list(d.only_b),
        "alignment": {"method": d.alignment.method,
                      "cost": d.alignment.cost if d.alignment.method == "edit-distance" else None},
    }


def _text(d: Diff, md: bool) -> str:
    code = (lambda s: f"`{s}`") if md else (lambda s: s)
    lines = [(f"## {code(d.a)} vs {code(d.b)}" if md else f"{d.a} vs {d.b}"), ""]
    for s in d.sites:
        head = f"site {code(s.a or '—')} ↔ {code(s.b or '—')}"
        lines += [f"### {head}" if md else head]
        if md:
            lines += ["", "| axis | " + d.a + " | " + d.b + " | |", "|---|---|---|---|"]
        w = max(len(k) for k, _, _ in s.axes)
        for k, va, vb in s.axes:
            mark = "same" if va == vb else "differs"
            if md:
                lines.append(f"| {k} | {va or '—'} | {vb or '—'} | {mark} |")
            else:
                lines.append(f"  {k:<{w}}  {mark:<7}  {va or '—'}"
                             + (f" vs {vb or '—'}" if va != vb else ""))
        if md:
            lines.append("")
        for what, va, vb in s.details:
            lines.append(f"{'- ' if md else '  '}{what}: {va} vs {vb}")
        lines.append("")
    if d.changed:
        lines.append("matched nodes that differ:" if not md else "**Matched nodes that differ**")
        for x, y, f in d.changed:
            diffs = "; ".join(f"{k} {va} vs {vb}" for k, va, vb in f)
            lines.append(f"{'- ' if md else '  '}{code(x)} ↔ {code(y)}: {diffs}")
        lines.append("")
    if d.same:
        lines.append(("**Same**: " if md else "same: ")
                     + ", ".join(code(x if x == y else f"{x}↔{y}") for x, y in d.same))
        lines.append("")
    for side, qs in ((d.a, d.only_a), (d.b, d.only_b)):
        if qs:
            lines.append(f"only in {side}: " + ", ".join(code(q) for q in qs))
    lines.append(f"(alignment: {d.alignment.method})")
    return "\n".join(lines) + "\n"


#: diff's output formats by name
DIFF_FORMATS: Registry[Callable[[Diff], str]] = Registry("format")
DIFF_FORMATS.register("text", lambda d: _text(d, False))
DIFF_FORMATS.register("markdown", lambda d: _text(d, True))
DIFF_FORMATS.register("json", lambda d: json.dumps(to_dict(d), indent=2, sort_keys=True,
                                                   ensure_ascii=False, default=str))


def render_diff(d: Diff, fmt: str = "text") -> str:
    """``d`` in one of :data:`DIFF_FORMATS` (``text``, ``json`` or ``markdown``)."""
    return DIFF_FORMATS[fmt](d)
