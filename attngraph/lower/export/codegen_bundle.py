"""The source of the lowering code a model runs, bundled into one standalone file.

:class:`Bundle` collects the classes, functions and constants that the node
modules of a compiled model use, read from attngraph's own source (``inspect``
and ``ast``), with the names each needs, transitively: a lowering class, its base
classes, the helpers its methods call (``masks.padding_mask``...), the constants
those read. What comes from outside attngraph (``torch``, ``math``, ``dataclasses``)
becomes the import its module wrote. The source is copied as written, comments
and shape comments included, with these edits only:

- a node module's ``__init__`` (which reads the IR through a ``LowerCtx``) is
  dropped: the file builds each module from literal arguments instead (see
  :mod:`attngraph.lower.export.codegen_values`), through a small ``__init__(**config)``
  given to the classes that derive from torch's ones directly;
- methods no kept code calls (construction-time helpers) are dropped, so that
  their imports (the IR, networkx) do not follow;
- an annotation that names something the file does not define becomes ``Any``;
- attngraph's errors become one small ``LoweringError`` of the file's own;
- a name two modules define differently is renamed ``<name>_<module>``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
from typing import Any

from attngraph.lower.export.codegen_defs import BUILTINS, Annotation, Def, Dropped
from attngraph.lower.export.codegen_source import (
    Scope,
    binding,
    def_name_edit,
    def_source,
    import_source,
    is_local,
    module_text,
    module_tree,
    offsets,
    top_package,
)

__all__ = ["Bundle"]

#: The error classes the bundled code raises, defined once in the file.
ERRORS = '''\
class AttnGraphError(Exception):
    """An error of the model, located at its node's line of the spec (``file:line:col``)."""

    def __init__(self, message: str, loc: Any = None, hint: str | None = None) -> None:
        where = f"{loc}: " if loc else ""
        super().__init__(where + "error: " + message + (f"\\nhint: {hint}" if hint else ""))


class LoweringError(AttnGraphError):
    """A node failed while running."""
'''

#: The constructor given to classes whose ``__init__`` is dropped.
CONFIG_INIT = '''\
    def __init__(self, buffers: dict[str, tuple[Tensor, bool]] | None = None,
                 **config: Any) -> None:
        # built from literal arguments: attributes, parameters and submodules by name
        super().__init__()
        for name, value in config.items():
            setattr(self, name, value)
        for name, (tensor, persistent) in (buffers or {}).items():
            self.register_buffer(name, tensor, persistent=persistent)
