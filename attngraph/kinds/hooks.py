"""Calling a plugin's code: one located error for whatever it does wrong.

A registered kind's shape, work, lowering, purity and hoisting rules and a registered
scorer function's ``shape``, ``params``, ``spec_params``, ``inner``, ``bias``,
``make`` and ``module`` are a package's own code, run by attngraph on a user's spec.
Every call site calls them through :func:`call_hook`, so that whatever such a
function does wrong (raises any exception, even ``SystemExit`` or a ``BaseException``
of its own; returns ``None`` or a value of the wrong type; names a module that does
not import) is one error of attngraph's hierarchy, located at the node that uses it,
naming the function (``module.qualname``) and what it raised or returned, with a
hint. Never a traceback, never a silent exit.

An error of attngraph's own (``ctx.fail`` in a rule) passes unchanged, and so does
a ``KeyboardInterrupt`` (a real Ctrl-C, exit 130). attngraph's own rules are
called the same way, but an ``Exception`` they raise is a bug of attngraph and is
not dressed up as the spec's fault: it propagates, for the tests and the fuzzer
to find.

Examples
--------
>>> from attngraph.ir.graph import Node
>>> from attngraph.errors import ShapeError
>>> def rule(x):
...     return 1 / x
>>> rule.__module__ = "mypkg.rules"  # a plugin's function
>>> try:
...     call_hook(rule, 0, node=Node("s", None), what="the shape rule", error=ShapeError)
... except ShapeError as e:
...     print(e.message)
node 's': the shape rule raised ZeroDivisionError: division by zero (in mypkg.rules.rule)
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from typing import Any

from attngraph.errors import AttnGraphError, SourceLoc
from attngraph.ir.graph import Node, TensorType
from attngraph.registry import resolve

__all__ = ["call_hook", "resolve_hook", "hook_name", "is_builtin", "port_types",
           "count", "instance_of", "raiser", "PLUGIN_HINT"]

#: What the hint of a plugin's failure says after naming the function.
PLUGIN_HINT = ("the error is in {where}, a plugin's code, not in the spec: fix it there, "
               "or leave out the spec's use of it")


def hook_name(fn: Any) -> str:
    """``module.qualname`` of a function (of a partial's function, of a callable
    object's class), for messages."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)  # a bound method
    if not hasattr(fn, "__qualname__"):
        fn = type(fn)
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', '?')}"


def is_builtin(fn: Any) -> bool:
    """Whether ``fn`` is attngraph's own code (whose exceptions are bugs to report)."""
    return hook_name(fn).startswith("attngraph.")


#: Modules whose frames are never a plugin's: attngraph's own and the libraries it runs.
_OWN = ("attngraph", "torch", "numpy", "click", "pydantic", "importlib", "functools",
        "contextlib", "typing", "_")


def raiser(exc: BaseException) -> str | None:
    """``module.qualname`` of the innermost function outside attngraph and the libraries
    it runs that ``exc`` passed through (a plugin's code called by a built-in module:
    a normaliser's implementation), or None."""
    frames = [f for f, _ in traceback.walk_tb(exc.__traceback__)]
    for frame in reversed(frames):
        mod = str(frame.f_globals.get("__name__", ""))
        if mod and not mod.startswith(_OWN) and mod not in sys.stdlib_module_names:
            name = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
            return f"{mod}.{name}"
    return None


def _show(value: Any) -> str:
    """A returned value in a message: its type, and a short repr."""
    if value is None:
        return "None"
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(value).__name__} {text}"


def call_hook(fn: Callable[..., Any], *args: Any, node: Node[Any], what: str,
              error: type[AttnGraphError], expect: Callable[[Any], str | None] | None = None,
              loc: SourceLoc | None = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, where ``fn`` is a hook a kind or function registered.

    Parameters
    ----------
    fn : callable
        The hook.
    node : Node
        The node it runs for: the error's location (``loc`` when given) and name.
    what : str
        The call as the message says it: ``"scorer fn 'x': params(4, 4, 4)"``.
    error : type
        The error class of the stage (``ShapeError`` for shape rules, ...).
    expect : callable, optional
        ``expect(value)`` says what ``fn`` should have returned (``"a dict {port:
        TensorType}"``) when ``value`` is not that, else None.

    Raises
    ------
    AttnGraphError
        ``error`` at the node, naming ``fn``, for anything ``fn`` raised (an
        attngraph error passes unchanged; an ``Exception`` of attngraph's own code
        and ``KeyboardInterrupt`` propagate) or a value ``expect`` refuses (checked
        for a plugin's function; attngraph's own are held to it by their tests).
    """
    where = hook_name(fn)
    at = loc if loc is not None else node.loc
    try:
        value = fn(*args, **kwargs)
    except (AttnGraphError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin's code, whatever it raises
        if isinstance(exc, Exception) and is_builtin(fn):
            raise
        msg = (f"node '{node.id}': {what} raised {type(exc).__name__}"
               + (f": {exc}" if str(exc) else "") + f" (in {where})")
        raise error(msg, at, PLUGIN_HINT.format(where=where)) from exc
    if expect is not None and not is_builtin(fn):
        wanted = expect(value)
        if wanted is not None:
            msg = f"node '{node.id}': {what} returned {_show(value)}, not {wanted} (in {where})"
            raise error(msg, at, f"return {wanted} from {where}")
    return value


def resolve_hook(ref: str, *, node: Node[Any], what: str,
                 error: type[AttnGraphError], loc: SourceLoc | None = None) -> Any:
    """The object a lazy ``"package.module:attribute"`` reference of a plugin names; one
    that does not import (a missing module or attribute, an import that raises) is
    ``error`` at the node naming the reference."""
    if ref.startswith("attngraph."):
        return resolve(ref)
    try:
        return resolve(ref)
    except (AttnGraphError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - importing a plugin's module runs its code
        msg = (f"node '{node.id}': {what} names {ref!r}, which cannot be loaded: "
               f"{type(exc).__name__}" + (f": {exc}" if str(exc) else ""))
        hint = ("name an importable module and an attribute of it, 'package.module:Name', "
                "installed where attngraph runs")
        raise error(msg, loc if loc is not None else node.loc, hint) from exc


def port_types(value: Any) -> str | None:
    """What a shape rule returns: a non-empty dict of port name to TensorType."""
    ok = (isinstance(value, dict) and value and all(isinstance(k, str) for k in value)
          and all(isinstance(t, TensorType) for t in value.values()))
    return None if ok else "a dict {port: TensorType} (port '' the default one)"


def count(value: Any) -> str | None:
    """What a counting function returns: an int >= 0 (a bool is not a count)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return None if ok else "a whole number >= 0"


def instance_of(cls: type, what: str) -> Callable[[Any], str | None]:
    """An ``expect`` accepting instances of ``cls``, described as ``what``."""
    return lambda value: None if isinstance(value, cls) else what
