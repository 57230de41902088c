"""Text, JSON and markdown forms of a :class:`~attngraph.analysis.describe.Description`,
and :func:`axes_table`, one markdown table of many specs on every axis (for docs)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from attngraph.analysis.axes import AXES, Site
from attngraph.analysis.describe import Description, describe, to_dict
from attngraph.ir.graph import Graph
from attngraph.registry import Registry

__all__ = ["FORMATS", "render", "render_text", "render_json", "render_markdown", "axes_table"]


def _chain(site: Site) -> str:
    kinds = ["scorer", "softmax", "readout"] if site.form == "readout" else []
    if site.form == "glimpse":
        return " → ".join(f"'{c}'" for c in site.chain) + " (glimpse)"
    return " → ".join(f"'{c}'" for c in site.chain) + (f" ({', '.join(kinds)})" if kinds else "")


def _phrase(os: Iterable[object]) -> str:
    return " + ".join(getattr(o, "text", "") for o in os) or "—"


def _site_text(site: Site) -> list[str]:
    lines = [f"site {site.id}: {_chain(site)}"]
    rows: list[tuple[str, str, str]] = []
    if site.fn is not None:
        rows.append(("fn", site.fn, site.formula or ""))
    rows.append(("heads", str(site.heads), ""))
    rows.append(("query", _phrase(site.query), ""))
    rows.append(("keys", _phrase(site.keys), ""))
    rows.append(("values", _phrase(site.values), ""))
    for k in AXES:
        rows.append((k, site.axes[k].value, site.axes[k].reason))
    rows.append(("cost", str(site.cost), site.cost.reason))
    if site.params:
        rows.append(("params", ", ".join(f"{k} {v:,}" for k, v in site.params.items()), ""))
    kw = max(len(r[0]) for r in rows)
    vw = max(len(r[1]) for r in rows if r[2] and r[0] in AXES)
    for k, v, why in rows:
        if why and k in AXES:
            lines.append(f"  {k:<{kw}}  {v:<{vw}}  {why}")
        elif why:
            lines.append(f"  {k:<{kw}}  {v}  ({why})")
        else:
            lines.append(f"  {k:<{kw}}  {v}")
    return lines


def render_text(desc: Description) -> str:
    """A readable, aligned report."""
    n = len(desc.sites)
    lines = [f"{desc.name} ({desc.file}): {n} attention site{'s' if n != 1 else ''}, "
             f"{desc.total_params:,} parameters"]
    for s in desc.sites:
        lines.append("")
        lines.extend(_site_text(s))
    if desc.params:
        lines += ["", "parameters"]
        w = max(len(q) for q, _, _ in desc.params)
        kw = max(len(k) for _, k, _ in desc.params)
        lines += [f"  {q:<{w}}  {k:<{kw}}  {p:>12,}" for q, k, p in desc.params]
    lines += ["", "outputs"]
    w = max(len(o[0]) for o in desc.outputs)
    rw = max(len(o[1]) for o in desc.outputs)
    lines += [f"  {name:<{w}}  {ref:<{rw}}  {t}" for name, ref, t in desc.outputs]
    return "\n".join(lines)


def render_json(desc: Description) -> str:
    """Stable JSON (sorted keys, two-space indent)."""
    return json.dumps(to_dict(desc), indent=2, sort_keys=True, ensure_ascii=False)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(desc: Description) -> str:
    """Markdown for docs: a section per site with an axes table."""
    lines = [f"## `{desc.name}`", "",
             f"{len(desc.sites)} attention site(s), {desc.total_params:,} parameters.", ""]
    for s in desc.sites:
        lines += [f"### Site `{s.id}`", "", _md(_chain(s)), ""]
        if s.fn is not None:
            lines += [f"- scorer: `{s.fn}` — {_md(s.formula or '')}"]
        lines += [f"- heads: {s.heads}", f"- query: {_md(_phrase(s.query))}",
                  f"- keys: {_md(_phrase(s.keys))}", f"- values: {_md(_phrase(s.values))}",
                  f"- cost: {_md(str(s.cost))} — {_md(s.cost.reason)}", "",
                  "| axis | value | why |", "|---|---|---|"]
        lines += [f"| {k} | {s.axes[k].value} | {_md(s.axes[k].reason)} |" for k in AXES]
        lines.append("")
    if desc.params:
        lines += ["| node | kind | parameters |", "|---|---|---:|"]
        lines += [f"| `{q}` | {k} | {p:,} |" for q, k, p in desc.params]
        lines.append("")
    lines += ["| output | from | type |", "|---|---|---|"]
    lines += [f"| `{n}` | `{r}` | `{t}` |" for n, r, t in desc.outputs]
    return "\n".join(lines) + "\n"


#: describe's output formats by name
FORMATS: Registry[Callable[[Description], str]] = Registry("format")
FORMATS.register("text", render_text)
FORMATS.register("json", render_json)
FORMATS.register("markdown", render_markdown)


def render(desc: Description, fmt: str = "text") -> str:
    """``desc`` in one of :data:`FORMATS`."""
    return FORMATS[fmt](desc)


def axes_table(graphs: Iterable[Graph]) -> str:
    """One markdown table: a row per attention site of each graph, a column per axis.

    Parameters
    ----------
    graphs : iterable of Graph
        Inferred graphs (e.g. every spec of the catalog).

    Returns
    -------
    str
        A markdown table with columns spec, site, scorer, then every axis, then cost.
        A spec without sites gets one row of dashes.
    """
    head = ["spec", "site", "scorer", *AXES, "cost"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in graphs:
        d = describe(g)
        if not d.sites:
            lines.append(f"| `{d.name}` |" + " — |" * (len(head) - 1))
        for s in d.sites:
            heads = s.axes["heads"].value + (f" ({s.heads})" if s.heads > 1 else "")
            vals = [s.axes[k].value if k != "heads" else heads for k in AXES]
            cells = [f"`{d.name}`", f"`{s.id}`", s.fn or s.form, *vals, str(s.cost)]
            lines.append("| " + " | ".join(_md(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"
