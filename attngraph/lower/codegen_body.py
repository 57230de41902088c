"""The statements of the file: the spec's ``forward`` and the bodies of ``block``,
``map``, ``repeat`` and ``loop`` nodes.

:func:`forward_source` writes the top-level class's ``forward``: the inputs bound to
the runtime state, then one statement per scheduled node, each value in a variable
named after its node id by one :class:`~attngraph.lower.names.Mangler` (so never a
keyword, a builtin, a parameter or a name of the file).

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

import ast
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attngraph.errors import LoweringError
from attngraph.lower.codegen_text import (
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
from attngraph.lower.codegen_values import ref
from attngraph.lower.names import Mangler, identifier, module_key

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph
    from attngraph.lower.codegen_bundle import Bundle
    from attngraph.lower.module import AttnModel, Step

__all__ = ["FORWARD_GLOBALS", "body_classes", "body_classes_under", "forward_source", "inline",
           "node_ref"]

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
    _walk(model, graph, "", found)
    return found


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
    plain file's writer ``w`` (:mod:`attngraph.lower.emit.writer`), by path."""
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


def body_classes(model: nn.Module, graph: Graph, bundle: Bundle, runtime: str,
                 group: Any) -> dict[str, str]:
    """Write a subclass for every body module of ``model`` (module doc); returns the
    class name to build each one with, by path. Bodies with the same code (the rounds
    of a repeat) share one class."""
    return _write_bodies(body_graphs(model, graph), bundle, runtime, group)


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


def node_ref(key: str) -> str:
    """The node's module in ``self.nodes`` (an ``nn.ModuleDict``) by its module key
    (``@type`` for the node ``type``: :func:`~attngraph.lower.names.module_key`)."""
    plain = ref(f"nodes.{key}")
    return plain if plain == f"self.nodes.{key}" else f"self.nodes[{quote(key)}]"


def inline(mod: Any) -> bool:
    """A node written as one line of torch in forward (an expression), not a module."""
    return callable(getattr(mod, "python_line", None)) and not any(
        True for _ in mod.parameters()) and not any(True for _ in mod.buffers())


class _Locals:
    """forward's variables: one :class:`Mangler` identifier per value (node id, or
    ``id.port``), never a name the file defines or forward reads; each is kept from
    the bundle too, so a helper bundled later is named around it."""

    def __init__(self, bundle: Bundle, params: list[str]) -> None:
        self.bundle = bundle
        #: forward's parameters (the inputs, by name)
        self.params = frozenset(params)
        reserved = set(params) | FORWARD_GLOBALS
        self.mangler = Mangler(set(bundle.names) | reserved)
        #: value key -> its variable
        self.of: dict[str, str] = {}
        #: the variable of a stacked group's results
        self.grouped = "grouped"

    def bind(self, key: str, name: str) -> None:
        """``key`` is read from ``name`` (a parameter of forward)."""
        self.of[key] = name
        self.mangler.reserve(name)

    def new(self, key: str) -> str:
        """A variable for the value ``key``."""
        self.of[key] = name = self.mangler.name(key)
        self.bundle.reserve(name)
        return name

    def fresh(self, base: str) -> str:
        """A new variable like ``base`` of forward's own (``rt``)."""
        name = self.mangler.fresh(base)
        self.bundle.reserve(name)
        return name


def forward_source(model: AttnModel, graph: Graph, sig: Any, runtime: str, group: str | None,
             bundle: Bundle) -> str:
    args = list(sig.parameters)
    names = _Locals(bundle, args)
    rt = names.fresh("rt")
    names.grouped = names.fresh("grouped")
    binder = model.binder
    for a in binder.args:
        names.bind(f"{a.input}.{a.port}" if a.port else a.input, a.name)
    reads = {inp.key for st in model.plan for inp in st.inputs} | {k for _, k, _ in model.out_keys}
    params = [f"{n}: Tensor | None = None" if p.default is None else f"{n}: Tensor"
              for n, p in sig.parameters.items()]
    head = "    def forward(self, " + ", ".join(params) + ") -> dict[str, Tensor]:\n"
    if len(head) > WIDTH + 1:
        head = ("    def forward(\n" + "".join(f"        {p},\n" for p in ["self", *params])
                + "    ) -> dict[str, Tensor]:\n")
    outs = ", ".join(name for name, _ in graph.outputs)
    doc = docstring_text(f"{', '.join(args)} -> {{{outs}}}.")
    lines = [head, f'        """{doc}"""\n']
    lines += _bind_inputs(model, runtime, reads, rt, bundle)
    for st in model.plan:
        lines += _statement(st, model, graph, names, reads, group, rt, bundle)
    lines.append(f"        if {rt}.aux or {rt}.steps:  # per-node extras, stacked over loop "
                 "steps\n")
    lines.append(f"            self.aux = {rt}.finish()\n")
    ret = Doc("return {", [Pair(f"{quote(name)}: ", names.of[k] + (".detach()" if det else ""))
                           for name, k, det in model.out_keys], "}")
    lines.append("        " + render(ret, 8, WIDTH) + "\n")
    return "".join(lines)


