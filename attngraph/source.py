"""Read YAML safely, keeping the line and column of every key and value.

Only YAML's plain values are accepted (maps, lists, strings, finite numbers,
booleans, null); any explicit tag (``!!str``, ``!!python/object``, ``!custom``)
is an error, as are duplicate keys. The document is composed from the parser's
events without recursion, refusing more than :data:`MAX_DEPTH` levels or
:data:`MAX_NODES` nodes as soon as the parser reaches them, so no file can
exhaust the stack. Aliases are expanded with a bound on the total number of
nodes, so a "billion laughs" document fails fast instead of exhausting memory.
The text is checked first by :mod:`attngraph.spectext` (size, UTF-8, control
characters), which also reads a spec file: a regular file only, never past
:data:`MAX_BYTES`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from attngraph.errors import SourceLoc, SpecError
from attngraph.spectext import SIZE_HINT, check_text, read_text

__all__ = [
    "Document", "Positions", "PathKey", "load", "loads", "MAX_NODES", "MAX_BYTES", "MAX_DEPTH",
]

PathKey = tuple[str | int, ...]

#: Most YAML nodes a document may expand to (aliases count each time used).
MAX_NODES = 100_000
#: Largest spec, in bytes of UTF-8.
MAX_BYTES = 2_000_000
#: Deepest nesting of maps and lists (the top-level map is level 0).
MAX_DEPTH = 64
#: Largest magnitude of an integer (64-bit, as torch sizes and seeds are).
MAX_INT = 2**63 - 1

_TAG = "tag:yaml.org,2002:"
#: libyaml's C parser when PyYAML was built with it (several times faster on large
#: specs); both keep the marks (line, column) that diagnostics need.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVER = Resolver()
_PLAIN_TAGS = {_TAG + t for t in ("str", "int", "float", "bool", "null", "map", "seq")}


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
        return _nearest(self.file, self.text, self.locs, self.key_locs, path, key)

    def positions(self, *sections: str) -> Positions:
        """The positions of the root and of everything under the top-level keys
        ``sections`` (what a graph keeps of the parts its nodes do not carry)."""
        keep = set(sections)

        def under(table: Mapping[PathKey, SourceLoc]) -> dict[PathKey, SourceLoc]:
            return {p: loc for p, loc in table.items() if not p or p[0] in keep}

        return Positions(self.file, self.text, under(self.locs), under(self.key_locs))


@dataclass(frozen=True)
class Positions:
    """Where some paths of a document sit: its file and text, and the position of
    each path's value (``locs``) and of each mapping entry's key (``key_locs``).

    :meth:`Document.positions` makes one; the IR keeps one per spec
    (:attr:`attngraph.ir.graph.Graph.positions`: the ``train:``, ``dims:``,
    ``inputs:`` and ``outputs:`` sections), so no module reads the YAML again to
    place an error there.
    """

    file: str
    text: str
    locs: Mapping[PathKey, SourceLoc] = field(repr=False)
    key_locs: Mapping[PathKey, SourceLoc] = field(repr=False)

    def loc(self, path: PathKey, *, key: bool = False) -> SourceLoc:
        """Position of ``path``'s value (or key), else of its nearest kept ancestor."""
        return _nearest(self.file, self.text, self.locs, self.key_locs, path, key)


def _nearest(file: str, text: str, locs: Mapping[PathKey, SourceLoc],
             key_locs: Mapping[PathKey, SourceLoc], path: PathKey, key: bool) -> SourceLoc:
    """Position of ``path``'s value (or key), else of its nearest ancestor, else the
    document's start."""
    table = key_locs if key else locs
    p = tuple(path)
    while p:
        if p in table:
            return table[p]
        if p in locs:
            return locs[p]
        p = p[:-1]
    return locs.get((), SourceLoc(file, 1, 1, text))


def _mark_loc(file: str, text: str, mark: Any) -> SourceLoc:
    return SourceLoc(file, mark.line + 1, mark.column + 1, text)


