"""A compiled model as a standalone, readable PyTorch file: ``model.code``.

:func:`python_source` writes one Python file that imports torch (and the standard
library) only, never attngraph, and computes what the compiled model computes:

- one class per concept the spec uses: the lowering classes of its kinds
  (``Items``, ``Proj``, ``ScaledDot``, ``Softmax``, ``Readout``, ``Loop``...) and the
  helpers they call (``padding_mask``, ``masked_softmax``...), with their shape
  comments;
- a top-level ``class <SpecName>(nn.Module)`` whose ``__init__`` builds every node's
  module under the compiled model's parameter names (``nodes.<id>.<param>``), so
  ``load_state_dict(compiled.state_dict())`` fills it, and whose ``forward`` has the
  compiled model's signature (the inputs by name, then the optional masks) and is
  straight-line code: one statement per node, named after the node id, under the
  node's YAML line and with its output shape ``# (B, N, 32)``; it returns the same
  dict of outputs.

How the per-kind code is found: bundled, not re-written (option (b) of issue 13).
Each kind's lowering class stays the one home of its numerics; its source is
copied by :class:`~attngraph.lower.codegen_bundle.Bundle` (the transitive closure of
the functions, classes and constants it uses, attngraph imports replaced by the
copies), and the IR-reading ``__init__`` is replaced by literal constructor
arguments written by :class:`~attngraph.lower.codegen_values.Literals` from the
compiled instance. So a new kind exports without a code emitter of its own, and
the exported numbers are those of the compiled model by construction. The bodies
of ``block``, ``map``, ``repeat`` and ``loop`` nodes are written out too
(:mod:`attngraph.lower.codegen_body`): one statement per body node, in a subclass of
the bundled ``Loop`` (or ``Block``...), whose own logic (the Python ``for`` loop over
the steps, carries, feeds, stages) is the bundled code as written.

The file's parameters are empty (``torch.empty``): it holds code, not weights.
Buffers the state dict does not hold (rotary angles, ALiBi slopes) are written out.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch import nn

from attngraph.errors import LoweringError
from attngraph.lower.codegen_body import body_classes
from attngraph.lower.codegen_bundle import Bundle
from attngraph.lower.codegen_text import (
    WIDTH,
    Doc,
    Pair,
    class_name,
    comment,
    render,
    shape,
    wrap,
    yaml_line,
)
from attngraph.lower.codegen_values import Literals, ref

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.lower.module import AttnModel, Step

__all__ = ["class_name", "python_source"]

#: what writing a node can fail with: a value without a literal form (TypeError), a
#: class or function whose source cannot be read (OSError: defined in a notebook or
#: ``__main__``; SyntaxError, KeyError: a module not loaded from a file)
_UNWRITABLE = (TypeError, OSError, SyntaxError, KeyError)


def _configured(cls: type) -> bool:
    """Built from literal arguments: a module class of attngraph's (not a container)."""
    return issubclass(cls, nn.Module) and not issubclass(
        cls, (nn.ModuleDict, nn.ModuleList, nn.Sequential))


class _Names:
    """Local variable names of forward: node ids, unique, never a name forward uses."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)
        self.of: dict[str, str] = {}
        #: the name of a stacked group's results
        self.grouped = "grouped"

    def bind(self, key: str, name: str) -> None:
        self.of[key] = name
        self.taken.add(name)

    def fresh(self, base: str) -> str:
        """A new name like ``base`` for a variable of forward's own (``rt``)."""
        name = base
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def new(self, key: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in key.replace(".", "_"))
        if not base.isidentifier() or keyword.iskeyword(base):
            base = f"v_{base}"
        name = base
        while name in self.taken:
            name += "_"
        self.bind(key, name)
        return name


def _node_ref(key: str) -> str:
    return ref(f"nodes.{key}") if key.isidentifier() and not keyword.iskeyword(key) \
        and ref(f"nodes.{key}") == f"self.nodes.{key}" else f"self.nodes[{key!r}]"