def _bind_inputs(model: AttnModel, runtime: str, reads: set[str], rt: str,
                 bundle: Bundle) -> list[str]:
    """The runtime state: batch, dtype and device of the inputs, padding masks."""
    args = model.binder.args
    first = next(a for a in args if not a.port).name if args else None
    floats = [a.name for a in args if not a.port and a.t.dtype == "float"]
    params = {a.name for a in args}
    ref_t = next(iter([*model.named_parameters(), *model.named_buffers()]), None)
    kw = []
    if first is not None:
        kw.append(f"batch={first}.shape[0]")
    if floats:
        kw.append(f"dtype={floats[0]}.dtype")
    elif ref_t is not None and "next" in params:  # the builtin hidden: the tensor by path
        kw.append(f"dtype={ref(ref_t[0])}.dtype")
    elif ref_t is not None:
        which = "parameters" if next(iter(model.parameters()), None) is not None else "buffers"
        kw.append(f"dtype=next(self.{which}()).dtype")
    if first is not None:
        kw.append(f"device={first}.device")
    out = [f"        {rt} = " + render(Doc(f"{runtime}(", list(kw), ")"), 8, WIDTH,
                                          lead=len(rt) + 3) + "\n"]
    if any(getattr(m, "reads_sizes", False) for m in model.modules()):
        seen_sizes: set[str] = set()
        out.append("        # the size of each length in this batch\n")
        for a in args:
            if a.port:
                continue
            for i, d in enumerate(a.t.dims):
                if isinstance(d, str) and d not in seen_sizes:
                    seen_sizes.add(d)
                    out.append(f"        {rt}.sizes[{quote(d)}] = {a.name}.shape[{1 + i}]\n")
    masks = [a for a in args if a.port == "mask"]
    if masks:
        out.append("        # padding masks (True = a real item), by the length they mask\n")
    seen: set[str] = set()
    for a in masks:
        x = a.input  # the input's own argument is named after it
        fill = f"{a.input}.mask" in reads
        if fill:
            out.append(f"        if {a.name} is None:\n")
            dtype = "bool" if "bool" not in params else \
                bundle.add_import("torch", None, "torch") + ".bool"
            out.append(f"            {a.name} = {x}.new_ones({x}.shape[:{1 + a.t.rank}], "
                       f"dtype={dtype})\n")
            out.append("        else:\n")
            pad = "            "
        else:
            out.append(f"        if {a.name} is not None:\n")
            pad = "            "
        if a.t.rank == 2:  # nested tokens: a sentence is real when a word of it is
            out.append(f"{pad}{rt}.masks[{quote(str(a.t.dims[0]))}] = {a.name}.any(-1)\n")
            out.append(f"{pad}{rt}.masks[{quote(str(a.t.dims[1]))}] = {a.name}\n")
        else:
            sym = str(a.t.dims[0])
            op = f"{rt}.masks.setdefault({quote(sym)}, {a.name})" if sym in seen else \
                f"{rt}.masks[{quote(sym)}] = {a.name}"
            out.append(f"{pad}{op}\n")
            seen.add(sym)
    for a in args:  # as the binder does: only the real entries of positions are read
        own = str(a.t.dims[0]) if a.t.dims else ""
        if a.port or a.type != "positions" or own not in seen:
            continue
        out.append(comment(f"padded entries of '{a.input}' (its own mask) read position 0", 8))
        out.append(f"        if {quote(own)} in {rt}.masks:\n")
        out.append(f"            {a.input} = {a.input}.masked_fill(~{rt}.masks[{quote(own)}], 0)\n")
    return out


def _not_hidden(line: str, nid: str, graph: Graph, params: frozenset[str]) -> None:
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


def _statement(st: Step, model: AttnModel, graph: Graph, names: _Locals, reads: set[str],
               group: str | None, rt: str, bundle: Bundle) -> list[str]:
    """The lines of one scheduled node (or stacked group of linears)."""
    node = graph.node(st.node)
    out = ["\n"]
    where = yaml_line(node)
    if where:
        out.append(comment(where, 8))
    mod = model.nodes._modules.get(st.key)
    if mod is not None and inline(mod):  # an expression: one line of torch
        args = {inp.role: names.of[inp.key] + (".detach()" if inp.detach else "")
                for inp in st.inputs}
        write: Callable[..., str] = mod.python_line  # type: ignore[assignment]
        line = write(args, rt, bundle.require)
        _not_hidden(line, st.node, graph, names.params)
        if "F." in line:
            bundle.add_import("torch.nn", "functional", "F")
        var = names.new(st.node)
        out.append(f"        {var} = {line}  # {shape(node.types[''])}\n")
        return out
    x = Doc("{", [Pair(f"{quote(inp.role)}: ", names.of[inp.key] + (".detach()" if inp.detach
                                                                  else ""))
                  for inp in st.inputs], "}")
    members = model.groups.get(st.node)
    if members and group is not None:
        mods = Doc("[", [Doc("(", [quote(m), node_ref(module_key(m))], ")") for m in members],
                   "]")
        out.append(comment(f"{', '.join(members)}: one matmul over their stacked weights", 8))
        call = Doc(f"{group}(", [mods, x, rt], ")")
        grouped = names.grouped
        out.append(f"        {grouped} = " + render(call, 8, WIDTH, lead=len(grouped) + 3)
                   + "\n")
        for m in members:
            var = names.new(m)
            out.append(f"        {var} = {grouped}[{quote(m)}]  # "
                       f"{shape(graph.node(m).types[''])}\n")
        return out
    call = Doc(f"{node_ref(st.key)}(", [x, rt], ")")
    ports = list(node.types)
    if ports == [""]:
        var = names.new(st.node)
        note = f"  # {shape(node.types[''])}"
        text = render(call, 8, WIDTH, lead=len(var) + 3, tail=len(note))
        out.append(f"        {var} = {text}{note}\n")
        return out
    res = names.fresh(f"{st.node}_out")
    out.append(f"        {res} = " + render(call, 8, WIDTH, lead=len(res) + 3) + "\n")
    for port in ports:
        k = f"{st.node}.{port}" if port else st.node
        if k not in reads:
            continue
        var = names.new(k)
        out.append(f"        {var} = {res}[{quote(port)}]  # {shape(node.types[port])}\n")
    return out
