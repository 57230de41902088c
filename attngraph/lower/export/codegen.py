r"""A compiled model as a standalone, readable PyTorch file: ``model.code``.

:func:`python_source` writes one Python file that imports torch (and the standard
library) only, never attngraph, and computes what the compiled model computes: the
code a person would write for the spec.

- A ``class <SpecName>(nn.Module)`` whose ``__init__`` builds standard modules and
  parameters (``nn.Linear``, ``nn.Embedding``, ``nn.GRU``, ``nn.Parameter``...)
  under readable names, and whose ``forward`` has the compiled model's signature
  (the inputs by name, then the optional masks) and is straight-line code in the
  spec's order: one statement per node where one does, named after the node id,
  under the node's YAML line and with its output shape ``# (B, N, 32)``; a loop is a
  Python ``for`` over its steps with its body inline, a repeat a ``for`` over its
  rounds. It returns the same dict of outputs.
- Only the helpers the spec uses (``masked_softmax``...), copied from attngraph.
- ``STATE_NAMES``: the compiled model's state-dict names and the file's; a load hook
  renames them, so ``load_state_dict(compiled.state_dict())`` fills the file.

How each node is written: by the ``emit`` rule of its kind
(:attr:`attngraph.kinds.base.Kind.emit`, the built-in ones in
:mod:`attngraph.lower.export.emit`), which reads the compiled node module's settings and
writes plain torch (:mod:`attngraph.lower.export.emit.writer` assembles the file). A kind
without a rule (a plugin's), or a node whose settings its rule does not write, falls
back to the bundling of issue 13: its lowering class is copied by
:class:`~attngraph.lower.export.codegen_bundle.Bundle` with what it uses, built from literal
arguments (:class:`~attngraph.lower.export.codegen_values.Literals`) and called with the
runtime state it reads; a body inside such a node gets a class of its own
(:mod:`attngraph.lower.export.codegen_body`). So a plugin's kind still exports.

The file's parameters are empty (``torch.empty``): it holds code, not weights.
Buffers the state dict does not hold (rotary angles, ALiBi slopes) are written out.

Whatever the spec's names and text, the file parses and runs: the spec's class
(:func:`class_name`), forward's variables and the file's attributes are named by
:class:`~attngraph.lower.runtime.names.Mangler`\ s (a bundled helper of the same name is
renamed instead); user text reaches docstrings, comments and strings only through
:func:`~attngraph.lower.export.codegen_text.escape`; and the file is parsed and compiled
(:func:`checked`) before it is returned, a failure being a ``LoweringError`` at the
spec that asks for a report.
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from attngraph.errors import LoweringError, SourceLoc
from attngraph.lower.export.codegen_loader import LOADER_NAMES, loader_source
from attngraph.lower.export.codegen_text import (
    class_name,
    docstring_text,
    quote,
    wrap,
)
from attngraph.lower.export.emit.file import plain_source

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.lower.export.emit.writer import Writer
    from attngraph.lower.runtime.module import AttnModel

__all__ = ["checked", "class_name", "python_source"]

#: what writing a node can fail with: a value without a literal form (TypeError), a
#: class or function whose source cannot be read (OSError: defined in a notebook or
#: ``__main__``; SyntaxError, KeyError: a module not loaded from a file)
_UNWRITABLE = (TypeError, OSError, SyntaxError, KeyError)


def python_source(model: AttnModel, *, runtime: type, linear_group: Callable[..., Any],
                  weights: str | None = None, report: list[str] | None = None) -> str:
    """The source of a standalone Python file that builds and runs ``model``.

    ``model.code`` calls it; the model's module passes the pieces of its own
    interpreter that the file's forward calls (so this module does not import it).

    Parameters
    ----------
    model : AttnModel
        A compiled model (:func:`attngraph.compile`).
    runtime : type
        The per-forward state its nodes take (:class:`~attngraph.lower.runtime.module.Runtime`).
    linear_group : callable
        What runs a stacked group of linears (``_run_linear_group``).
    weights : str, optional
        The name of a safetensors file of the model's state dict, written beside the
        file: the file then ends with ``load(path=None)``, which builds the model with
        those weights, in eval mode (:mod:`attngraph.lower.export.codegen_loader`).
    report : list of str, optional
        Gets the kind of every node written by its copied lowering class (no emit
        rule for it, or one that declined the node's settings).

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
    graph, sig = _compiled(model)
    top = class_name(graph.name)
    text, w = _plain(model, sig, top, weights, runtime, linear_group)
    if report is not None:
        report.extend(w.fallbacks)
    header = _header(graph, top, sig, loads=weights is not None)
    return checked(header + "from __future__ import annotations\n\n" + text, graph)


def _compiled(model: Any) -> tuple[Graph, Any]:
    """The graph of a compiled model, and its forward's signature (refused when an
    input cannot be a parameter of it)."""
    if not hasattr(model, "binder"):
        msg = f"python_source takes a compiled model (AttnModel), not {type(model).__name__}"
        raise LoweringError(msg, None, "compile the spec first: attngraph.compile(spec)")
    graph: Graph = model.graph
    return graph, _check_inputs(graph, model.binder.signature())


def _plain(model: AttnModel, sig: Any, top: str, weights: str | None, runtime: type,
           linear_group: Callable[..., Any]) -> tuple[str, Writer]:
    """The file's code after its header, and the writer that wrote it
    (:func:`~attngraph.lower.export.emit.file.plain_source`); a node that cannot be
    written is refused at the spec."""
    graph = model.graph
    reserved = set(sig.parameters) | (set(LOADER_NAMES) if weights is not None else set())

    def tail(bundle: Any) -> str:
        return loader_source(bundle, top, weights) if weights is not None else ""

    try:
        return plain_source(model, sig, top, reserved, runtime, linear_group, tail,
                            _class_doc(graph))
    except _UNWRITABLE as exc:  # a value with no literal form; code with no source
        msg = f"{graph.name}: a node cannot be exported as Python: {exc}"
        raise LoweringError(msg, SourceLoc(graph.file), "export it as pt2 instead") from exc


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
            "The functions above the class are attngraph's, copied as written;\n"
            f"``{top}.forward`` runs the spec's nodes in order, one statement per node.\n"
            '"""\n\n')


def _class_doc(graph: Graph) -> str:
    summary = " ".join(str(getattr(graph, "summary", "") or "").split())
    text = f"The model of spec {quote(graph.name)}" + (f": {summary}" if summary else ".")
    return f'    """{wrap(text, 7, 4)}"""\n\n'