def _tag_error(tag: str, loc: SourceLoc) -> SpecError:
    if tag in _PLAIN_TAGS or tag == "!":
        hint = ("specs take plain values: drop the tag (quote the value, e.g. '5', "
                "to make it a string)")
    else:
        hint = ("specs use plain maps, lists, strings, numbers and booleans; tags that "
                "build objects are refused")
    # as written: !!int, not tag:yaml.org,2002:int
    shown = "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag
    return SpecError(f"YAML tag '{shown}' is not allowed", loc, hint)


def _depth_error(loc: SourceLoc, alias: bool) -> SpecError:
    msg = f"document nests deeper than {MAX_DEPTH} levels"
    hint = ("an alias (*name) used inside its own anchor nests forever; write the value "
            "out" if alias else
            "a spec needs a few levels (nodes: id: field); look for brackets never closed")
    return SpecError(msg, loc, hint)


def _compose(text: str, file: str, loader: Any) -> Node | None:
    """Build the node tree from ``loader``'s events with an explicit stack (no
    recursion), refusing explicit tags and over-deep or over-large documents at the
    event that goes too far."""
    root: Node | None = None
    stack: list[Node] = []  # open maps and lists, innermost last
    keys: list[Node | None] = []  # per open map: the key waiting for its value
    anchors: dict[str, Node] = {}
    count = 0
    for ev in yaml.parse(text, Loader=loader):
        cls = type(ev)
        if cls is SequenceEndEvent or cls is MappingEndEvent:
            stack.pop().end_mark = ev.end_mark
            keys.pop()
            continue
        if cls is DocumentStartEvent and root is not None:
            msg = "found another document (a spec file holds one YAML document)"
            raise SpecError(msg, _mark_loc(file, text, ev.start_mark),
                            "remove the second '---' and what follows it, or put each "
                            "spec in its own file")
        if cls not in _NODE_EVENTS:
            continue
        count += 1
        # a node's depth is its parent's plus one, but a key sits at its map's depth
        depth = len(stack) - (1 if keys and keys[-1] is None else 0)
        if count > MAX_NODES or depth > MAX_DEPTH or (
                cls is not AliasEvent and ev.tag is not None):
            raise _event_error(ev, file, text, count, depth)
        node = _event_node(ev, cls, anchors, file, text)
        if not stack:
            root = node
        elif keys[-1] is _IN_LIST:
            stack[-1].value.append(node)
        elif keys[-1] is None:
            keys[-1] = node
        else:
            stack[-1].value.append((keys[-1], node))
            keys[-1] = None
        if cls is SequenceStartEvent or cls is MappingStartEvent:
            stack.append(node)
            keys.append(_IN_LIST if cls is SequenceStartEvent else None)
    return root


def _event_node(ev: Any, cls: type, anchors: dict[str, Node], file: str, text: str) -> Node:
    """The node a node event stands for: an alias's anchored node, else a new one
    (kept in ``anchors`` under its anchor, which may be defined once)."""
    anchor = ev.anchor
    if cls is AliasEvent:
        if anchor not in anchors:
            msg = f"YAML syntax: found undefined alias '{anchor}'"
            raise SpecError(msg, _mark_loc(file, text, ev.start_mark),
                            f"define the anchor (&{anchor}) before its first use, "
                            "or write the value out")
        return anchors[anchor]
    node: Node
    if cls is ScalarEvent:
        tag = _RESOLVER.resolve(ScalarNode, ev.value, ev.implicit)
        node = ScalarNode(tag, ev.value, ev.start_mark, ev.end_mark, style=ev.style)
    elif cls is SequenceStartEvent:
        node = SequenceNode(_TAG + "seq", [], ev.start_mark, None, flow_style=ev.flow_style)
    else:
        node = MappingNode(_TAG + "map", [], ev.start_mark, None, flow_style=ev.flow_style)
    if anchor is not None:
        if anchor in anchors:
            first = anchors[anchor].start_mark.line + 1
            msg = f"YAML syntax: anchor '&{anchor}' defined twice (first at line {first})"
            raise SpecError(msg, _mark_loc(file, text, ev.start_mark),
                            "give each anchor its own name")
        anchors[anchor] = node
    return node


