"""Tests for attngraph.source: safe YAML loading with source positions."""

from __future__ import annotations

import os
import time

import pytest

from attngraph import source
from attngraph.errors import SourceLoc, SpecError
from attngraph.source import load, loads

SPEC = """\
attngraph: 1
name: demo
nodes:
  x: {kind: items, from: tokens}
list:
  - a
  - [b, c]
"""


def _billion_laughs() -> str:
    """Nine levels of nine aliases each: 9**9 strings once expanded."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
        prev = name
    return "\n".join(lines) + "\n"


def _where(err: SpecError) -> tuple[int, int]:
    return (err.loc.line, err.loc.col)


# --- positions ---------------------------------------------------------------


def test_data_is_plain_python() -> None:
    """A spec loads to plain dicts, lists, strings and numbers, in the file's order."""
    doc = loads(SPEC, "d.yaml")
    assert doc.data == {
        "attngraph": 1,
        "name": "demo",
        "nodes": {"x": {"kind": "items", "from": "tokens"}},
        "list": ["a", ["b", "c"]],
    }
    assert list(doc.data) == ["attngraph", "name", "nodes", "list"]
    assert doc.file == "d.yaml"
    assert doc.text == SPEC


@pytest.mark.parametrize(
    ("path", "line", "col"),
    [
        (("attngraph",), 1, 12),
        (("name",), 2, 7),
        (("nodes", "x"), 4, 6),
        (("nodes", "x", "kind"), 4, 13),
        (("nodes", "x", "from"), 4, 26),
        (("list", 0), 6, 5),
        (("list", 1), 7, 5),
        (("list", 1, 1), 7, 9),
    ],
)
def test_value_positions(path: tuple[str | int, ...], line: int, col: int) -> None:
    """Each value's position is the exact 1-based (line, col) where it starts."""
    loc = loads(SPEC, "d.yaml").loc(path)
    assert (loc.file, loc.line, loc.col) == ("d.yaml", line, col)


@pytest.mark.parametrize(
    ("path", "line", "col"),
    [
        (("attngraph",), 1, 1),
        (("nodes",), 3, 1),
        (("nodes", "x"), 4, 3),
        (("nodes", "x", "kind"), 4, 7),
        (("nodes", "x", "from"), 4, 20),
    ],
)
def test_key_positions(path: tuple[str, ...], line: int, col: int) -> None:
    """With key=True, loc() gives the exact (line, col) of the mapping key itself."""
    loc = loads(SPEC, "d.yaml").loc(path, key=True)
    assert (loc.line, loc.col) == (line, col)


def test_list_item_key_falls_back_to_value() -> None:
    """A list index has no key, so key=True gives the item's own position."""
    doc = loads(SPEC, "d.yaml")
    assert doc.loc(("list", 1), key=True) == doc.loc(("list", 1))


def test_missing_path_falls_back_to_nearest_ancestor() -> None:
    """A path that is not in the file reports where its nearest ancestor is."""
    doc = loads(SPEC, "d.yaml")
    assert doc.loc(("nodes", "x", "missing")) == SourceLoc("d.yaml", 4, 6)
    assert doc.loc(("nope",)) == SourceLoc("d.yaml", 1, 1)
    assert doc.loc(()) == SourceLoc("d.yaml", 1, 1)


def test_locations_carry_the_text_for_excerpts() -> None:
    """A value's location can print its source line with a caret under it."""
    loc = loads(SPEC, "d.yaml").loc(("nodes", "x", "from"))
    assert loc.excerpt() == (
        "   4 |   x: {kind: items, from: tokens}\n"
        "     |                          ^"
    )


def test_integer_keys_become_strings() -> None:
    """A numeric mapping key is read as its name, so ids like `1` stay strings."""
    assert loads("1: a\n").data == {"1": "a"}


def test_load_reads_a_file(spec_file) -> None:
    """load() reads a file and names it by its path in every location."""
    path = spec_file("name: demo\n")
    doc = load(path)
    assert doc.data == {"name": "demo"}
    assert doc.file == str(path)
    assert doc.loc(("name",)) == SourceLoc(str(path), 1, 7)


# --- duplicate keys ----------------------------------------------------------


def test_duplicate_key() -> None:
    """A repeated key is an error at the second key, naming the first one's line."""
    with pytest.raises(SpecError) as info:
        loads("a: 1\nb: 2\na: 3\n", "s.yaml")
    err = info.value
    assert err.message == "duplicate key 'a' (first at line 1)"
    assert (err.loc.file, *_where(err)) == ("s.yaml", 3, 1)
    assert err.hint == "each key may appear once in a mapping; remove or rename one"


