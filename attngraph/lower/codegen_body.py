"""The bodies of ``block``, ``map``, ``repeat`` and ``loop`` nodes as code in the file.

A body's module (``Block``, ``Map``, ``Loop``, or each round of a ``Repeat``) runs its
nodes through ``_exec(schedule, vals, rt)``, one stage at a time: a loop runs some
nodes once, some before the steps, the others at each step of its Python ``for``
loop or after the steps (:mod:`attngraph.lower.structure`). In the exported file
each body gets a subclass of its bundled class whose ``_exec`` is written out: the
body's nodes in order, each one statement under its line of the spec, with its
shape, run when the stage holds it. The loop's own logic (carries, feeds, teacher
forcing, the stages) stays the bundled ``Loop``'s, as written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.lower.codegen_text import (
    WIDTH,
    Doc,
    Pair,
    class_name,
    comment,
    render,
    shape,
    yaml_line,
)
from attngraph.lower.codegen_values import ref

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph
    from attngraph.lower.codegen_bundle import Bundle

__all__ = ["body_classes"]

#: the prefix of an escaped module key (see :mod:`attngraph.lower.names`)
_ESCAPE = "@"


def _is_body(m: nn.Module) -> bool:
    """A module that runs a graph's schedule (a ``GraphModule``)."""
    return hasattr(m, "plan") and hasattr(m, "groups") and callable(getattr(m, "_exec", None))


def _bodies_under(m: nn.Module, path: str) -> list[tuple[str, nn.Module]]:
    """``m`` if it runs a body, else the outermost modules under it that do (the
    rounds of a repeat)."""
    if _is_body(m):
        return [(path, m)]
    out: list[tuple[str, nn.Module]] = []
    for k, c in m._modules.items():
        if c is not None:
            out += _bodies_under(c, f"{path}.{k}")
    return out


def body_graphs(model: nn.Module, graph: Graph) -> dict[str, tuple[nn.Module, Graph]]:
    """Every module of ``model`` that runs a body, by its path, with that body's graph."""
    found: dict[str, tuple[nn.Module, Graph]] = {}

    def walk(gm: nn.Module, g: Graph, prefix: str) -> None:
        nodes = gm._modules.get("nodes")
        if nodes is None:
            return
        for key, m in nodes._modules.items():
            nid = key[len(_ESCAPE):] if key.startswith(_ESCAPE) else key
            body = g.node(nid).body
            if m is None or body is None:
                continue
            for path, sub in _bodies_under(m, f"{prefix}nodes.{key}"):
                if path not in found:
                    found[path] = (sub, body)
                    walk(sub, body, f"{path}.")

    walk(model, graph, "")
    return found


def _value(key: str, detach: bool) -> str:
    return f"vals[{key!r}]" + (".detach()" if detach else "")


def _module(nid: str) -> str:
    """The node's module in the body's NodeDict (indexed by node id)."""
    plain = ref(f"nodes.{nid}")
    return plain if plain == f"self.nodes.{nid}" else f"self.nodes[{nid!r}]"


def _staged(m: Any) -> bool:
    """A loop runs its body a stage at a time; a block, map or repeat round runs all
    of it (``run``: the whole plan) each time."""
    return any(c.__name__ == "Loop" for c in type(m).__mro__)


def _exec_source(m: Any, g: Graph, runtime: str, group: str | None) -> str:
    """The generated ``_exec`` of one body: its nodes in order (in a loop, each run
    when the stage holds it)."""
    staged = _staged(m)
    lines = [
        "    def _exec(self, schedule: list[Any], vals: dict[str, Tensor], rt: "
        f"{runtime},\n",
        "              drop: tuple[tuple[str, ...], ...] = ()) -> None:\n",
        '        """Run the nodes of ``schedule`` (a stage of the body) on ``vals``."""\n'
        if staged else '        """Run the body\'s nodes on ``vals`` (``schedule`` is all of '
        'them)."""\n',
    ]
    if staged:
        lines.append("        todo = {st.node for st in schedule}\n")
    pad = " " * (12 if staged else 8)
    for st in m.plan:
        node = g.node(st.node)
        if staged:
            lines.append(f"        if {st.node!r} in todo:\n")
        where = yaml_line(node)
        if where:
            lines.append(comment(where, len(pad)))
        x = Doc("{", [Pair(f"{inp.role!r}: ", _value(inp.key, inp.detach))
                      for inp in st.inputs], "}")
        members = m.groups.get(st.node)
        if members and group is not None:
            lines.append(comment(f"{', '.join(members)}: one matmul over their stacked "
                                 "weights", len(pad)))
            mods = Doc("[", [Doc("(", [repr(k), _module(k)], ")") for k in members], "]")
            call = Doc(f"{group}(", [mods, x, "rt"], ")")
            lines.append(f"{pad}vals.update(" + render(call, len(pad), WIDTH, lead=12, tail=1)
                         + ")\n")
            continue
        call = Doc(f"{_module(st.node)}(", [x, "rt"], ")")
        ports = list(node.types)
        if ports == [""]:
            target = f"vals[{st.node!r}]"
            note = f"  # {shape(node.types[''])}"
            text = render(call, len(pad), WIDTH, lead=len(target) + 3, tail=len(note))
            lines.append(f"{pad}{target} = {text}{note}\n")
            continue
        text = render(call, len(pad), WIDTH, lead=6)
        lines.append(f"{pad}out = {text}\n")
        lines.append(comment("ports: " + ", ".join(f"{p or repr(p)} {shape(t)}"
                                                   for p, t in node.types.items()), len(pad)))
        lines.append(f"{pad}vals.update({{f'{st.node}.{{p}}' if p else {st.node!r}: v "
                     "for p, v in out.items()})\n")
    return "".join(lines)


def body_classes(model: nn.Module, graph: Graph, bundle: Bundle, runtime: str,
                 group: Any) -> dict[str, str]:
    """Write a subclass for every body module of ``model`` (module doc); returns the
    class name to build each one with, by path. Bodies with the same code (the rounds
    of a repeat) share one class."""
    out: dict[str, str] = {}
    made: dict[tuple[str, str], str] = {}
    for path, (m, g) in body_graphs(model, graph).items():
        base = bundle.require(type(m))
        group_name = bundle.require(group) if m.groups else None  # type: ignore[attr-defined]
        body = _exec_source(m, g, runtime, group_name)
        if (base, body) in made:
            out[path] = made[(base, body)]
            continue
        suffix = "Body" if base == "GraphModule" else base
        name = bundle.claim(class_name(str(getattr(m, "graph_name", "")) or "body") + suffix)
        bundle.add_import("typing", "Any", "Any")
        bundle.add_import("torch", "Tensor", "Tensor")
        what = "run when\n    the loop's stage (``schedule``) holds it" if _staged(m) else \
            "in order"
        doc = (f'    """The body {getattr(m, "graph_name", "")!r} as code: each node one '
               f'statement, {what}."""\n\n')
        bundle.add_def(name, f"class {name}({base}):\n{doc}{body}")
        made[(base, body)] = name
        out[path] = name
    return out