def python_source(model: AttnModel, *, runtime: type, linear_group: Callable[..., Any]) -> str:
    """The source of a standalone Python file that builds and runs ``model``.

    ``model.code`` calls it; the model's module passes the pieces of its own
    interpreter that the file's forward calls (so this module does not import it).

    Parameters
    ----------
    model : AttnModel
        A compiled model (:func:`attngraph.compile`).
    runtime : type
        The per-forward state its nodes take (:class:`~attngraph.lower.module.Runtime`).
    linear_group : callable
        What runs a stacked group of linears (``_run_linear_group``).

    Returns
    -------
    str
        The file: it imports torch only; its top-level class (the spec's name in
        CamelCase) takes ``load_state_dict(model.state_dict())`` and then returns
        what ``model`` returns for the same inputs (see the module doc).

    Raises
    ------
    LoweringError
        When a node holds something that cannot be written as a literal.

    Examples
    --------
    >>> import attngraph
    >>> model = attngraph.compile("specs/multihead_attention.yaml", seed=0)
    >>> code = model.code  # python_source(model, ...)
    >>> "import attngraph" in code, "class MultiheadAttention(nn.Module):" in code
    (False, True)
    """
    if not hasattr(model, "binder"):
        msg = f"python_source takes a compiled model (AttnModel), not {type(model).__name__}"
        raise LoweringError(msg, None, "compile the spec first: attngraph.compile(spec)")
    graph: Graph = model.graph
    sig = model.binder.signature()
    if sig is None:
        bad = next((n for n in graph.inputs if keyword.iskeyword(n.id)
                    or not n.id.isidentifier()), None)
        name = bad.id if bad is not None else "?"
        msg = f"input '{name}': its name is a Python keyword, which forward cannot take"
        raise LoweringError(msg, bad.loc if bad is not None else None,
                            "rename the input to export the model as Python")
    top = class_name(graph.name)
    bundle = Bundle(configured=_configured)
    bundle.reserve(top)
    bundle.add_import("torch", None, "torch")
    bundle.add_import("torch", "nn", "nn")
    bundle.add_import("torch", "Tensor", "Tensor")
    runtime_name = bundle.require(runtime)
    try:
        classes = body_classes(model, graph, bundle, runtime_name, linear_group)
    except _UNWRITABLE as exc:
        msg = f"{graph.name}: a block or loop body cannot be exported as Python: {exc}"
        raise LoweringError(msg, None, "export it as pt2 instead") from exc
    literals = Literals(model, bundle, classes=classes)
    built: list[tuple[str, str, Doc | Pair | str]] = []
    #: per node, the schedule steps its expression names (written before it)
    pending: list[tuple[str, list[tuple[str, Any]]]] = []
    for key, mod in model.nodes._modules.items():
        if mod is None or _inline(mod):
            continue
        nid = key[1:] if key.startswith("@") else key
        try:
            expr = literals.module(mod, f"nodes.{key}")
            pending.append((key, literals.pending))
            literals.pending = []
        except _UNWRITABLE as exc:  # a value with no literal form; code with no source
            node = graph.node(nid)
            msg = f"node '{nid}' ({node.kind}) cannot be exported as Python: {exc}"
            raise LoweringError(msg, node.loc, "export it as pt2 instead") from exc
        built.append((nid, key, expr))
    group = bundle.require(linear_group) if model.groups else None
    init = _init(model, graph, built, literals, pending)
    forward = _forward(model, graph, sig, runtime_name, group, bundle)
    header = _header(graph, top, sig)
    defs = bundle.source()  # (before the imports: an annotation may add one)
    return (header + "from __future__ import annotations\n\n" + bundle.import_lines()
            + "\n\n\n" + defs + "\n\n" + f"class {top}(nn.Module):\n"
            + _class_doc(graph) + init + "\n" + forward)


def _inline(mod: Any) -> bool:
    """A node written as one line of torch in forward (an expression), not a module."""
    return callable(getattr(mod, "python_line", None)) and not any(
        True for _ in mod.parameters()) and not any(True for _ in mod.buffers())


def _header(graph: Graph, top: str, sig: Any) -> str:
    names = ", ".join(sig.parameters)
    outs = ", ".join(name for name, _ in graph.outputs)
    title = getattr(graph, "title", None) or graph.name
    first = wrap(f"{title}: the PyTorch module of spec {graph.name!r}, standalone.", 3, 0)
    return (f'"""{first}\n\n'
            "Written by ``attngraph export --format python`` (or ``model.code``). It imports\n"
            "torch only. Its parameters are empty: load the compiled model's state dict,\n"
            "whose names it shares::\n\n"
            f"    model = {top}()\n"
            "    model.load_state_dict(torch.load(\"state.pt\"))  # torch.save(compiled"
            ".state_dict(), ...)\n"
            "    model.eval()\n"
            f"    outputs = model({names})  # {{{outs}}}\n\n"
            "The classes are attngraph's code for the kinds the spec uses, copied as written;\n"
            f"``{top}.forward`` runs the spec's nodes in order, one statement per node.\n"
            '"""\n\n')