def test_duplicate_key_in_flow_mapping() -> None:
    """A repeated key inside {...} on one line points at the repeated key's column."""
    with pytest.raises(SpecError) as info:
        loads("nodes:\n  x: {kind: items, kind: scorer}\n")
    assert info.value.message == "duplicate key 'kind' (first at line 2)"
    assert _where(info.value) == (2, 20)


def test_same_key_in_different_mappings_is_fine() -> None:
    """Keys need only be unique within one mapping, not across the document."""
    assert loads("a: {k: 1}\nb: {k: 2}\n").data == {"a": {"k": 1}, "b": {"k": 2}}


# --- hostile documents -------------------------------------------------------


def test_billion_laughs_fails_fast() -> None:
    """A document whose aliases expand to 9**9 nodes is refused as a SpecError
    (not a MemoryError or a hang), well within a generous time bound."""
    start = time.perf_counter()
    with pytest.raises(SpecError) as info:
        loads(_billion_laughs(), "laughs.yaml")
    elapsed = time.perf_counter() - start
    assert info.value.message == (
        f"document expands to more than {source.MAX_NODES} YAML nodes"
    )
    assert info.value.loc.file == "laughs.yaml"
    assert elapsed < 5.0, f"took {elapsed:.2f} s"


@pytest.mark.parametrize("text", ["a: &x [*x]\n", "a: &x {b: *x}\n"])
def test_recursive_alias(text: str) -> None:
    """An alias inside its own anchor (a cyclic document) is a SpecError, not a
    RecursionError."""
    with pytest.raises(SpecError) as info:
        loads(text)
    assert info.value.message == "document nests deeper than 64 levels"
    assert _where(info.value) == (1, 4)


def test_deep_nesting_is_refused() -> None:
    """A document nested more than 64 levels deep is refused."""
    with pytest.raises(SpecError, match="nests deeper than 64 levels"):
        loads("a: " + "[" * 70 + "]" * 70 + "\n")


def test_undefined_alias() -> None:
    """An alias with no anchor is a located syntax error."""
    with pytest.raises(SpecError) as info:
        loads("a: *nope\n")
    assert info.value.message == "YAML syntax: found undefined alias 'nope'"
    assert _where(info.value) == (1, 4)


def test_object_building_tag_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """`!!python/object/apply` is refused at its tag and never runs anything."""
    calls: list[str] = []

    def fake_system(cmd: str) -> int:
        calls.append(cmd)
        return 0

    monkeypatch.setattr(os, "system", fake_system)
    with pytest.raises(SpecError) as info:
        loads("cmd: !!python/object/apply:os.system [echo hi]\n")
    assert info.value.message == (
        "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed"
    )
    assert _where(info.value) == (1, 6)
    assert calls == []


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("f: !!python/name:os.system ''\n", "tag:yaml.org,2002:python/name:os.system"),
        ("x: !custom 1\n", "!custom"),
        ("x: !!set {a: null}\n", "tag:yaml.org,2002:set"),
        ("x: !!binary aGk=\n", "tag:yaml.org,2002:binary"),
    ],
)
def test_other_tags_are_refused(text: str, tag: str) -> None:
    """Any tag beyond YAML's plain types is refused and named in the message."""
    with pytest.raises(SpecError) as info:
        loads(text)
    assert info.value.message == f"YAML tag '{tag}' is not allowed"
    assert _where(info.value) == (1, 4)


def test_plain_type_tags_are_allowed() -> None:
    """Explicit tags for plain types (!!str, !!int) are accepted."""
    assert loads("a: !!str 5\nb: !!int '7'\n").data == {"a": "5", "b": 7}


def test_merge_keys_are_refused() -> None:
    """`<<` merge keys are refused at the `<<`, with a hint to write fields out."""
    with pytest.raises(SpecError) as info:
        loads("base: &b {x: 1}\nd:\n  <<: *b\n")
    assert info.value.message == "merge keys (<<) are not supported"
    assert _where(info.value) == (3, 3)


def test_complex_key_is_refused() -> None:
    """A list used as a mapping key is refused at the key."""
    with pytest.raises(SpecError) as info:
        loads("? [a, b]\n: 1\n")
    assert info.value.message == "a mapping key must be a plain name"
    assert _where(info.value) == (1, 3)


