"""Plain PyTorch for ``--format python``: one emit rule per kind.

A kind's ``emit`` rule (:attr:`attngraph.kinds.base.Kind.emit`, a callable or a lazy
``"module:attribute"`` like its lowering) writes one node as the code a person would
write: its modules in ``__init__`` (``nn.Linear``, ``nn.GRU``, ``nn.Parameter``...)
and its ``forward`` lines, torch and ``F`` calls with shape comments. It receives an
:class:`EmitCtx` and returns True, or False for a configuration it does not write
(the node's lowering class is then copied, as for a kind without a rule).

The rules of the built-in kinds live in the modules of this package named like
their families (``attention``, ``scorers``, ``support``, ``structure``, ``memory``,
``indexing``, ``sensors``, ``sampling``...); the file around them is assembled by
:mod:`attngraph.lower.export.emit.writer`. A rule that samples makes the lowering's torch
calls in its order (the same draws under one seed) and records what the lowering
records in ``rt.steps`` with :meth:`EmitCtx.record`.

What depends on the sizes alone (a rotary table, a bias of the positions) is made
once per forward: :meth:`EmitCtx.shared` makes a value the first time a node asks for
it and gives its variables to the nodes after that see it; made at forward's top
level (:meth:`EmitCtx.prelude`: before the top-level statement that holds the node,
a repeat's or loop's ``for``), every node after sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from attngraph.lower.export.codegen_text import Doc, quote, render, shape

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph, Node, TensorType
    from attngraph.lower.export.emit.writer import Scope, Writer

__all__ = ["EmitCtx", "emit_rule"]


def emit_rule(kind: str) -> Callable[[EmitCtx], bool] | None:
    """The emit rule of ``kind`` (resolved when lazy), or None."""
    from attngraph.kinds import KINDS
    from attngraph.registry import resolve

    rule = KINDS[kind].emit if kind in KINDS else None
    if isinstance(rule, str):
        rule = resolve(rule)
    return rule


class EmitCtx:
    """What an emit rule reads and writes for one node (see the module doc)."""

    def __init__(self, w: Writer, node: Node[Any], graph: Graph, mods: list[Any],
                 paths: list[str], scope: Scope, ins: dict[str, str]) -> None:
        self.w = w
        self.node = node
        self.graph = graph
        #: the compiled node module, once per round of an unshared repeat
        self.mods = mods
        self.paths = paths
        self.scope = scope
        self.ins = ins
        self.spec = node.spec

    # -- reading ------------------------------------------------------------------

    @property
    def mod(self) -> Any:
        """The compiled module of the node (the first round's)."""
        return self.mods[0]

    @property
    def body(self) -> Graph:
        """The node's instantiated body (a block, repeat or loop)."""
        if self.node.body is None:
            msg = f"node '{self.node.id}' has no body"
            raise TypeError(msg)
        return self.node.body

    def x(self, role: str) -> str:
        """The expression of the input of ``role``."""
        return self.ins[role]

    def has(self, role: str) -> bool:
        return role in self.ins

    def t(self, role: str) -> TensorType:
        e = self.node.edge(role)
        if e is None:
            msg = f"node '{self.node.id}' has no input '{role}'"
            raise KeyError(msg)
        return self.graph.node(e.src).types[e.port]

    def reads(self, port: str) -> bool:
        """Whether anything reads the node's ``port``."""
        return (f"{self.node.id}.{port}" if port else self.node.id) in self.scope.reads

    def mask(self, sym: Any) -> str | None:
        """The padding mask variable (B, L) of length ``sym``, or None."""
        return self.scope.masks.get(sym) if isinstance(sym, str) else None

    def padding(self, t: TensorType, axis: int = -1) -> str | None:
        """The padding mask of the items axis ``axis`` of a value of type ``t``, shaped
        to broadcast against it, or None."""
        if not t.dims:
            return None
        ax = axis % t.rank
        m = self.mask(t.dims[ax])
        if m is None:
            return None
        before = (1 if t.heads else 0) + ax
        after = t.rank - ax - 1
        if not before and not after:
            return m
        return f"{m}[:, {'None, ' * before}:{', None' * after}]"

    # -- names ------------------------------------------------------------------------

    @property
    def torch(self) -> str:
        return self.w.bundle.add_import("torch", None, "torch")

    @property
    def F(self) -> str:  # noqa: N802 - the name torch code uses
        return self.w.bundle.add_import("torch.nn", "functional", "F")

    @property
    def nn(self) -> str:
        return self.w.bundle.add_import("torch", "nn", "nn")

    def fn(self, f: Any) -> str:
        """How the file calls function ``f``: ``torch.tanh``, ``F.relu``, or a copy of
        attngraph's own (:meth:`helper`)."""
        import torch
        import torch.nn.functional as nnf

        name = getattr(f, "__name__", "")
        if name and getattr(nnf, name, None) is f:
            return f"{self.F}.{name}"
        if name and getattr(torch, name, None) is f:
            return f"{self.torch}.{name}"
        return self.helper(f)

    def size(self, sym: Any) -> str | None:
        """The size of length ``sym`` in this batch (an input's dimension), or None."""
        return self.w.sizes.get(sym) if isinstance(sym, str) else None

    def helper(self, obj: Any) -> str:
        """A function of attngraph's, copied into the file (once); its name there."""
        return self.w.bundle.require(obj)

    def rt(self) -> str:
        """The runtime state (masks and sizes by length) for code that reads it."""
        return self.w.need_rt()

    def batch(self) -> str:
        return self.w.batch_expr()

    def dtype(self) -> str:
        return self.w.dtype_expr()

    def device(self) -> str:
        return self.w.device_expr()

    def tmp(self, base: str) -> str:
        """A new local variable like ``base``."""
        return self.w.fresh(base)

    # -- writing ------------------------------------------------------------------

    def module(self, child: str | None = None, ctor: Doc | str | None = None,
               name: str | None = None) -> str:
        """Declare the compiled submodule ``child`` of the node (the node's own module
        when None) in ``__init__``, built by ``ctor`` (default: its torch constructor);
        returns how forward reads it."""
        objs = [m if child is None else m.get_submodule(child) for m in self.mods]
        paths = [p if child is None else f"{p}.{child}" for p in self.paths]
        base = name or (self.node.id if child is None else f"{self.node.id}_{child}")
        return self.w.declare(objs, paths, ctor, base, module=True)

    def param(self, pname: str, name: str | None = None) -> str:
        """Declare the compiled parameter ``pname`` of the node; how forward reads it."""
        objs = [getattr(m, pname) for m in self.mods]
        paths = [f"{p}.{pname}" for p in self.paths]
        return self.w.declare(objs, paths, None, name or f"{self.node.id}_{pname}",
                              module=False)

    def buffer(self, bname: str, name: str | None = None,
               value: str | None = None) -> str | None:
        """Declare the compiled buffer ``bname`` of the node (``register_buffer``: made
        by the expression ``value``, else an empty one the state dict fills, or its
        values when it holds none); how forward reads it. None in an unshared repeat's
        rounds (a list holds no buffers)."""
        if len(self.mods) > 1:
            return None
        m = self.mod
        persistent = bname not in m._non_persistent_buffers_set
        return self.w.declare_buffer(getattr(m, bname), f"{self.paths[0]}.{bname}",
                                     name or f"{self.node.id}_{bname}", persistent=persistent,
                                     value=value)

    def line(self, text: str) -> None:
        """A statement of forward, at the node's place."""
        self.w.add(text, self.scope)

    def out(self, expr: str | Doc, port: str = "", note: str | None = None) -> str:
        """Assign the value of ``port`` (``""``: the node's) to a new variable with its
        shape as a comment; returns the variable."""
        key = f"{self.node.id}.{port}" if port else self.node.id
        var = self.w.value_var(self.scope, key)
        t = self.node.types[port]
        tail = f"  # {note or shape(t)}"
        text = render(expr, self.scope.indent, 100, lead=len(var) + 3, tail=len(tail)) \
            if isinstance(expr, Doc) else expr
        self.line(f"{var} = {text}{tail}")
        return var

    def outs(self, expr: str, ports: list[str]) -> list[str]:
        """Assign the tuple ``expr`` to a new variable per port (``""``: the node's),
        their shapes as a comment; returns the variables."""
        keys = [f"{self.node.id}.{p}" if p else self.node.id for p in ports]
        names = [self.w.value_var(self.scope, k) for k in keys]
        note = ", ".join(shape(self.node.types[p]) for p in ports)
        self.line(f"{', '.join(names)} = {expr}  # {note}")
        return names

    def record(self, name: str, expr: str) -> None:
        """Record ``expr`` as ``aux["<id>.<name>"]`` (stacked over the calls, ``[B, T,
        ...]``), as the lowering records it in ``rt.steps``."""
        key = quote(f"{self.node.id}.{name}")
        self.line(f"{self.w.need_extras()}.setdefault({key}, []).append({expr})")

    def alias(self, port: str, var: str) -> None:
        """The value of ``port`` is ``var`` (already assigned)."""
        key = f"{self.node.id}.{port}" if port else self.node.id
        self.scope.vals[key] = var

    def quote(self, text: str) -> str:
        return quote(text)

    # -- made once per forward ------------------------------------------------------

    def prelude(self, text: str) -> None:
        """Statements of forward's top level, placed before the top-level statement that
        holds the node (itself, or the repeat, loop, map or block whose body holds it)
        once that is written; dropped with the node when its rule declines. A text that
        begins with a comment starts a paragraph; the next texts join it."""
        st = self.w.statement
        if st is None:
            msg = "a prelude is written by a node's rule"
            raise RuntimeError(msg)
        para = type(self.scope)({}, {}, st.indent, set())  # a Scope of its own, laid out
        self.w.add(text, para)
        if st.prelude and text.lstrip().startswith("#"):
            st.prelude.append("")
        st.prelude.extend(para.lines)

    def shared(self, key: Hashable, make: Callable[[], tuple[str, ...]], *,
               top: bool = False) -> tuple[str, ...]:
        """The variables of the value ``key`` (what names everything it is made of, the
        rule's name first), made once: the first time, ``make()`` writes it and returns
        them; later, a node that sees it gets them. Made at forward's top level
        (``top``: ``make`` writes with :meth:`prelude`) it is seen by every node after;
        else (``make`` writes with :meth:`line`) by the nodes after in this scope and
        the bodies inside it, not outside (made in a loop's body, at its sizes: there
        only). Forgotten with the node when its rule declines."""
        made = self.w.made
        scope: Scope | None = self.scope
        while scope is not None:
            if (scope, key) in made:
                return made[scope, key]
            scope = scope.parent
        if (None, key) in made:
            return made[None, key]
        names = make()
        made[None if top else self.scope, key] = names
        return names
