"""Node ids as module keys: the lowered nodes of a graph live in a :class:`NodeDict`.

Any identifier is a node id, ``keys``, ``train`` or ``_modules`` included, but
``nn.ModuleDict`` stores its modules as attributes and refuses a key that names one
of its own attributes. Such an id is stored under ``@<id>`` (:func:`module_key`);
no identifier contains ``@``, so the escaped key cannot be another node's. Every
other id is its own key, so parameters keep the names ``nodes.<id>.<param>`` that
checkpoints hold. Which ids are escaped follows the installed torch's
``nn.ModuleDict``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["ESCAPE", "NodeDict", "module_key"]

#: the attributes of an (empty) ``nn.ModuleDict``: names that cannot be its keys
_RESERVED = frozenset(dir(nn.ModuleDict()))
#: prefix of an escaped key; no node id (an identifier) contains it
ESCAPE = "@"


def module_key(node_id: str) -> str:
    """The key of a node's module in :class:`NodeDict`: the node id, or ``@<id>`` for
    an id that names an attribute of ``nn.ModuleDict`` (``keys``, ``train``, ...).

    >>> module_key("score"), module_key("keys")
    ('score', '@keys')
    """
    return ESCAPE + node_id if node_id in _RESERVED else node_id


def _node_id(key: str) -> str:
    return key[len(ESCAPE):] if key.startswith(ESCAPE) else key


class NodeDict(nn.ModuleDict):
    """``nn.ModuleDict`` indexed by node id, whatever the id (see the module doc).

    Indexing, ``in``, ``del`` and iteration take and give node ids
    (``nodes["keys"]``); the state dict and ``named_parameters`` show the keys
    (``nodes.@keys.weight``).
    """

    def __getitem__(self, key: str) -> nn.Module:  # type: ignore[override]
        return self._modules[module_key(key)]  # type: ignore[return-value]

    def __setitem__(self, key: str, module: nn.Module) -> None:
        self.add_module(module_key(key), module)

    def __delitem__(self, key: str) -> None:
        del self._modules[module_key(key)]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and module_key(key) in self._modules

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def keys(self) -> list[str]:  # type: ignore[override]
        """Node ids, in insertion order."""
        return [_node_id(k) for k in self._modules]

    def items(self) -> list[tuple[str, nn.Module]]:  # type: ignore[override]
        """(node id, module) pairs, in insertion order."""
        return [(_node_id(k), m) for k, m in self._modules.items() if m is not None]
