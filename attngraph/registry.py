"""One registry type for every extension point of attngraph.

Node kinds, scorer functions, passes, diagram views and formats, describe
formats, training tasks and metrics are each a :class:`Registry`: a name ->
entry table filled by :meth:`Registry.register` (also a decorator). It refuses a
second entry under a taken name, and looking up an unknown name fails with the
sorted list of known names and a "did you mean".

Entries may be *lazy*: a ``"package.module:attribute"`` string, imported on its
first lookup. That is how a kind names its PyTorch lowering without importing
torch, so that ``validate``, ``render``, ``describe`` and ``diff`` never do.

Examples
--------
>>> colours = Registry[str]("colour")
>>> colours.register("red", "#f00")
'#f00'
>>> colours["red"]
'#f00'
>>> try:
...     colours["rde"]
... except RegistryError as e:
...     print(e.message, "|", e.hint)
unknown colour 'rde' | did you mean 'red'? (known: red)
>>> try:
...     colours.register("red", "#e00")
... except RegistryError as e:
...     print(e.message)
colour 'red' is registered already
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, overload

from attngraph.errors import RegistryError, did_you_mean

__all__ = ["Registry", "RegistryError", "resolve"]

T = TypeVar("T")
F = TypeVar("F")


def resolve(ref: str) -> Any:
    """The object a lazy ``"package.module:attribute"`` reference names."""
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


def _lazy(value: object) -> bool:
    return isinstance(value, str) and ":" in value and "." in value.partition(":")[0]


class Registry(Generic[T]):
    """Named entries of one extension point.

    Parameters
    ----------
    what : str
        What an entry is, for messages (``"node kind"``, ``"scorer fn"``).
    lazy : bool, optional
        Accept ``"module:attribute"`` strings as entries, imported on first lookup.
    """

    def __init__(self, what: str, *, lazy: bool = False) -> None:
        self.what = what
        self.lazy = lazy
        self._entries: dict[str, T | str] = {}

    # filling --------------------------------------------------------------
    @overload
    def register(self, name: str) -> Callable[[F], F]: ...
    @overload
    def register(self, name: str, entry: T | str) -> T | str: ...

    def register(self, name: str, entry: Any = None) -> Any:
        """Add ``entry`` under ``name``; without ``entry``, a decorator that adds its target.

        Raises
        ------
        RegistryError
            When ``name`` is taken.
        """
        if entry is None:
            def deco(fn: F) -> F:
                self.register(name, fn)  # type: ignore[arg-type]
                return fn

            return deco
        if name in self._entries:
            msg = f"{self.what} '{name}' is registered already"
            raise RegistryError(msg, hint="choose another name, or unregister the first")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (an unknown name is an error, as for a lookup)."""
        self._check(name)
        del self._entries[name]

    @contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """Entries registered inside the ``with`` block are removed at its end."""
        before = dict(self._entries)
        try:
            yield self
        finally:
            self._entries = before

    # reading --------------------------------------------------------------
    def _check(self, name: str) -> None:
        if name not in self._entries:
            msg = f"unknown {self.what} '{name}'"
            hint = did_you_mean(name, self._entries)
            if hint.startswith("did you mean"):
                hint += f" (known: {', '.join(self.names())})"
            raise RegistryError(msg, hint=hint)

    def __getitem__(self, name: str) -> T:
        self._check(name)
        entry = self._entries[name]
        if self.lazy and _lazy(entry):
            entry = resolve(str(entry))
            self._entries[name] = entry
        return entry  # type: ignore[return-value]

    def get(self, name: str) -> T | None:
        """The entry, or None for an unknown name."""
        return self[name] if name in self._entries else None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        """Every name, sorted."""
        return sorted(self._entries)

    def items(self) -> list[tuple[str, T]]:
        """``(name, entry)`` pairs sorted by name (lazy entries are loaded)."""
        return [(n, self[n]) for n in self.names()]

    def __repr__(self) -> str:
        return f"Registry({self.what!r}: {', '.join(self.names())})"
