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

Whatever the spec's names and text, the file parses and runs: the spec's class
(:func:`class_name`), forward's variables and the bodies' classes are named by one
:class:`~attngraph.lower.names.Mangler` (a bundled helper of the same name is renamed
instead); user text reaches docstrings, comments and strings only through
:func:`~attngraph.lower.codegen_text.escape`; and the file is parsed and compiled
(:func:`checked`) before it is returned, a failure being a ``LoweringError`` at the
spec that asks for a report.
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch import nn

from attngraph.errors import LoweringError, SourceLoc
from attngraph.lower.codegen_body import body_classes, forward_source, inline, node_ref
from attngraph.lower.codegen_bundle import Bundle
from attngraph.lower.codegen_loader import LOADER_NAMES, loader_source
from attngraph.lower.codegen_text import (
    WIDTH,
    Doc,
    Pair,
    class_name,
    comment,
    docstring_text,
    quote,
    render,
    wrap,
    yaml_line,
)
from attngraph.lower.codegen_values import Literals, ref

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.lower.module import AttnModel

__all__ = ["checked", "class_name", "python_source"]

#: what writing a node can fail with: a value without a literal form (TypeError), a
#: class or function whose source cannot be read (OSError: defined in a notebook or
#: ``__main__``; SyntaxError, KeyError: a module not loaded from a file)
_UNWRITABLE = (TypeError, OSError, SyntaxError, KeyError)


def _configured(cls: type) -> bool:
    """Built from literal arguments: a module class of attngraph's (not a container)."""
    return issubclass(cls, nn.Module) and not issubclass(
        cls, (nn.ModuleDict, nn.ModuleList, nn.Sequential))


def python_source(model: AttnModel, *, runtime: type, linear_group: Callable[..., Any],
                  weights: str | None = None) -> str:
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
    weights : str, optional
        The name of a safetensors file of the model's state dict, written beside the
        file: the file then ends with ``load(path=None)``, which builds the model with
        those weights, in eval mode (:mod:`attngraph.lower.codegen_loader`).

    Returns
    -------
    str
        The file: it imports torch only; its top-level class (the spec's name in
        CamelCase) takes ``load_state_dict(model.state_dict())`` and then returns
        what ``model`` returns for the same inputs (see the module doc).

    Raises
    ------
    LoweringError
        When a node holds something that cannot be written as a literal, an input's
        name cannot be a parameter of forward (a keyword; ``torch`` where a formula's
        line reads the module), or the file does not compile (a bug: :func:`checked`).

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
    sig = _check_inputs(graph, sig)
    top = class_name(graph.name)
    bundle = Bundle(configured=_configured)
    bundle.reserve(top)  # a helper of the same name is renamed (``Runtime_module``)
    for own in LOADER_NAMES if weights is not None else ():
        bundle.reserve(own)
    # forward's parameters are fixed (the model's signature): the file's own names go
    # around them
    for arg in sig.parameters:
        bundle.reserve(arg)
    bundle.add_import("torch", None, "torch")
    nn_name = bundle.add_import("torch", "nn", "nn")
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
        if mod is None or inline(mod):
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
    forward = forward_source(model, graph, sig, runtime_name, group, bundle)
    loader = loader_source(bundle, top, weights) if weights is not None else ""
    defs = bundle.source()  # (before the imports: an annotation may add one)
    header = _header(graph, top, sig, loads=weights is not None)
    source = (header + "from __future__ import annotations\n\n" + bundle.import_lines()
              + "\n\n\n" + defs + "\n\n" + f"class {top}({nn_name}.Module):\n"
              + _class_doc(graph) + init + "\n" + forward + loader)
    return checked(source, graph)


def checked(source: str, graph: Graph) -> str:
    """``source`` when it parses and compiles, else the internal error that says so
    (nothing is written: the file never leaves attngraph broken)."""
    try:
        compile(ast.parse(source, filename="<model.code>"), "<model.code>", "exec",
                dont_inherit=True)
    except (SyntaxError, ValueError) as exc:  # ValueError: a NUL byte in the source
        where = f" (line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.lineno else ""
        what = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        msg = f"{graph.name}: the generated Python file does not compile: {what}{where}"
        raise LoweringError(msg, SourceLoc(graph.file),
                            "this is a bug in attngraph's Python export: report it with the "
                            "spec (--format pt2 exports the model meanwhile)") from None
    return source


def _check_inputs(graph: Graph, sig: Any) -> Any:
    """forward's signature, when every input can be its parameter (no keyword)."""
    if sig is not None:
        return sig
    bad = next((n for n in graph.inputs if keyword.iskeyword(n.id)
                or not n.id.isidentifier()), None)
    name = bad.id if bad is not None else "?"
    msg = f"input '{name}': its name is a Python keyword, which forward cannot take"
    raise LoweringError(msg, bad.loc if bad is not None else SourceLoc(graph.file),
                        "rename the input to export the model as Python")


def _header(graph: Graph, top: str, sig: Any, *, loads: bool = False) -> str:
    names = ", ".join(sig.parameters)
    outs = docstring_text(", ".join(name for name, _ in graph.outputs))
    title = getattr(graph, "title", None) or graph.name
    first = wrap(f"{title}: the PyTorch module of spec {quote(graph.name)}, standalone.", 3, 0)
    how = ("torch only. ``load()`` builds it with the weights written beside it (a\n"
           "safetensors file, which it reads with torch alone), in eval mode::\n\n"
           "    model = load()\n") if loads else (
           "torch only. Its parameters are empty: load the compiled model's state dict,\n"
           "whose names it shares::\n\n"
           f"    model = {top}()\n"
           "    model.load_state_dict(torch.load(\"state.pt\"))  # torch.save(compiled"
           ".state_dict(), ...)\n"
           "    model.eval()\n")
    made = ("Written by ``attngraph export RUN --format python``. It imports\n" if loads else
            "Written by ``attngraph export --format python`` (or ``model.code``). It imports\n")
    return (f'"""{first}\n\n' + made + how +
            f"    outputs = model({names})  # {{{outs}}}\n\n"
            "The classes are attngraph's code for the kinds the spec uses, copied as written;\n"
            f"``{top}.forward`` runs the spec's nodes in order, one statement per node.\n"
            '"""\n\n')


def _class_doc(graph: Graph) -> str:
    summary = " ".join(str(getattr(graph, "summary", "") or "").split())
    text = f"The model of spec {quote(graph.name)}" + (f": {summary}" if summary else ".")
    return f'    """{wrap(text, 7, 4)}"""\n\n'


def _init(model: AttnModel, graph: Graph, built: list[tuple[str, str, Doc | Pair | str]],
          literals: Literals, pending: list[tuple[str, list[tuple[str, Any]]]]) -> str:
    nn_name = literals.bundle.add_import("torch", "nn", "nn")
    out = ["    def __init__(self) -> None:\n", "        super().__init__()\n",
           f"        self.nodes = {nn_name}.ModuleDict()\n"]
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
        target = node_ref(key)
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
                out.append(f"        setattr({ref(parent)}, {quote(last)}, {text})\n")
    out.append("        #: extra tensors of the last forward (a policy's log-probabilities...)\n")
    out.append("        self.aux: dict[str, Tensor] = {}\n")
    return "".join(out)
