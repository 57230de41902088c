"""The whole plain file: header, imports, the helpers the rules asked for, the spec's
class (``__init__``, ``forward``) and the map from the compiled model's state-dict
names to the file's (:func:`plain_source`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.lower.export.codegen_text import WIDTH, Doc, Pair, docstring_text, quote, render
from attngraph.lower.export.emit.writer import Scope, Writer, graph_reads

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

__all__ = ["plain_source"]

#: the file's own names at module level
HOOK = "from_compiled_names"
NAMES = "STATE_NAMES"

_HOOK_SOURCE = f'''def {HOOK}(module: nn.Module, state_dict: dict[str, Tensor], prefix: str,
{" " * (len(HOOK) + 5)}*args: Any) -> None:
    """Load the compiled model's state dict: its names (``nodes.<id>...``) become the
    file's, by the longest prefix of :data:`{NAMES}` that matches."""
    olds = sorted({NAMES}, key=len, reverse=True)
    for key in [k for k in state_dict if k.startswith(prefix + "nodes.")]:
        rest = key[len(prefix):]
        old = next((o for o in olds if rest == o or (o.endswith(".") and rest.startswith(o))),
                   None)
        if old is not None:
            state_dict[prefix + {NAMES}[old] + rest[len(old):]] = state_dict.pop(key)