_NODE_EVENTS = frozenset((ScalarEvent, SequenceStartEvent, MappingStartEvent, AliasEvent))
#: Marks an open list in ``_compose``'s key stack (a list has no keys).
_IN_LIST = ScalarNode("", "", None, None)


def _event_error(ev: Any, file: str, text: str, count: int, depth: int) -> SpecError:
    """The error of a node event that makes the document too large or too deep, or
    that carries a tag."""
    loc = _mark_loc(file, text, ev.start_mark)
    if count > MAX_NODES:
        msg = f"document has more than {MAX_NODES:,} YAML nodes"
        return SpecError(msg, loc, SIZE_HINT)
    if depth > MAX_DEPTH:
        return _depth_error(loc, alias=False)
    return _tag_error(ev.tag, loc)


class _Builder:
    """Turns a composed YAML node tree into plain data with positions.

    The tree is at most :data:`MAX_DEPTH` deep as written, but an alias can repeat
    a subtree deeper down (or inside itself), so the same bound is checked here.
    """

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
        if depth > MAX_DEPTH:
            raise _depth_error(self.loc(node), alias=True)
        self.locs.setdefault(path, self.loc(node))
        if isinstance(node, MappingNode):
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
                    raise SpecError(msg, self.loc(knode),
                                    "write a name (letters, digits, _) before the colon")
                key = self.scalar(knode)
                if not isinstance(key, (str, int)) or isinstance(key, bool):
                    msg = f"a mapping key must be a name, found {key!r}"
                    raise SpecError(
                        msg, self.loc(knode),
                        "quote the key to use it as a name, e.g. 'on':",
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
            return [self.build(v, (*path, i), depth + 1) for i, v in enumerate(node.value)]
        return self.scalar(node)

    def scalar(self, node: Node) -> Any:
        """A plain scalar's value; dates and other YAML 1.1 types stay their text."""
        tag = node.tag
        if tag == _TAG + "int":
            return self._int(node)
        if tag == _TAG + "float":
            value = self.scalars.construct_yaml_float(node)
            if not math.isfinite(value):
                msg = f"number '{node.value}' is not finite"
                raise SpecError(msg, self.loc(node),
                                "write a finite number; a spec has no use for .inf or .nan "
                                f"(quote it, '{node.value}', if you meant text)")
            return value
        if tag == _TAG + "bool":
            return self.scalars.construct_yaml_bool(node)
        if tag == _TAG + "null":
            return None
        return node.value

    def _int(self, node: Node) -> int:
        text = node.value
        # int() of thousands of digits is refused by Python itself (and slow): the
        # length bound comes first; 80 characters hold any 64-bit integer (0b...)
        value = self.scalars.construct_yaml_int(node) if len(text) <= 80 else None
        if value is None or abs(value) > MAX_INT:
            shown = text if len(text) <= 24 else (
                f"{text[:12]}...{text[-4:]} ({len(text)} characters)")
            msg = f"integer {shown} is out of range"
            raise SpecError(msg, self.loc(node),
                            f"integers in a spec fit in 64 bits (at most {MAX_INT:,}); "
                            "sizes and counts are far smaller")
        return value  # type: ignore[no-any-return]


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
    check_text(text, file, MAX_BYTES)
    try:
        try:
            node = _compose(text, file, _LOADER)
        except yaml.YAMLError:
            if _LOADER is yaml.SafeLoader:
                raise
            # the pure-Python parser's messages name more (the token found)
            node = _compose(text, file, yaml.SafeLoader)
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
        raise SpecError(msg, SourceLoc(file, 1, 1, text),
                        "check that the file is YAML text") from None
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
    """Read a spec file into a :class:`Document` (see :func:`loads`).

    Only a regular file is read (a directory, FIFO or device is refused), and no
    more than :data:`MAX_BYTES` + 1 bytes of it.
    """
    name = str(path)
    return loads(read_text(name, MAX_BYTES), name)
