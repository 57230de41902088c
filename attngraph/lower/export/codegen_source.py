"""Reading attngraph's own source for the bundler: definitions, bindings, free names.

:func:`def_source` finds the text of a top-level class or function in its module's
parsed source; :func:`binding` the module-level statement that binds a name (an
import, a definition, an assignment); :class:`Scope` the names a definition reads
that it does not bind itself (split into run-time names and annotations), the
attributes it reads and its imports; :func:`offsets` the byte offset of each line,
since ``ast`` columns count UTF-8 bytes; :func:`def_name_edit` the edit that renames a
bundled definition.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from typing import Any

__all__ = ["Scope", "binding", "def_name_edit", "def_source", "import_source", "is_local",
           "module_text", "module_tree", "offsets", "top_package"]


def top_package(module: str) -> str:
    """The top-level package of a dotted module name."""
    return module.split(".")[0]


def is_local(module: str) -> bool:
    """Code of this module is bundled rather than imported (attngraph's own)."""
    return top_package(module) == "attngraph"


def offsets(src: bytes) -> list[int]:
    """The byte offset of each line of ``src`` (``ast`` columns count bytes)."""
    starts = [0]
    for i, ch in enumerate(src):
        if ch == 10:
            starts.append(i + 1)
    return starts


class Scope(ast.NodeVisitor):
    """Free names of a definition (loads not bound in an enclosing function), split
    into those evaluated at run time and those inside annotations."""

    def __init__(self) -> None:
        self.free: list[ast.Name] = []
        self.annotations: list[ast.expr] = []
        self.attrs: set[str] = set()
        self.imports: list[ast.ImportFrom | ast.Import] = []

    def run(self, node: ast.AST, bound: frozenset[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            self._function(node, bound)
        elif isinstance(node, ast.ClassDef):
            for d in node.decorator_list:
                self.expr(d, bound)
            for b in node.bases:
                self.expr(b, bound)
            for k in node.keywords:
                self.expr(k.value, bound)
            for stmt in node.body:
                self.run(stmt, bound)
        elif isinstance(node, ast.AnnAssign):
            self.annotations.append(node.annotation)
            if node.value is not None:
                self.expr(node.value, bound)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self.imports.append(node)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                      ast.ClassDef, ast.AnnAssign, ast.Import, ast.ImportFrom)):
                    self.run(child, bound)
                elif isinstance(child, ast.expr):
                    self.expr(child, bound)
                else:
                    self.run(child, bound)

    def expr(self, node: ast.AST, bound: frozenset[str]) -> None:
        for sub in walk_expr(node):
            if isinstance(sub, ast.Lambda):
                self._function(sub, bound)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) \
                    and sub.id not in bound:
                self.free.append(sub)
            elif isinstance(sub, ast.Attribute):
                self.attrs.add(sub.attr)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda,
                  bound: frozenset[str]) -> None:
        a = node.args
        args = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(x for x in (a.vararg, a.kwarg) if x)]
        for d in [*a.defaults, *(d for d in a.kw_defaults if d is not None)]:
            self.expr(d, bound)
        if not isinstance(node, ast.Lambda):
            for dec in node.decorator_list:
                self.expr(dec, bound)
            self.annotations += [x.annotation for x in args if x.annotation is not None]
            if node.returns is not None:
                self.annotations.append(node.returns)
        inner = bound | {x.arg for x in args} | stores(node)
        body = node.body if isinstance(node.body, list) else [node.body]
        for stmt in body:
            if isinstance(stmt, ast.expr):
                self.expr(stmt, inner)
            else:
                self.run(stmt, inner)


def walk_expr(node: ast.AST) -> list[ast.AST]:
    """The nodes of an expression, without descending into lambdas."""
    out: list[ast.AST] = []
    todo = [node]
    while todo:
        n = todo.pop()
        out.append(n)
        if isinstance(n, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out


def stores(fn: ast.AST) -> set[str]:
    """Names a function binds (not descending into nested functions' bodies)."""
    out: set[str] = set()
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            continue
        elif isinstance(n, ast.Lambda):
            continue
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(x.asname or x.name).split(".")[0] for x in n.names}
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.arg):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return out



_TREES: dict[str, ast.Module] = {}
_TEXTS: dict[str, str] = {}


def module_text(module: str) -> str:
    """The source of a loaded module (read once)."""
    if module not in _TEXTS:
        _TEXTS[module] = inspect.getsource(sys.modules[module])
    return _TEXTS[module]


def def_source(obj: Any) -> str:
    """The source of a top-level class or function, decorators included (read from
    its module's parsed text: faster than ``inspect.getsource`` for classes)."""
    stmt = binding(module_tree(obj.__module__), obj.__name__)
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
            and stmt.end_lineno is not None:
        lines = module_text(obj.__module__).splitlines(keepends=True)
        first = stmt.decorator_list[0].lineno if stmt.decorator_list else stmt.lineno
        return "".join(lines[first - 1:stmt.end_lineno])
    return textwrap.dedent(inspect.getsource(obj))


def module_tree(module: str) -> ast.Module:
    """The parsed source of a loaded module (parsed once)."""
    if module not in _TREES:
        _TREES[module] = ast.parse(module_text(module))
    return _TREES[module]


def binding(tree: ast.Module, name: str) -> ast.stmt | None:
    """The module-level statement that binds ``name`` (imports under
    ``TYPE_CHECKING`` excluded: they never run)."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and stmt.name == name:
            return stmt
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                if (a.asname or a.name.split(".")[0]) == name:
                    return stmt
        if isinstance(stmt, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return stmt
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and stmt.target.id == name:
            return stmt
        if isinstance(stmt, ast.Try):
            for sub in stmt.body:
                if isinstance(sub, (ast.Import, ast.ImportFrom)) and any(
                        (a.asname or a.name) == name for a in sub.names):
                    return sub
    return None


def import_source(stmt: ast.Import | ast.ImportFrom, name: str,
                   module: str) -> tuple[str, str | None, str] | None:
    """(module, name or None, alias) of the import that binds ``name``."""
    for a in stmt.names:
        bound = a.asname or a.name.split(".")[0]
        if bound != name:
            continue
        if isinstance(stmt, ast.Import):
            return (a.name, None, bound) if a.asname else (a.name.split(".")[0], None, bound)
        base = stmt.module or ""
        if stmt.level:
            pkg = module.rsplit(".", stmt.level)[0]
            base = f"{pkg}.{base}" if base else pkg
        return base, a.name, bound
    return None


def def_name_edit(stmt: ast.stmt, own: str, raw: bytes, starts: list[int],
              bound: str) -> tuple[int, int, str]:
    """The edit that renames a top-level definition: ``own`` in its ``def``/``class``
    line (after any decorators), or the assignment's target."""
    line = stmt.lineno
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        keyword = b"class " if isinstance(stmt, ast.ClassDef) else b"def "
        start = raw.index(keyword, starts[line - 1]) + len(keyword)
    else:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) else getattr(stmt, "target",
                                                                              stmt)
        start = starts[target.lineno - 1] + target.col_offset
    at = raw.index(own.encode(), start)
    return at, at + len(own.encode()), bound
