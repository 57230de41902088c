"""Names: node ids as module keys (:class:`NodeDict`), and user names as identifiers of
generated code (:class:`Mangler`).

Any identifier is a node id, ``keys``, ``train`` or ``_modules`` included, but
``nn.ModuleDict`` stores its modules as attributes and refuses a key that names one
of its own attributes. Such an id is stored under ``@<id>`` (:func:`module_key`);
no identifier contains ``@``, so the escaped key cannot be another node's. Every
other id is its own key, so parameters keep the names ``nodes.<id>.<param>`` that
checkpoints hold. Which ids are escaped follows the installed torch's
``nn.ModuleDict``.

Every name that generated code (``model.code``, ``attngraph export --format python``)
makes from a user's name (a spec's name, a node id, a body's name) comes from one
:class:`Mangler`: the name itself when it is already safe, else a valid identifier
like it that is no keyword or soft keyword (``match``, ``type``, ``_``), no builtin,
no name the file defines or imports, and no other user name's identifier.
"""

from __future__ import annotations

import builtins
import keyword
import unicodedata
from typing import TYPE_CHECKING

from torch import nn

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["ESCAPE", "KEYWORDS", "MAX_IDENTIFIER", "RESERVED", "Mangler", "NodeDict",
           "identifier", "module_key"]

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


#: Python's keywords and soft keywords (``match``, ``case``, ``type``, ``_``)
KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
#: what a user's name never becomes in generated code: keywords, soft keywords, builtins
RESERVED = KEYWORDS | frozenset(dir(builtins))
#: the longest identifier made from a user's name (before a suffix that keeps it distinct)
MAX_IDENTIFIER = 64


def _nfkc(text: str) -> str:
    """``text`` as Python reads an identifier (NFKC: ``ﬁ`` is ``fi``)."""
    return unicodedata.normalize("NFKC", text)


def identifier(name: str, *, camel: bool = False, prefix: str = "v") -> str:
    """A valid identifier like ``name``, alone (:class:`Mangler` keeps names apart).

    Characters an identifier cannot hold become ``_``; with ``camel`` the parts between
    them are capitalised and joined (a class name). A name that does not start like an
    identifier gets ``prefix``; one without letters or digits is ``prefix`` alone; a
    leading ``__`` (private-name mangling in a class) is dropped; the result is NFKC
    (as Python reads it) and at most :data:`MAX_IDENTIFIER` characters.

    >>> identifier("multihead_attention", camel=True, prefix="Model")
    'MultiheadAttention'
    >>> identifier("2d-conv"), identifier("2d-conv", camel=True, prefix="Model")
    ('v_2d_conv', 'Model2dConv')
    >>> identifier(""), identifier("__init__"), identifier("π_r²")
    ('v', 'v_init__', 'π_r2')
    """
    out = "".join(c if ("_" + c).isidentifier() else "_" for c in _nfkc(str(name)))
    if camel:
        out = "".join(p[:1].upper() + p[1:] for p in out.split("_") if p)
    out = out[:MAX_IDENTIFIER]
    if not out.strip("_"):
        out = prefix
    elif out.startswith("__"):
        out = f"{prefix}_{out.lstrip('_')}"
    elif not out[0].isidentifier():
        out = prefix + ("" if camel else "_") + out
    if _nfkc(out) != out or not out.isidentifier():  # case mapping or NFKC of a mix
        out = "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"_{ord(c):x}"
                      for c in out)
        if not out[:1].isalpha():
            out = f"{prefix}_{out.lstrip('_')}"
    return out


class Mangler:
    """One namespace of generated code: each key (a user's name) gets one identifier.

    A key's identifier is :func:`identifier` of its base (the key itself unless
    given), or, when that is taken (:data:`RESERVED`, a name reserved for the file's
    own code, another key's), the same with ``suffix``, then with a number
    (``class_``, ``class_2``...). Names are given in the order asked, so the same
    requests give the same names, and two keys never share one.

    >>> m = Mangler({"torch", "Runtime"})
    >>> m.name("q"), m.name("class"), m.name("torch"), m.name("a.b"), m.name("a_b")
    ('q', 'class_', 'torch_', 'a_b', 'a_b_')
    >>> m.name("runtime", camel=True, prefix="Model", suffix="Model")
    'RuntimeModel'
    """

    def __init__(self, reserved: Iterable[str] = ()) -> None:
        self.taken: set[str] = set(RESERVED) | {_nfkc(n) for n in reserved}
        #: key -> its identifier
        self.of: dict[str, str] = {}

    def reserve(self, *names: str) -> None:
        """Keep ``names`` for the file's own code: no key gets them."""
        self.taken.update(_nfkc(n) for n in names)

    def name(self, key: str, base: str | None = None, *, camel: bool = False,
             prefix: str = "v", suffix: str = "_") -> str:
        """The identifier of ``key`` (the same every time it is asked)."""
        if key not in self.of:
            stem = identifier(key if base is None else base, camel=camel, prefix=prefix)
            self.of[key] = self._claim(stem, suffix)
        return self.of[key]

    def fresh(self, base: str) -> str:
        """A new identifier like ``base`` for a name of the generated code's own (no
        key: asked twice, it gives two names)."""
        return self._claim(identifier(base), "_")

    def _claim(self, stem: str, suffix: str) -> str:
        out = stem if stem not in self.taken else stem + suffix
        i = 2
        while out in self.taken:
            out = f"{stem}{suffix}{i}"
            i += 1
        self.taken.add(out)
        return out
