"""The plain file of ``--format python``: a class per spec, written by the kinds' emit
rules (:mod:`attngraph.lower.export.emit`), in the spec's order.

The :class:`Writer` holds what the rules add to: ``__init__``'s module declarations
(each under a readable attribute, with the compiled model's state-dict name it
takes: :data:`STATE_NAMES` of the file), ``forward``'s statements (one scope per
body: a loop's or repeat's statements sit inside its ``for``; the values made once
per forward: :meth:`EmitCtx.prelude`, :meth:`EmitCtx.shared`), and the helpers the
file copies from attngraph (only those a rule asked for). A node whose kind has no
emit rule, or whose rule declines its configuration, runs its lowering class,
copied as :mod:`attngraph.lower.export.codegen_bundle` copies it, with the runtime state
it reads (:meth:`Writer.fallback`).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from torch import Tensor, nn

from attngraph.errors import LoweringError
from attngraph.lower.export.codegen_bundle import Bundle
from attngraph.lower.export.codegen_text import WIDTH, Doc, Pair, comment, quote, render, yaml_line
from attngraph.lower.export.codegen_values import Literals, ref
from attngraph.lower.export.emit import EmitCtx, emit_rule
from attngraph.lower.runtime.names import Mangler, module_key

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph, Node

__all__ = ["Scope", "Statement", "Writer"]

#: what copying a node can fail with: a value without a literal form (TypeError), a
#: class whose source cannot be read (OSError, SyntaxError, KeyError)
_UNWRITABLE = (TypeError, OSError, SyntaxError, KeyError)

#: attribute names a module of the file cannot take (nn.Module's own)
_MODULE_ATTRS = frozenset(dir(nn.Module())) | {"aux"}


@dataclass(eq=False)  # (a scope is itself: a key of the values made once)
class Scope:
    """Where forward's statements go: the values visible there (value key ->
    expression), the padding masks by length, the indent, and the values read."""

    vals: dict[str, str]
    masks: dict[str, str]
    indent: int
    reads: set[str]
    #: what names this scope's values apart (a body's node ids may repeat outer ones)
    prefix: str = ""
    #: the round index variable of an unshared repeat, else None
    index: str | None = None
    lines: list[str] = field(default_factory=list)
    #: the scope this one's statements sit in (a body's: its node's), None at the top
    parent: Scope | None = None


@dataclass
class Statement:
    """The top-level statement being written (a node of the top scope, a repeat's ``for``
    and all): its first line's index in forward's, its prelude (:meth:`EmitCtx.prelude`)."""

    start: int
    indent: int
    prelude: list[str] = field(default_factory=list)


def edge_key(e: Any, graph: Graph) -> str:
    """The value an edge reads: ``id`` or ``id.port`` (a graph input's adjacency)."""
    port = e.port
    if e.role.field == "mask" and not port and "adjacency" in graph.node(e.src).types:
        port = "adjacency"
    return f"{e.src}.{port}" if port else e.src


def graph_reads(graph: Graph) -> set[str]:
    """Every value key of ``graph`` that a node or an output reads."""
    out = {edge_key(e, graph) for n in graph.nodes for e in n.inputs}
    return out | {edge_key(e, graph) for _, e in graph.outputs}


class Writer:
    """The parts of the file as the rules write them (module doc)."""

    def __init__(self, model: Any, runtime: type, linear_group: Any,
                 reserved: set[str]) -> None:
        self.model = model
        self.runtime = runtime
        self.linear_group = linear_group
        self.bundle = Bundle(configured=_configured)
        for r in reserved:
            self.bundle.reserve(r)
        self.attrs = Mangler(_MODULE_ATTRS)
        # (l, O, I: names a reader confuses with digits)
        self.locals = Mangler(set(reserved) | {"self", "torch", "F", "nn", "l", "O", "I"})
        #: forward's parameters (the inputs and masks)
        self.params = frozenset(reserved)
        self.init: list[str] = []
        #: compiled state-dict name (a prefix ending in '.' for a module) -> the file's
        self.keymap: dict[str, str] = {}
        #: id of a module or parameter -> its path in the file
        self.homes: dict[int, str] = {}
        self.literals = Literals(model, self.bundle)
        self.literals.home = self.homes
        self.rt_used = False
        self.rt_name = self.locals.fresh("rt")
        #: whether a rule records a tensor per call into ``aux`` (:meth:`need_extras`)
        self.extras_used = False
        self.extras_name = self.locals.fresh("extras")
        self.fallbacks: list[str] = []
        #: forward's first statements (inputs, masks), set by the caller
        self.batch = "1"
        self.float_input: str | None = None
        self.first_input: str | None = None
        #: the size of each length in the batch (an input's dimension), by its symbol
        self.sizes: dict[str, str] = {}
        #: the top-level statement being written, None between two
        self.statement: Statement | None = None
        #: values made once (:meth:`EmitCtx.shared`): (scope seeing it, None: all, key) -> vars
        self.made: dict[tuple[Scope | None, Hashable], tuple[str, ...]] = {}

    # -- names and runtime ------------------------------------------------------------

    def need_rt(self) -> str:
        self.rt_used = True
        return self.rt_name

    def need_extras(self) -> str:
        """The dict of per-call records (``"<id>.<name>"`` -> tensors) forward stacks
        into ``self.aux`` as the compiled model does."""
        self.extras_used = True
        return self.extras_name

    def batch_expr(self) -> str:
        return self.batch

    def dtype_expr(self) -> str:
        if self.float_input is not None:
            return f"{self.float_input}.dtype"
        return "next(self.parameters()).dtype"

    def device_expr(self) -> str:
        return f"{self.first_input}.device" if self.first_input else \
            "next(self.parameters()).device"

    def value_var(self, scope: Scope, key: str) -> str:
        """A new variable for value ``key`` of ``scope``, recorded there."""
        self.locals.reserve(*self.bundle.names)  # a helper copied already keeps its name
        var = self.locals.name(scope.prefix + key, key.replace(".", "_"))
        self.bundle.reserve(var)
        scope.vals[key] = var
        return var

    def fresh(self, base: str) -> str:
        """A new local variable like ``base`` (no helper's name)."""
        self.locals.reserve(*self.bundle.names)
        var = self.locals.fresh(base)
        self.bundle.reserve(var)
        return var

    def add(self, text: str, scope: Scope) -> None:
        pad = " " * scope.indent
        for line in text.split("\n"):
            if not line and scope.lines and scope.lines[-1].endswith(":"):
                continue  # no blank line first in a block
            scope.lines.extend(_fit(pad, line) if line else [""])

    # -- declarations -------------------------------------------------------------------

    def declare(self, objs: list[Any], paths: list[str], ctor: Doc | Pair | str | None, base: str,
                *, module: bool) -> str:
        """``self.<attr> = ctor`` in ``__init__`` for the compiled objects ``objs`` (one
        per round) at ``paths``; a module or parameter already declared (``share``,
        ``tie``) is read where it is. Returns forward's expression for it."""
        dot = "." if module else ""
        seen = self.homes.get(id(objs[0]))
        if seen is not None:
            for i, p in enumerate(paths):
                home = self.homes.get(id(objs[i]), seen)
                self.keymap[p + dot] = home + dot
            return _read(seen, len(objs), paths, self)
        attr = self.attrs.name("/".join(paths), base)
        many = len(objs) > 1
        for i, (o, p) in enumerate(zip(objs, paths, strict=True)):
            here = f"{attr}.{i}" if many else attr
            self.homes[id(o)] = here
            self.keymap[p + dot] = here + dot
            if module:
                for k, t in o.named_parameters(recurse=True, remove_duplicate=False):
                    self.homes.setdefault(id(t), f"{here}.{k}")
        if ctor is not None and module and not many:  # tie: a parameter of another's
            for k, t in objs[0].named_parameters(recurse=True, remove_duplicate=False):
                if self.homes[id(t)] != f"{attr}.{k}":
                    self.literals.fixups.append((f"{attr}.{k}", ref(self.homes[id(t)])))
        if ctor is None:
            ctor = self.literals.module(objs[0], f"{attr}.0" if many else attr) if module else \
                self.literals.parameter(objs[0])
        nn_name = self.bundle.add_import("torch", "nn", "nn")
        if many:
            kind = "ModuleList" if module else "ParameterList"
            ctor = _rounds(f"{nn_name}.{kind}", ctor, len(objs), len(attr) + 8)
        target = f"self.{attr}"
        self.init.append(f"        {target} = " + render(ctor, 8, WIDTH, lead=len(target) + 3))
        return f"{target}[{self.scope_index}]" if many else target

    scope_index = "i"

    def declare_buffer(self, b: Tensor, path: str, base: str, *, persistent: bool,
                       value: str | None = None) -> str:
        """``self.register_buffer(...)`` in ``__init__`` for the compiled buffer ``b`` at
        ``path`` (state-dict name), made by ``value`` when given (else empty, or its
        values written out); forward's expression for it."""
        seen = self.homes.get(id(b))
        if seen is not None:
            self.keymap[path] = seen
            return ref(seen)
        attr = self.attrs.name(path, base)
        self.homes[id(b)] = attr
        if persistent:
            self.keymap[path] = attr
        value = value or render(self.literals.buffer(b, persistent), 8, WIDTH,
                                lead=len(attr) + 30)
        flag = "" if persistent else ", persistent=False"
        self.init.append(f"        self.register_buffer({quote(attr)}, {value}{flag})")
        return f"self.{attr}"

    # -- nodes ----------------------------------------------------------------------------

    def run_graph(self, graph: Graph, gms: list[Any], gpaths: list[str], scope: Scope,
                  only: set[str] | None = None) -> None:
        """The statements of ``graph``'s nodes (those in ``only`` when given), in order;
        ``gms`` are its lowered modules (one per round) at ``gpaths``."""
        gm = gms[0]
        for st in gm.plan:
            for nid in gm.groups.get(st.node, (st.node,)):
                if only is None or nid in only:
                    self.node(graph.node(nid), graph, gms, gpaths, scope)

    def node(self, node: Node[Any], graph: Graph, gms: list[Any], gpaths: list[str],
             scope: Scope) -> None:
        """The statements of ``node`` at ``scope``; a node of the top scope is a top-level
        statement, its prelude (:meth:`EmitCtx.prelude`) put before it once written."""
        outer = self.statement
        st = self.statement = outer or Statement(len(scope.lines), scope.indent)
        try:
            self._node(node, graph, gms, gpaths, scope, st)
        finally:
            self.statement = outer
        if outer is None and st.prelude:
            scope.lines[st.start:st.start] = ["", *st.prelude]

    def _node(self, node: Node[Any], graph: Graph, gms: list[Any], gpaths: list[str],
              scope: Scope, st: Statement) -> None:
        """The node by its kind's rule, else its lowering class (:meth:`fallback`): a
        rule that declines leaves nothing (lines, declarations, prelude, values made)."""
        key = module_key(node.id)
        mods = [g.nodes._modules[key] for g in gms]
        paths = [f"{p}nodes.{key}" for p in gpaths]
        ins = {str(e.role): scope.vals[edge_key(e, graph)] + (".detach()" if e.detach else "")
               for e in node.inputs}
        mark = len(scope.lines), len(self.init), len(st.prelude), len(self.made)
        self._heading(node, scope)
        rule = emit_rule(node.kind)
        ctx = EmitCtx(self, node, graph, mods, paths, scope, ins)
        try:
            if rule is not None and rule(ctx):
                return
        except (AttributeError, TypeError):  # a module not of the kind's own class
            pass
        del scope.lines[mark[0]:], self.init[mark[1]:], st.prelude[mark[2]:]
        self.made = dict(list(self.made.items())[:mark[3]])
        self._heading(node, scope)
        self.fallback(ctx)

    def _heading(self, node: Node[Any], scope: Scope) -> None:
        """A blank line, then the node's line of the spec as a comment."""
        self.add("", scope)
        where = yaml_line(node)
        if where:
            scope.lines.extend(comment(where, scope.indent).rstrip("\n").split("\n"))

    def fallback(self, ctx: EmitCtx) -> None:
        """The node's lowering class, copied, called as the compiled model calls it."""
        from attngraph.lower.export.codegen_body import body_classes_under

        node, scope = ctx.node, ctx.scope
        self.fallbacks.append(node.kind)
        first = ctx.mods[0]
        if id(first) in self.homes:  # share: the owner's module
            target = _read(self.homes[id(first)], len(ctx.mods), ctx.paths, self)
            for p in ctx.paths:
                self.keymap[p + "."] = self.homes[id(first)] + "."
        else:
            attr = self.attrs.name("/".join(ctx.paths), node.id)
            many = len(ctx.mods) > 1
            exprs: list[Doc | Pair | str] = []
            for i, (m, p) in enumerate(zip(ctx.mods, ctx.paths, strict=True)):
                here = f"{attr}.{i}" if many else attr
                self.keymap[p + "."] = here + "."
                for k, sub in m.named_modules(prefix=here, remove_duplicate=False):
                    self.homes.setdefault(id(sub), k)
                for k, t in m.named_parameters(prefix=here, remove_duplicate=False):
                    self.homes.setdefault(id(t), k)
                try:
                    self.literals.classes.update(body_classes_under(self, m, node, here))
                    exprs.append(self.literals.module(m, here))
                except _UNWRITABLE as exc:  # a value with no literal form, no source
                    msg = f"node '{node.id}' ({node.kind}) cannot be exported as Python: {exc}"
                    raise LoweringError(msg, node.loc, "export it as pt2 instead") from exc
                for var, step in self.literals.pending:
                    self.init.append(f"        {var} = " + render(step, 8, WIDTH,
                                                                  lead=len(var) + 3))
                self.literals.pending = []
            nn_name = self.bundle.add_import("torch", "nn", "nn")
            ctor = Doc(f"{nn_name}.ModuleList([", exprs, "])") if many else exprs[0]
            self.init.append(f"        self.{attr} = " + render(ctor, 8, WIDTH,
                                                              lead=len(attr) + 8))
            target = f"self.{attr}[{self.scope_index}]" if many else f"self.{attr}"
        rt = self.need_rt()
        x = Doc("{", [Pair(f"{quote(r)}: ", v) for r, v in ctx.ins.items()], "}")
        call = Doc(f"{target}(", [x, rt], ")")
        ports = list(node.types)
        if ports == [""]:
            ctx.out(call)
            return
        res = self.fresh(f"{node.id}_out")
        self.add(f"{res} = " + render(call, scope.indent, WIDTH, lead=len(res) + 3), scope)
        for port in ports:
            if ctx.reads(port) or (not port and ctx.reads("out")):
                ctx.out(f"{res}[{quote(port)}]", port)

    def fixup_lines(self) -> list[str]:
        """Shared modules and parameters set after construction (``tie``...)."""
        out = []
        for path, value in self.literals.fixups:
            parent, _, last = path.rpartition(".")
            text = render(value, 8, WIDTH) if isinstance(value, (Doc, Pair)) else value
            out.append(f"        setattr({ref(parent)}, {quote(last)}, {text})"
                       if "." in path and not last.isidentifier() else
                       f"        {ref(path)} = {text}")
        return out


def _fit(pad: str, line: str) -> list[str]:
    """``line`` within the width: a trailing comment goes above it, then a long call's
    arguments go one per line."""
    if len(pad) + len(line) <= WIDTH:
        return [pad + line]
    code, sep, note = line.partition("  # ")
    out = [f"{pad}# {note}"] if sep and "'" not in note and '"' not in note else []
    if not out:
        code = line
    if len(pad) + len(code) > WIDTH:
        code = _wrapped(code, len(pad))
    return [*out, *(pad + c for c in code.split("\n"))]


def _wrapped(code: str, indent: int) -> str:
    """``target = f(a, b=c)`` with its arguments one per line (when it is one)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return code
    stmt = tree.body[0] if len(tree.body) == 1 else None
    value = getattr(stmt, "value", None)
    if not isinstance(stmt, ast.Assign) or not isinstance(value, ast.Call):
        return code
    head = code[:code.index("=") + 2]
    args = [ast.unparse(a) for a in value.args]
    args += [f"{k.arg}={ast.unparse(k.value)}" if k.arg else f"**{ast.unparse(k.value)}"
             for k in value.keywords]
    call = Doc(ast.unparse(value.func) + "(", args, ")")
    return head + render(call, 0, WIDTH - indent, lead=len(head))


def _rounds(cls: str, ctor: Doc | Pair | str, n: int, lead: int) -> str:
    """``cls([ctor for _ in range(n)])``, over three lines when long."""
    one = f"{cls}([{render(ctor, 0, 10**6)} for _ in range({n})])"
    if 8 + lead + len(one) <= WIDTH:
        return one
    return (f"{cls}([\n            {render(ctor, 12, WIDTH)}\n"
            f"            for _ in range({n})\n        ])")


def _read(home: str, rounds: int, paths: list[str], w: Writer) -> str:
    """Forward's expression of a declared object at file path ``home``."""
    if rounds > 1 and home.rsplit(".", 1)[-1].isdigit():
        return f"{ref(home.rsplit('.', 1)[0])}[{w.scope_index}]"
    return ref(home)


def _configured(cls: type) -> bool:
    """Built from literal arguments: a module class of attngraph's (not a container)."""
    return issubclass(cls, nn.Module) and not issubclass(
        cls, (nn.ModuleDict, nn.ModuleList, nn.Sequential))