def _class_doc(graph: Graph) -> str:
    summary = " ".join(str(getattr(graph, "summary", "") or "").split())
    text = f"The model of spec {graph.name!r}" + (f": {summary}" if summary else ".")
    return f'    """{wrap(text, 7, 4)}"""\n\n'


def _init(model: AttnModel, graph: Graph, built: list[tuple[str, str, Doc | Pair | str]],
          literals: Literals, pending: list[tuple[str, list[tuple[str, Any]]]]) -> str:
    out = ["    def __init__(self) -> None:\n", "        super().__init__()\n",
           "        self.nodes = nn.ModuleDict()\n"]
    for nid, key, expr in built:
        node = graph.node(nid)
        where = yaml_line(node)
        out.append("\n" if len(out) > 3 else "")
        hoisted = [steps for steps in pending if steps[0] == key]
        if hoisted and hoisted[0][1]:
            out.append(comment(f"the steps of {nid}'s body: node, kind, inputs (role, value, "
                                "detach), module key", 8))
            for var, step in hoisted[0][1]:
                out.append(f"        {var} = " + render(step, 8, WIDTH, lead=len(var) + 3)
                           + "\n")
        if where:
            out.append(comment(where, 8))
        target = _node_ref(key)
        alias = [f for f in literals.fixups if f[0] == f"nodes.{key}"]
        if expr == "None" and alias:  # share: the owner's module, in the node's place
            literals.fixups.remove(alias[0])
            expr = alias[0][1]
        out.append(f"        {target} = " + render(expr, 8, WIDTH, lead=len(target) + 3) + "\n")
    if literals.fixups:
        out.append("        # shared modules and parameters (share:, tie:) and references\n")
        for path, value in literals.fixups:
            parent, _, last = path.rpartition(".")
            target = ref(path)
            text = render(value, 8, WIDTH, lead=len(target) + 3) if isinstance(
                value, (Doc, Pair)) else value
            if target.endswith(f".{last}") and target.startswith("self.") and \
                    "getattr" not in target:
                out.append(f"        {target} = {text}\n")
            else:
                out.append(f"        setattr({ref(parent)}, {last!r}, {text})\n")
    out.append("        #: extra tensors of the last forward (a policy's log-probabilities...)\n")
    out.append("        self.aux: dict[str, Tensor] = {}\n")
    return "".join(out)


def _forward(model: AttnModel, graph: Graph, sig: Any, runtime: str, group: str | None,
             bundle: Bundle) -> str:
    args = list(sig.parameters)
    used = {runtime, "self"} | ({group} if group else set())
    clash = sorted(set(args) & used)
    if clash:
        msg = f"input '{clash[0]}' has a name the exported forward uses"
        raise LoweringError(msg, None, "rename the input to export the model as Python")
    names = _Names(set(bundle.names) | set(args) | used | set(keyword.kwlist))
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
    lines = [head, f'        """{", ".join(args)} -> {{{outs}}}."""\n']
    lines += _bind_inputs(model, runtime, reads, rt)
    for st in model.plan:
        lines += _statement(st, model, graph, names, reads, group, rt, bundle)
    lines.append(f"        if {rt}.aux or {rt}.steps:  # per-node extras, stacked over loop "
                 "steps\n")
    lines.append(f"            self.aux = {rt}.finish()\n")
    ret = Doc("return {", [Pair(f"{name!r}: ", names.of[k] + (".detach()" if det else ""))
                           for name, k, det in model.out_keys], "}")
    lines.append("        " + render(ret, 8, WIDTH) + "\n")
    return "".join(lines)


