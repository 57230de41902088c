"""The IR dump: ``str(graph)``, one line per node, stable enough for golden tests.

Each node prints as ``%id = kind(settings, role=%source, ...) : types  @line:col``;
a node of a loop body that runs once before the steps says ``once``, one that runs
after them, over all steps at once, ``after`` (:mod:`attngraph.passes.hoist`).
Settings are the fields a node sets away from their defaults, minus those that
became edges: which fields are references is read from the spec models
(:func:`attngraph.spec.fields.fields_of`), not from a hand-written list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from attngraph.spec.fields import fields_of
from attngraph.spec.models import LearnedQuery

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph, Node

__all__ = ["dump", "settings", "without_refs"]

_SKIP = frozenset({"kind", "label", "note"})


def _plain(v: object) -> object:
    """A value for printing: models as dicts of their non-default fields."""
    if isinstance(v, BaseModel):
        return dict(v.model_dump(exclude_defaults=True).items())
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return v


def without_refs(v: object) -> object:
    """A nested model (or a mapping of them) as data, without its reference fields."""
    if isinstance(v, dict):
        return {k: without_refs(x) for k, x in v.items()}
    if isinstance(v, BaseModel):
        refs = set(fields_of(type(v)).refs)
        data = v.model_dump(exclude_defaults=True, by_alias=True)
        return {k: x for k, x in data.items() if k not in refs}
    return v


def settings(node: Node[Any]) -> dict[str, Any]:
    """A node's own settings as ``{yaml name: value}``: not defaults, labels or edges.

    A reference field that holds no reference (a policy's ``baseline: false``, a
    learned ``query``) is a setting; nested models keep their non-reference fields.
    """
    spec = node.spec
    if spec is None:
        return {}
    table = fields_of(type(spec))
    out: dict[str, Any] = {}
    for name, attr in table.attrs.items():
        v = getattr(spec, attr)
        if name in _SKIP or v is None or v == type(spec).model_fields[attr].default:
            continue
        if name in table.refs and not isinstance(v, (LearnedQuery, int)):
            continue  # references are the node's edges
        if name in table.nested:
            v = without_refs(v)
            if not v:
                continue
        out[name] = _plain(v)
    return out


def _fields_text(node: Node[Any]) -> str:
    parts: list[str] = []
    for name, v in settings(node).items():
        if name == "query" and isinstance(v, dict) and "learned" in v:
            parts.insert(0, f"query=learned[{v['learned']}]")
        else:
            parts.append(f"{name}={v}")
    return ", ".join(parts)


def _lines(graph: Graph, indent: str) -> list[str]:
    head = f"{indent}graph {graph.name}" + (f" (block {graph.block})" if graph.block else "")
    lines = [head + ":"]
    for n in graph.nodes:
        args = ", ".join(f"{e.role}={e}" for e in n.inputs)
        inner = ", ".join(x for x in (_fields_text(n), args) if x)
        ports = "; ".join(
            (f"{p}: " if p else "") + str(t) for p, t in n.types.items() if p != "out"
        )
        line = f"{indent}  %{n.id} = {n.kind}({inner})"
        if ports:
            line += f" : {ports}"
        if n.runs != "step":
            line += f"  {n.runs}"
        if n.loc.line:
            line += f"  @{n.loc.line}:{n.loc.col}"
        lines.append(line)
        if n.body is not None:
            lines.extend(_lines(n.body, indent + "    "))
    outs = ", ".join(f"{k}={e}" for k, e in graph.outputs)
    lines.append(f"{indent}  return {outs}")
    return lines


def dump(graph: Graph) -> str:
    """The text dump of ``graph`` and every body in it."""
    return "\n".join(_lines(graph, ""))
