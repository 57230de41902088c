"""The bodies inside a copied node: ``block``, ``map``, ``repeat`` and ``loop``
modules that the plain file (:mod:`attngraph.lower.export.emit`) does not write itself.

When a node falls back to its copied lowering class (its kind has no emit rule, or
the rule declines its settings) and that node holds a body, the body's module
(``Block``, ``Map``, ``Loop``, or each round of a ``Repeat``) runs its nodes through
``_exec(schedule, vals, rt)``, one stage at a time: a loop runs some nodes once, some
before the steps, the others at each step of its Python ``for`` loop or after the
steps (:mod:`attngraph.lower.rules.loop`). In the exported file each such body gets a
subclass of its bundled class whose ``_exec`` is written out: the body's nodes in
order, each one statement under its line of the spec, with its shape, run when the
stage holds it (:func:`body_classes_under`).

:func:`not_hidden` checks that a formula's line of torch reads ``torch``/``F`` as
written (no input of forward named so).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from attngraph.errors import LoweringError
from attngraph.lower.export.codegen_text import (
    WIDTH,
    Doc,
    Pair,
    comment,
    docstring_text,
    quote,
    render,
    shape,
    yaml_line,
)
from attngraph.lower.export.codegen_values import ref
from attngraph.lower.runtime.names import identifier

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph
    from attngraph.lower.export.codegen_bundle import Bundle

__all__ = ["FORWARD_GLOBALS", "body_classes_under", "not_hidden"]

#: the prefix of an escaped module key (see :mod:`attngraph.lower.runtime.names`)
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


def _walk(gm: nn.Module, g: Graph, prefix: str,
          found: dict[str, tuple[nn.Module, Graph]]) -> None:
    nodes = gm._modules.get("nodes")
    if nodes is None:
        return
    for key, m in nodes._modules.items():
        nid = key[len(_ESCAPE):] if key.startswith(_ESCAPE) else key
        body = g.node(nid).body
        if m is None or body is None:
            continue
        _found_under(m, body, f"{prefix}nodes.{key}", found)


def _found_under(m: nn.Module, body: Graph, path: str,
                 found: dict[str, tuple[nn.Module, Graph]]) -> None:
    for sub_path, sub in _bodies_under(m, path):
        if sub_path not in found:
            found[sub_path] = (sub, body)
            _walk(sub, body, f"{sub_path}.", found)


def body_classes_under(w: Any, m: nn.Module, node: Any, path: str) -> dict[str, str]:
    """The classes of the bodies inside ``m``, the module of ``node`` at ``path`` of a
    plain file's writer ``w`` (:mod:`attngraph.lower.export.emit.writer`), by path."""
    if node.body is None:
        return {}
    found: dict[str, tuple[nn.Module, Graph]] = {}
    _found_under(m, node.body, path, found)
    if not found:
        return {}
    runtime = w.bundle.require(w.runtime)
    return _write_bodies(found, w.bundle, runtime, w.linear_group)


def _value(key: str, detach: bool) -> str:
    return f"vals[{quote(key)}]" + (".detach()" if detach else "")


def _module(nid: str) -> str:
    """The node's module in the body's NodeDict (indexed by node id)."""
    plain = ref(f"nodes.{nid}")
    return plain if plain == f"self.nodes.{nid}" else f"self.nodes[{quote(nid)}]"


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
            lines.append(f"        if {quote(st.node)} in todo:\n")
        where = yaml_line(node)
        if where:
            lines.append(comment(where, len(pad)))
        x = Doc("{", [Pair(f"{quote(inp.role)}: ", _value(inp.key, inp.detach))
                      for inp in st.inputs], "}")
        members = m.groups.get(st.node)
        if members and group is not None:
            lines.append(comment(f"{', '.join(members)}: one matmul over their stacked "
                                 "weights", len(pad)))
            mods = Doc("[", [Doc("(", [quote(k), _module(k)], ")") for k in members], "]")
            call = Doc(f"{group}(", [mods, x, "rt"], ")")
            lines.append(f"{pad}vals.update(" + render(call, len(pad), WIDTH, lead=12, tail=1)
                         + ")\n")
            continue
        call = Doc(f"{_module(st.node)}(", [x, "rt"], ")")
        ports = list(node.types)
        if ports == [""]:
            target = f"vals[{quote(st.node)}]"
            note = f"  # {shape(node.types[''])}"
            text = render(call, len(pad), WIDTH, lead=len(target) + 3, tail=len(note))
            lines.append(f"{pad}{target} = {text}{note}\n")
            continue
        text = render(call, len(pad), WIDTH, lead=6)
        lines.append(f"{pad}out = {text}\n")
        lines.append(comment("ports: " + ", ".join(f"{p or quote(p)} {shape(t)}"
                                                   for p, t in node.types.items()), len(pad)))
        lines.append(f"{pad}vals.update({{{quote(st.node + '.')} + p if p else "
                     f"{quote(st.node)}: v for p, v in out.items()}})\n")
    return "".join(lines)


def _write_bodies(found: dict[str, tuple[nn.Module, Graph]], bundle: Bundle, runtime: str,
                  group: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    made: dict[tuple[str, str], str] = {}
    for path, (m, g) in found.items():
        base = bundle.require(type(m))
        group_name = bundle.require(group) if m.groups else None  # type: ignore[attr-defined]
        body = _exec_source(m, g, runtime, group_name)
        if (base, body) in made:
            out[path] = made[(base, body)]
            continue
        suffix = "Body" if base == "GraphModule" else base
        own = identifier(str(getattr(m, "graph_name", "")) or "body", camel=True, prefix="Model")
        name = bundle.claim(own + suffix)
        bundle.add_import("typing", "Any", "Any")
        bundle.add_import("torch", "Tensor", "Tensor")
        what = "run when\n    the loop's stage (``schedule``) holds it" if _staged(m) else \
            "in order"
        title = docstring_text(f"The body {quote(str(getattr(m, 'graph_name', '')))} as code:")
        doc = f'    """{title} each node one statement, {what}."""\n\n'
        bundle.add_def(name, f"class {name}({base}):\n{doc}{body}")
        made[(base, body)] = name
        out[path] = name
    return out


#: names an inline node's line of torch reads as written (``torch.exp(x)``, ``F.elu(x)``)
#: and forward's ``self``: never a variable of forward's own
FORWARD_GLOBALS = frozenset({"self", "torch", "F"})


def not_hidden(line: str, nid: str, graph: Graph, params: frozenset[str]) -> None:
    """An inline node's line reads ``torch``/``F`` as written: no input may hide it."""
    try:
        tree = ast.parse(line, mode="eval")
    except SyntaxError:  # the whole file's check (codegen.checked) reports it
        return
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    hidden = sorted(read & params & FORWARD_GLOBALS)
    if hidden:
        inp = graph.node(hidden[0]) if hidden[0] in graph else None
        msg = (f"input '{hidden[0]}': node '{nid}' is exported as torch code that reads "
               f"the module '{hidden[0]}', which this input's name hides in forward")
        raise LoweringError(msg, inp.loc if inp is not None else graph.node(nid).loc,
                            "rename the input to export the model as Python (--format pt2 "
                            "exports it as it is)")