def _bind_inputs(model: AttnModel, runtime: str, reads: set[str], rt: str) -> list[str]:
    """The runtime state: batch, dtype and device of the inputs, padding masks."""
    args = model.binder.args
    first = next(a for a in args if not a.port).name if args else None
    floats = [a.name for a in args if not a.port and a.t.dtype == "float"]
    ref_t = next(iter([*model.parameters(), *model.buffers()]), None)
    kw = []
    if first is not None:
        kw.append(f"batch={first}.shape[0]")
    if floats:
        kw.append(f"dtype={floats[0]}.dtype")
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
                    out.append(f"        {rt}.sizes[{d!r}] = {a.name}.shape[{1 + i}]\n")
    masks = [a for a in args if a.port == "mask"]
    if masks:
        out.append("        # padding masks (True = a real item), by the length they mask\n")
    seen: set[str] = set()
    for a in masks:
        x = a.input  # the input's own argument is named after it
        fill = f"{a.input}.mask" in reads
        if fill:
            out.append(f"        if {a.name} is None:\n")
            out.append(f"            {a.name} = {x}.new_ones({x}.shape[:{1 + a.t.rank}], "
                       "dtype=bool)\n")
            out.append("        else:\n")
            pad = "            "
        else:
            out.append(f"        if {a.name} is not None:\n")
            pad = "            "
        if a.t.rank == 2:  # nested tokens: a sentence is real when a word of it is
            out.append(f"{pad}{rt}.masks[{str(a.t.dims[0])!r}] = {a.name}.any(-1)\n")
            out.append(f"{pad}{rt}.masks[{str(a.t.dims[1])!r}] = {a.name}\n")
        else:
            sym = str(a.t.dims[0])
            op = f"{rt}.masks.setdefault({sym!r}, {a.name})" if sym in seen else \
                f"{rt}.masks[{sym!r}] = {a.name}"
            out.append(f"{pad}{op}\n")
            seen.add(sym)
    for a in args:  # as the binder does: only the real entries of positions are read
        own = str(a.t.dims[0]) if a.t.dims else ""
        if a.port or a.type != "positions" or own not in seen:
            continue
        out.append(f"        # padded entries of '{a.input}' (its own mask) read position 0\n")
        out.append(f"        if {own!r} in {rt}.masks:\n")
        out.append(f"            {a.input} = {a.input}.masked_fill(~{rt}.masks[{own!r}], 0)\n")
    return out


def _statement(st: Step, model: AttnModel, graph: Graph, names: _Names, reads: set[str],
               group: str | None, rt: str, bundle: Bundle) -> list[str]:
    """The lines of one scheduled node (or stacked group of linears)."""
    node = graph.node(st.node)
    out = ["\n"]
    where = yaml_line(node)
    if where:
        out.append(comment(where, 8))
    mod = model.nodes._modules.get(st.key)
    if mod is not None and _inline(mod):  # an expression: one line of torch
        args = {inp.role: names.of[inp.key] + (".detach()" if inp.detach else "")
                for inp in st.inputs}
        write: Callable[..., str] = mod.python_line  # type: ignore[assignment]
        line = write(args, rt, bundle.require)
        if "F." in line:
            bundle.add_import("torch.nn", "functional", "F")
        var = names.new(st.node)
        out.append(f"        {var} = {line}  # {shape(node.types[''])}\n")
        return out
    x = Doc("{", [Pair(f"{inp.role!r}: ", names.of[inp.key] + (".detach()" if inp.detach
                                                                  else ""))
                  for inp in st.inputs], "}")
    members = model.groups.get(st.node)
    if members and group is not None:
        mods = Doc("[", [Doc("(", [repr(m), _node_ref(_key(m))], ")") for m in members], "]")
        out.append(comment(f"{', '.join(members)}: one matmul over their stacked weights", 8))
        call = Doc(f"{group}(", [mods, x, rt], ")")
        grouped = names.grouped
        out.append(f"        {grouped} = " + render(call, 8, WIDTH, lead=len(grouped) + 3)
                   + "\n")
        for m in members:
            var = names.new(m)
            out.append(f"        {var} = {grouped}[{m!r}]  # "
                       f"{shape(graph.node(m).types[''])}\n")
        return out
    call = Doc(f"{_node_ref(st.key)}(", [x, rt], ")")
    ports = list(node.types)
    if ports == [""]:
        var = names.new(st.node)
        note = f"  # {shape(node.types[''])}"
        text = render(call, 8, WIDTH, lead=len(var) + 3, tail=len(note))
        out.append(f"        {var} = {text}{note}\n")
        return out
    res = names.new(f"{st.node}_out")
    out.append(f"        {res} = " + render(call, 8, WIDTH, lead=len(res) + 3) + "\n")
    for port in ports:
        k = f"{st.node}.{port}" if port else st.node
        if k not in reads:
            continue
        var = names.new(k)
        out.append(f"        {var} = {res}[{port!r}]  # {shape(node.types[port])}\n")
    return out


def _key(nid: str) -> str:
    from attngraph.lower.names import module_key

    return module_key(nid)