'''


def plain_source(model: Any, sig: Any, top: str, reserved: set[str], runtime: type,
                 linear_group: Any, tail: Any, class_doc: str) -> tuple[str, Writer]:
    """The parts of the file of ``model`` (see
    :func:`attngraph.lower.export.codegen.python_source`):
    its text but the header and loader (``tail(bundle)`` gives the loader) and the
    writer that made it."""
    graph: Graph = model.graph
    w = Writer(model, runtime, linear_group, reserved | {top, HOOK, NAMES})
    nn_name = w.bundle.add_import("torch", "nn", "nn")
    w.bundle.add_import("torch", "Tensor", "Tensor")
    w.bundle.add_import("typing", "Any", "Any")
    scope = Scope({}, {}, 8, graph_reads(graph) | {k for _, k, _ in model.out_keys})
    prologue = _bind_inputs(model, w, scope)
    w.run_graph(graph, [model], [""], scope)
    if w.rt_used:
        prologue += _runtime(model, w, scope)
    ret = Doc("return {", [Pair(f"{quote(name)}: ", scope.vals[k] + (".detach()" if d else ""))
                           for name, k, d in model.out_keys], "}")
    body = list(scope.lines)
    body += _extras(w)
    if w.extras_used:
        prologue.append(f"        {w.extras_name}: dict[str, list[Tensor]] = {{}}"
                        "  # nodes' extras, one per call")
    body.append("        " + render(ret, 8, WIDTH))
    loader = tail(w.bundle)
    init = ["    def __init__(self) -> None:", "        super().__init__()", *w.init,
            *w.fixup_lines(),
            "        #: extra tensors of the last forward (a policy's log-probabilities...)",
            "        self.aux: dict[str, Tensor] = {}",
            f"        self.register_load_state_dict_pre_hook({HOOK})"]
    forward = _signature(sig, graph) + prologue + body
    names = Doc(f"{NAMES} = {{", [Pair(f"{quote(k)}: ", quote(v)) for k, v in w.keymap.items()],
                "}")
    defs = w.bundle.source()
    text = (w.bundle.import_lines() + "\n\n"
            + "#: the compiled model's state-dict names (prefixes) -> this file's\n"
            + render(names, 0, WIDTH) + "\n\n\n" + _HOOK_SOURCE + "\n\n"
            + (defs + "\n\n" if defs.strip() else "")
            + f"class {top}({nn_name}.Module):\n" + class_doc
            + "\n".join(init) + "\n\n" + "\n".join(forward) + "\n" + loader)
    return text, w


def _extras(w: Writer) -> list[str]:
    """forward's last statements: ``self.aux``, the records stacked over the calls."""
    rt, ex = w.rt_name, w.extras_name
    torch = w.bundle.add_import("torch", None, "torch") if w.extras_used else "torch"
    stacked = f"{{k: {torch}.stack(v, 1) for k, v in {ex}.items()}}"
    if w.rt_used and w.extras_used:
        return [f"        self.aux = {{**{rt}.finish(), **{stacked}}}"]
    if w.extras_used:
        return [f"        self.aux = {stacked}  # stacked over the steps"]
    if w.rt_used:
        return [f"        if {rt}.aux or {rt}.steps:  # nodes' extras, stacked over loop steps",
                f"            self.aux = {rt}.finish()"]
    return []


def _signature(sig: Any, graph: Graph) -> list[str]:
    params = [f"{n}: Tensor | None = None" if p.default is None else f"{n}: Tensor"
              for n, p in sig.parameters.items()]
    head = "    def forward(self, " + ", ".join(params) + ") -> dict[str, Tensor]:"
    if len(head) > WIDTH:
        head = ("    def forward(\n" + "".join(f"        {p},\n" for p in ["self", *params])
                + "    ) -> dict[str, Tensor]:")
    outs = ", ".join(name for name, _ in graph.outputs)
    doc = docstring_text(f"{', '.join(sig.parameters)} -> {{{outs}}}.")
    return [head, f'        """{doc}"""']


def _bind_inputs(model: Any, w: Writer, scope: Scope) -> list[str]:
    """The inputs as forward's values; every padding mask made (all True when not
    given), by the length it masks."""
    args = model.binder.args
    firsts = [a.name for a in args if not a.port]
    w.first_input = firsts[0] if firsts else None
    w.batch = f"{firsts[0]}.shape[0]" if firsts else "1"
    floats = [a.name for a in args if not a.port and a.t.dtype == "float"]
    w.float_input = floats[0] if floats else None
    torch = w.bundle.add_import("torch", None, "torch")
    out: list[str] = []
    for a in args:
        scope.vals[f"{a.input}.{a.port}" if a.port else a.input] = a.name
    for a in args:
        for i, d in enumerate(a.t.dims if not a.port else ()):
            if isinstance(d, str):
                w.sizes.setdefault(d, f"{a.name}.shape[{1 + i}]")
    masks = [a for a in args if a.port == "mask"]
    if masks:
        out.append("        # padding masks, True at the real items (all True when not given)")
    for a in masks:
        x = a.input
        out.append(f"        if {a.name} is None:")
        out.append(f"            {a.name} = {x}.new_ones({x}.shape[:{1 + a.t.rank}], "
                   f"dtype={torch}.bool)")
        if a.t.rank == 2:  # nested tokens: a sentence is real when a word of it is
            outer = w.fresh(f"{a.input}_real")
            out.append(f"        {outer} = {a.name}.any(-1)")
            scope.masks.setdefault(str(a.t.dims[0]), outer)
            scope.masks.setdefault(str(a.t.dims[1]), a.name)
        else:
            scope.masks.setdefault(str(a.t.dims[0]), a.name)
    for a in args:  # as the binder does: padded entries of positions read position 0
        own = str(a.t.dims[0]) if a.t.dims else ""
        if a.port or a.type != "positions" or own not in scope.masks:
            continue
        out.append(f"        {a.input} = {a.input}.masked_fill(~{scope.masks[own]}, 0)")
    return out


def _runtime(model: Any, w: Writer, scope: Scope) -> list[str]:
    """The runtime state the copied code reads: masks and sizes by length."""
    name = w.bundle.require(w.runtime)
    sizes = w.sizes
    masks = Doc("{", [Pair(f"{quote(k)}: ", v) for k, v in scope.masks.items()], "}")
    size = Doc("{", [Pair(f"{quote(k)}: ", v) for k, v in sizes.items()], "}")
    call = Doc(f"{name}(", [Pair("masks=", masks), Pair("sizes=", size),
                            f"batch={w.batch_expr()}", f"dtype={w.dtype_expr()}",
                            f"device={w.device_expr()}"], ")")
    return ["        # the masks and sizes the copied code reads, by length",
            f"        {w.rt_name} = " + render(call, 8, WIDTH, lead=len(w.rt_name) + 3)]
