"""Read YAML safely, keeping the line and column of every key and value.

Only YAML's plain types are accepted (maps, lists, strings, numbers, booleans,
null); a tag that would build an object is an error. Duplicate keys are errors.
Aliases are expanded with a bound on the total number of nodes, so a "billion
laughs" document fails fast instead of exhausting memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from attngraph.errors import SourceLoc, SpecError

__all__ = ["Document", "PathKey", "load", "loads", "MAX_NODES", "MAX_BYTES"]

PathKey = tuple[str | int, ...]

#: Most YAML nodes a document may expand to (aliases count each time used).
MAX_NODES = 100_000
#: Largest spec file read.
MAX_BYTES = 2_000_000

_TAG = "tag:yaml.org,2002:"
#: libyaml's C parser when PyYAML was built with it (several times faster on large
#: specs); both keep the marks (line, column) that diagnostics need.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCALAR_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null")}


@dataclass(frozen=True)
class Document:
    """Plain YAML data plus where each piece came from.

    ``locs`` maps a path (keys and list indices from the root) to the position of
    its value; ``key_locs`` maps a mapping entry's path to the position of its key.
    """

    file: str
    text: str
    data: Any
    locs: dict[PathKey, SourceLoc] = field(repr=False)
    key_locs: dict[PathKey, SourceLoc] = field(repr=False)

    def loc(self, path: PathKey, *, key: bool = False) -> SourceLoc:
        """Position of ``path``'s value (or key), else of its nearest ancestor."""
        table = self.key_locs if key else self.locs
        p = tuple(path)
        while p:
            if p in table:
                return table[p]
            if p in self.locs:
                return self.locs[p]
            p = p[:-1]
        return self.locs.get((), SourceLoc(self.file, 1, 1, self.text))


def _mark_loc(file: str, text: str, mark: Any) -> SourceLoc:
    return SourceLoc(file, mark.line + 1, mark.column + 1, text)


class _Builder:
    """Turns a composed YAML node tree into plain data with positions."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self.locs: dict[PathKey, SourceLoc] = {}
        self.key_locs: dict[PathKey, SourceLoc] = {}
        self.count = 0
        self.scalars = SafeConstructor()

    def loc(self, node: Node) -> SourceLoc:
        return _mark_loc(self.file, self.text, node.start_mark)

    def build(self, node: Node, path: PathKey, depth: int = 0) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            msg = f"document expands to more than {MAX_NODES} YAML nodes"
            raise SpecError(
                msg,
                self.loc(node),
                "aliases (*name) are expanded in full; a spec never needs this many",
            )
        if depth > 64:
            msg = "document nests deeper than 64 levels"
            raise SpecError(msg, self.loc(node))
        self.locs.setdefault(path, self.loc(node))
        if isinstance(node, MappingNode):
            if node.tag != _TAG + "map":
                raise self._bad_tag(node)
            out: dict[str, Any] = {}
            for knode, vnode in node.value:
                if knode.tag == _TAG + "merge":
                    msg = "merge keys (<<) are not supported"
                    raise SpecError(
                        msg, self.loc(knode),
                        "write the fields out in full",
                    )
                if not isinstance(knode, ScalarNode):
                    msg = "a mapping key must be a plain name"
                    raise SpecError(msg, self.loc(knode))
                key = self.scalar(knode)
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    msg = f"a mapping key must be a name, found {key!r}"
                    raise SpecError(
                        msg, self.loc(knode)
                    )
                key = str(key)
                kpath = (*path, key)
                if key in out:
                    first = self.key_locs[kpath]
                    msg = f"duplicate key '{key}' (first at line {first.line})"
                    raise SpecError(
                        msg,
                        self.loc(knode),
                        "each key may appear once in a mapping; remove or rename one",
                    )
                self.key_locs[kpath] = self.loc(knode)
                out[key] = self.build(vnode, kpath, depth + 1)
            return out
        if isinstance(node, SequenceNode):
            if node.tag != _TAG + "seq":
                raise self._bad_tag(node)
            return [self.build(v, (*path, i), depth + 1) for i, v in enumerate(node.value)]
        return self.scalar(node)

    def scalar(self, node: Node) -> Any:
        if node.tag not in _SCALAR_TAGS:
            raise self._bad_tag(node)
        return self.scalars.construct_object(node, deep=True)

    def _bad_tag(self, node: Node) -> SpecError:
        return SpecError(
            f"YAML tag '{node.tag}' is not allowed",
            self.loc(node),
            "specs use plain maps, lists, strings, numbers and booleans; tags that "
            "build objects are refused",
        )


def _compose(text: str) -> Node | None:
    """Compose with libyaml; on a syntax error, again with the pure-Python parser,
    whose messages name more (the alias, the token found) for the diagnostic."""
    try:
        return yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError:
        if _LOADER is yaml.SafeLoader:
            raise
    return yaml.compose(text, Loader=yaml.SafeLoader)


def loads(text: str, file: str = "<spec>") -> Document:
    """Parse YAML text into a :class:`Document`.

    Examples
    --------
    >>> doc = loads("a: 1\\nb: [x, y]\\n", "demo.yaml")
    >>> doc.data
    {'a': 1, 'b': ['x', 'y']}
    >>> str(doc.loc(("b", 1)))
    'demo.yaml:2:8'
    """
    if len(text) > MAX_BYTES:
        msg = f"spec is {len(text)} bytes, more than the limit of {MAX_BYTES}"
        raise SpecError(
            msg,
            SourceLoc(file, 1, 1, None),
        )
    try:
        node = _compose(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        loc = _mark_loc(file, text, mark) if mark else SourceLoc(file, 1, 1, text)
        problem = exc.problem or exc.context or "invalid YAML"
        msg = f"YAML syntax: {problem}"
        raise SpecError(
            msg, loc,
            "check indentation, colons and matching brackets or quotes",
        ) from None
    except yaml.YAMLError as exc:
        msg = f"YAML: {exc}"
        raise SpecError(msg, SourceLoc(file, 1, 1, text)) from None
    if node is None:
        msg = "the spec is empty"
        raise SpecError(
            msg, SourceLoc(file, 1, 1, text),
            "a spec starts with 'attngraph: 1' and a 'name:'",
        )
    b = _Builder(file, text)
    data = b.build(node, ())
    return Document(file, text, data, b.locs, b.key_locs)


def load(path: str | Path) -> Document:
    """Read a spec file into a :class:`Document` (see :func:`loads`)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            msg = f"spec is {size} bytes, more than the limit of {MAX_BYTES}"
            raise SpecError(
                msg,
                SourceLoc(str(path), 0, 0),
            )
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"no such file: {path}"
        raise SpecError(msg, SourceLoc(str(path))) from None
    except IsADirectoryError:
        msg = f"{path} is a directory, not a spec"
        raise SpecError(msg, SourceLoc(str(path))) from None
    except UnicodeDecodeError as exc:
        msg = f"spec is not UTF-8 text ({exc.reason})"
        raise SpecError(msg, SourceLoc(str(path))) from None
    except OSError as exc:
        msg = f"cannot read spec: {exc.strerror}"
        raise SpecError(msg, SourceLoc(str(path))) from None
    return loads(text, str(path))