'''

_KEEP_DUNDERS = frozenset({"__call__", "__iter__", "__len__", "__getitem__", "__contains__",
                           "__setitem__", "__delitem__", "__str__", "__repr__", "__post_init__"})


class Bundle:
    """The definitions and imports a standalone file needs (see the module doc).

    ``require(obj)`` adds a class or function (and what it uses) and returns its
    name in the file; ``source()`` renders imports and definitions in dependency
    order (a class after its bases, a constant after what it is computed from).

    >>> from attngraph.lower.rules.masks import padding_mask
    >>> b = Bundle()
    >>> b.require(padding_mask)
    'padding_mask'
    >>> "def padding_mask(" in b.source(), "import attngraph" in b.source()
    (True, False)
    """

    def __init__(self, *, configured: Any = None) -> None:
        #: imports as (module, name, alias) for ``from`` and (module, None, alias)
        self.imports: dict[tuple[str, str | None, str], None] = {}
        self.defs: list[Def] = []
        self.names: dict[str, Any] = {}  # name in the file -> object (or a key)
        self._done: dict[int, str] = {}
        self._objs: list[Any] = []  # keep ids alive
        self._attrs: set[str] = set()
        #: classes built from literal arguments (their ``__init__`` dropped)
        self.configured = configured or (lambda cls: False)
        self._errors = False

    # -- names ------------------------------------------------------------------

    def _claim(self, name: str, obj: Any, module: str) -> str:
        """A file-level name for ``obj``: its own, else ``<name>_<module>``."""
        if self.names.get(name, obj) is obj:
            self.names[name] = obj
            return name
        alt = f"{name}_{module.rsplit('.', 1)[-1]}"
        i = 2
        while self.names.get(alt, obj) is not obj:
            alt = f"{name}_{module.rsplit('.', 1)[-1]}{i}"
            i += 1
        self.names[alt] = obj
        return alt

    def claim(self, name: str) -> str:
        """A free file-level name for generated code: ``name``, else one like it (never
        a keyword or builtin: :data:`~attngraph.lower.runtime.names.RESERVED`)."""
        from attngraph.lower.runtime.names import RESERVED, identifier

        name = identifier(name, camel=name[:1].isupper(), prefix="Model")
        if name in RESERVED:
            name += "_"
        return self._claim(name, ("generated", name), "generated")

    def add_def(self, name: str, source: str) -> None:
        """Append generated code (after what it uses, already added)."""
        self.defs.append(Def(name, source.encode()))

    def add_import(self, module: str, name: str | None, alias: str) -> str:
        """An import line (``from module import name as alias`` or ``import module as
        alias``); returns the name it binds."""
        key = ("import", module, name)  # `from a import b`, or the same `import a.b`:
        same = ("import", f"{module}.{name}", None) if name else ("import", *module.rsplit(".", 1))
        for k, v in self.names.items():
            if v in (key, same):
                return k
        bound = self._claim(alias, key, module)
        self.imports[(module, name, bound)] = None
        return bound

    def bound(self, obj: Any) -> str | None:
        """The file's name of ``obj`` when it is bundled already, else None."""
        return self._done.get(id(obj))

    def reserve(self, name: str) -> None:
        """Keep ``name`` for the generated code (it will not name a bundled object)."""
        self.names.setdefault(name, ("reserved", name))

    # -- objects ----------------------------------------------------------------

    def require(self, obj: Any) -> str:
        """Add ``obj`` (a class or function) and what it uses; its name in the file."""
        if id(obj) in self._done:
            return self._done[id(obj)]
        mod = getattr(obj, "__module__", None) or ""
        if getattr(obj, "__name__", None) in ("AttnGraphError", "LoweringError") \
                and mod == "attngraph.errors":
            return self._error_classes(obj.__name__)
        if not is_local(mod):
            name = getattr(obj, "__name__", None)
            if not isinstance(name, str):
                msg = f"cannot write {obj!r} into a standalone file"
                raise TypeError(msg)
            return self.add_import(mod, name, name)
        name = self._claim(obj.__name__, obj, mod)
        self._done[id(obj)] = name
        self._objs.append(obj)
        source = def_source(obj)
        self._add(name, obj.__name__, source, mod, obj)
        return name

    def _error_classes(self, which: str) -> str:
        if not self._errors:
            self._errors = True
            self.names["AttnGraphError"] = ("error", "AttnGraphError")
            self.names["LoweringError"] = ("error", "LoweringError")
            self.add_import("typing", "Any", "Any")
            self.defs.append(Def("LoweringError", ERRORS.encode()))
        return which

    def _resolve(self, name: str, module: str) -> str | None:
        """The file's name for a free name of ``module``'s code, adding what it needs;
        None for a name the file does not define (a local, or a type-only import)."""
        if name in BUILTINS:
            return name
        mod = sys.modules[module]
        if name not in mod.__dict__:
            return None
        value = mod.__dict__[name]
        tree = module_tree(module)
        how = binding(tree, name)
        if isinstance(how, (ast.Import, ast.ImportFrom)):
            src = import_source(how, name, module)
            if src is not None and not is_local(src[0]):
                return self.add_import(*src)
        if inspect.ismodule(value):
            if is_local(value.__name__):
                return None
            return self.add_import(value.__name__, None, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            return self.require(value)
        if isinstance(how, (ast.Assign, ast.AnnAssign)):
            return self._constant(name, value, how, module)
        return None

    def _constant(self, name: str, value: Any, stmt: ast.stmt, module: str) -> str:
        key = ("const", module, name)
        if id(value) in self._done:
            return self._done[id(value)]
        bound = self._claim(name, key, module)
        self._done[id(value)] = bound
        self._objs.append(value)
        text = ast.get_source_segment(module_text(module), stmt) or ""
        self._add(bound, name, text, module, None)
        return bound

    # -- definitions --------------------------------------------------------------

    def _add(self, bound: str, own: str, source: str, module: str, obj: Any) -> None:
        """Parse one top-level definition, bundle its free names, then append it."""
        raw = source.encode()
        tree = ast.parse(source)
        stmt = tree.body[0]
        d = Def(bound, raw, module=module)
        starts = offsets(raw)

        def pos(line: int, col: int) -> int:
            return starts[line - 1] + col

        if bound != own:  # a renamed definition: its own name where it is bound
            d.edits.append(def_name_edit(stmt, own, raw, starts, bound))
        scope = Scope()
        drop_init = isinstance(stmt, ast.ClassDef) and obj is not None and \
            self.configured(obj)
        if isinstance(stmt, ast.ClassDef):
            self._class(stmt, obj, d, scope, pos, drop_init)
        else:
            scope.run(stmt, frozenset())
        self._link(d, scope, module, pos)
        self.defs.append(d)
        self._revive()

    def _class(self, stmt: ast.ClassDef, obj: Any, d: Def, scope: Scope,
               pos: Any, drop_init: bool) -> None:
        """A class: header and fields always; methods kept when called (or roots)."""
        head = Scope()
        for dec in stmt.decorator_list:
            head.expr(dec, frozenset())
        for b in stmt.bases:
            head.expr(b, frozenset())
        scope.free += head.free
        scope.attrs |= head.attrs
        bases_have_init = any(self.configured(b) and is_local(b.__module__)
                              for b in obj.__bases__) if obj is not None else False
        body = stmt.body
        doc = body[0] if body and isinstance(body[0], ast.Expr) and \
            isinstance(body[0].value, ast.Constant) else None
        first = body[1] if doc is not None and len(body) > 1 else (body[0] if doc is None
                                                                  else None)
        for item in body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = pos(item.decorator_list[0].lineno if item.decorator_list
                            else item.lineno, 0)
                last = item.end_lineno or item.lineno
                end = pos(last + 1, 0) if last < len(d.source.split(b"\n")) else len(d.source)
                if d.source[end:end + 1] == b"\n":  # with the blank line after it
                    end += 1
                if item.name == "__init__" and drop_init:
                    d.edits.append((start, end, ""))
                    continue
                sub = Scope()
                sub.run(item, frozenset())
                root = item.name == "forward" or item.name in _KEEP_DUNDERS or \
                    item.name in self._attrs or not drop_init
                if root:
                    scope.free += sub.free
                    scope.annotations += sub.annotations
                    scope.attrs |= sub.attrs
                    scope.imports += sub.imports
                else:
                    d.optional.append((item.name, start, end, sub.free, sub.attrs, sub))
                    d.edits.append((start, end, Dropped(d, item.name)))
            elif item is not doc:
                scope.run(item, frozenset())
        if drop_init and not bases_have_init:
            at = pos(first.lineno, 0) if first is not None else len(d.source)
            decorators = getattr(first, "decorator_list", None)
            if decorators:
                at = pos(decorators[0].lineno, 0)
            init = CONFIG_INIT + ("\n" if first is not None else "")
            d.edits.append((at, at, init))
            self.add_import("typing", "Any", "Any")
            self.add_import("torch", "Tensor", "Tensor")

    def _link(self, d: Def, scope: Scope, module: str, pos: Any) -> None:
        """Resolve the free names of kept code; schedule the annotation edits."""
        self._attrs |= scope.attrs
        for imp in scope.imports:  # a lazy import inside a function
            if isinstance(imp, ast.ImportFrom) and imp.module and is_local(imp.module):
                # the bundled copies are module-level names: bind the local ones to
                # them where they were renamed
                start, end = pos(imp.lineno, imp.col_offset), pos(imp.end_lineno,
                                                                  imp.end_col_offset)
                src = importlib.import_module(imp.module)
                binds = []
                for alias in imp.names:
                    name = self.require(getattr(src, alias.name))
                    if name != (alias.asname or alias.name):
                        binds.append(f"{alias.asname or alias.name} = {name}")
                d.edits.append((start, end, "; ".join(binds) or "pass"))
        for n in scope.free:
            got = self._resolve(n.id, module)
            if got is not None and got != n.id:
                start = pos(n.lineno, n.col_offset)
                d.edits.append((start, start + len(n.id.encode()), got))
        for ann in scope.annotations:
            start, end = pos(ann.lineno, ann.col_offset), pos(ann.end_lineno, ann.end_col_offset)
            d.edits.append((start, end, Annotation(self, ann, module)))
        self._revive()

    def _revive(self) -> None:
        """Keep the dropped methods that kept code now calls (until nothing changes)."""
        changed = True
        while changed:
            changed = False
            for d in list(self.defs):
                for item in list(d.optional):
                    name, start, end, _free, _attrs, sub = item
                    if name not in self._attrs or item not in d.optional:
                        continue
                    d.optional.remove(item)
                    d.edits = [e for e in d.edits
                               if not (isinstance(e[2], Dropped) and e[2].name == name)]
                    starts = offsets(d.source)
                    self._link(d, sub, d.module, lambda ln, c, s=starts: s[ln - 1] + c)
                    changed = True

    def import_lines(self) -> str:
        """The imports, sorted as isort sorts them: the standard library, then torch."""
        sections: dict[bool, tuple[list[str], dict[str, list[str]]]] = {
            True: ([], {}), False: ([], {})}
        for module, name, alias in self.imports:
            plain, froms = sections[top_package(module) in sys.stdlib_module_names]
            if name is None:
                plain.append(f"import {module}" + (f" as {alias}" if alias != module else ""))
            else:
                froms.setdefault(module, []).append(
                    name + (f" as {alias}" if alias != name else ""))
        out = []
        for std in (True, False):
            plain, froms = sections[std]
            lines = sorted(set(plain), key=lambda s: s.split()[1])
            lines += [f"from {m} import {', '.join(sorted(set(ns), key=_member))}"
                      for m, ns in sorted(froms.items())]
            if lines:
                out.append("\n".join(lines))
        return "\n\n".join(out)

    def source(self) -> str:
        """Every definition, in dependency order, two blank lines apart."""
        return "\n\n".join(d.render().rstrip() + "\n" for d in self.defs)


def _member(name: str) -> tuple[int, str]:
    """isort's order of imported names: constants, classes, then the rest."""
    n = name.split(" as ")[0]
    kind = 0 if n.isupper() and len(n) > 1 else 1 if n[:1].isupper() else 2
    return kind, n