def test_boolean_key_is_refused() -> None:
    """`true:` as a key is refused rather than silently becoming 'True'."""
    with pytest.raises(SpecError) as info:
        loads("true: 1\n")
    assert info.value.message == "a mapping key must be a name, found True"
    assert _where(info.value) == (1, 1)


def test_oversized_text_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text longer than MAX_BYTES is refused before it is parsed."""
    monkeypatch.setattr(source, "MAX_BYTES", 10)
    with pytest.raises(SpecError, match="more than the limit of 10"):
        loads("name: a_long_enough_name\n")


def test_oversized_file_is_refused(monkeypatch: pytest.MonkeyPatch, spec_file) -> None:
    """A file larger than MAX_BYTES is refused before it is read."""
    monkeypatch.setattr(source, "MAX_BYTES", 10)
    path = spec_file("name: a_long_enough_name\n")
    with pytest.raises(SpecError, match="more than the limit of 10"):
        load(path)


# --- syntax errors -----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message", "line", "col"),
    [
        ("a: 1\n b: 2\n", "YAML syntax: mapping values are not allowed here", 2, 3),
        ("a: [1, 2\nb: 3\n", "YAML syntax: expected ',' or ']', but got ':'", 2, 2),
        (
            "name: x\nnodes:\n  x: {kind: items\n  y: 2\n",
            "YAML syntax: expected ',' or '}', but got ':'",
            4,
            4,
        ),
        ("a:\n\tb: 1\n", "YAML syntax: found character '\\t' that cannot start any token", 2, 1),
    ],
)
def test_syntax_error_is_located(text: str, message: str, line: int, col: int) -> None:
    """A YAML syntax error is a SpecError at the line and column PyYAML found it."""
    with pytest.raises(SpecError) as info:
        loads(text, "s.yaml")
    err = info.value
    assert err.message == message
    assert (err.loc.file, *_where(err)) == ("s.yaml", line, col)
    assert err.hint == "check indentation, colons and matching brackets or quotes"


def test_syntax_error_formats_with_caret() -> None:
    """A syntax error prints as FILE:LINE:COL, the offending line, a caret, a hint."""
    with pytest.raises(SpecError) as info:
        loads("a: 1\n b: 2\n", "s.yaml")
    assert info.value.format() == (
        "s.yaml:2:3: error: YAML syntax: mapping values are not allowed here\n"
        "   2 |  b: 2\n"
        "     |   ^\n"
        "hint: check indentation, colons and matching brackets or quotes"
    )


def test_second_document_is_refused() -> None:
    """A spec file holds one YAML document; a second `---` is an error there."""
    with pytest.raises(SpecError) as info:
        loads("a: 1\n---\nb: 2\n")
    assert "another document" in info.value.message
    assert _where(info.value) == (2, 1)


# --- empty, missing, unreadable ----------------------------------------------


@pytest.mark.parametrize("text", ["", "# only a comment\n", "\n\n"])
def test_empty_spec(text: str) -> None:
    """A file with no YAML content is an error at 1:1 saying how a spec starts."""
    with pytest.raises(SpecError) as info:
        loads(text, "e.yaml")
    err = info.value
    assert err.message == "the spec is empty"
    assert (err.loc.file, *_where(err)) == ("e.yaml", 1, 1)
    assert err.hint == "a spec starts with 'attngraph: 1' and a 'name:'"


def test_empty_file(spec_file) -> None:
    """load() of an empty file gives the same error as loads('')."""
    path = spec_file("")
    with pytest.raises(SpecError) as info:
        load(path)
    assert info.value.message == "the spec is empty"
    assert info.value.loc.file == str(path)


def test_missing_file(tmp_path) -> None:
    """A path that does not exist is a SpecError naming the path."""
    path = tmp_path / "nope.yaml"
    with pytest.raises(SpecError) as info:
        load(path)
    assert info.value.message == f"no such file: {path}"
    assert info.value.loc == SourceLoc(str(path))
    assert str(info.value) == f"{path}: error: no such file: {path}"


def test_directory_is_not_a_spec(tmp_path) -> None:
    """A directory given as a spec is a SpecError, not an IsADirectoryError."""
    with pytest.raises(SpecError) as info:
        load(tmp_path)
    assert info.value.message == f"{tmp_path} is a directory, not a spec"


def test_non_utf8_file(tmp_path) -> None:
    """A file that is not UTF-8 is a SpecError naming the decoding problem."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(SpecError) as info:
        load(path)
    assert info.value.message == "spec is not UTF-8 text (invalid continuation byte)"
    assert info.value.loc.file == str(path)
