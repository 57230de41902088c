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
        "YAML tag '!!python/object/apply:os.system' is not allowed"
    )
    assert _where(info.value) == (1, 6)
    assert calls == []


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("f: !!python/name:os.system ''\n", "!!python/name:os.system"),
        ("x: !custom 1\n", "!custom"),
        ("x: !!set {a: null}\n", "!!set"),
        ("x: !!binary aGk=\n", "!!binary"),
        ("x: !!timestamp 2020-01-01\n", "!!timestamp"),
        ("x: !!python/object:os.system {}\n", "!!python/object:os.system"),
    ],
)
def test_other_tags_are_refused(text: str, tag: str) -> None:
    """Any tag beyond YAML's plain types is refused and named in the message."""
    with pytest.raises(SpecError) as info:
        loads(text)
    assert info.value.message == f"YAML tag '{tag}' is not allowed"
    assert _where(info.value) == (1, 4)


@pytest.mark.parametrize(
    ("text", "tag", "col"),
    [
        ("attngraph: !!bool 1\n", "!!bool", 12),
        ("kind: !!int values\n", "!!int", 7),
        ("a: !!str 5\n", "!!str", 4),
        ("a: !!float nan\n", "!!float", 4),
        ("a: !!null x\n", "!!null", 4),
        ("a: ! 5\n", "!", 4),
        ("a: !!map {b: 1}\n", "!!map", 4),
        ("a: !!seq [1]\n", "!!seq", 4),
    ],
)
def test_plain_type_tags_are_refused(text: str, tag: str, col: int) -> None:
    """An explicit tag, even for a plain type, is refused at the tag with a hint to drop
    it: `!!bool 1` and `!!int values` once crashed the constructor (KeyError,
    ValueError); a spec never needs a tag (quoting makes a string)."""
    with pytest.raises(SpecError) as info:
        loads(text, "t.yaml")
    err = info.value
    assert err.message == f"YAML tag '{tag}' is not allowed"
    assert (err.loc.file, *_where(err)) == ("t.yaml", 1, col)
    assert err.hint == (
        "specs take plain values: drop the tag (quote the value, e.g. '5', to make it a string)"
    )


# (text, message, (line, column)) of documents refused at one place
REFUSED = [
    # a repeated key inside {...} on one line points at the repeated key's column
    pytest.param("nodes:\n  x: {kind: items, kind: scorer}\n",
                 "duplicate key 'kind' (first at line 2)", (2, 20),
                 id="duplicate_key_in_flow_mapping"),
    # an alias with no anchor is a located syntax error
    pytest.param("a: *nope\n", "YAML syntax: found undefined alias 'nope'", (1, 4),
                 id="undefined_alias"),
    # a tag on a mapping key is refused like one on a value
    pytest.param("a: 1\n!!str b: 2\n", "YAML tag '!!str' is not allowed", (2, 1),
                 id="tag_on_a_key"),
    # `<<` merge keys are refused at the `<<`, with a hint to write fields out
    pytest.param("base: &b {x: 1}\nd:\n  <<: *b\n", "merge keys (<<) are not supported",
                 (3, 3), id="merge_keys"),
    # a list used as a mapping key is refused at the key
    pytest.param("? [a, b]\n: 1\n", "a mapping key must be a plain name", (1, 3),
                 id="complex_key"),
    # `true:` as a key is refused rather than silently becoming 'True'
    pytest.param("true: 1\n", "a mapping key must be a name, found True", (1, 1),
                 id="boolean_key"),
    # a lone surrogate that is no escaped byte is refused at its place in the text
    pytest.param("a: 1\nb: x\ud800\n",
                 "spec text holds a lone surrogate U+D800, which is not Unicode text", (2, 5),
                 id="lone_surrogate_in_text"),
]


@pytest.mark.parametrize(("text", "message", "where"), REFUSED)
def test_refused_at_its_place(text: str, message: str, where: tuple[int, int]) -> None:
    """Each document of REFUSED is one SpecError with its message, at its place."""
    with pytest.raises(SpecError) as info:
        loads(text)
    assert info.value.message == message
    assert _where(info.value) == where


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
    """A file that is not UTF-8 is a SpecError at the line and column of its first bad
    byte, with the excerpt (the bad byte shown as U+FFFD) and a hint."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"attngraph: 1\nname: caf\xe9\n")
    with pytest.raises(SpecError) as info:
        load(path)
    err = info.value
    assert err.message == "spec is not UTF-8 text: byte 0xe9 (invalid continuation byte)"
    assert (err.loc.file, *_where(err)) == (str(path), 2, 10)
    assert err.format() == (
        f"{path}:2:10: error: spec is not UTF-8 text: byte 0xe9 (invalid continuation byte)\n"
        "   2 | name: caf\ufffd\n"
        "     |          ^\n"
        "hint: save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8); a binary file is "
        "not a spec"
    )


def test_non_utf8_column_counts_characters_and_crlf_lines(tmp_path) -> None:
    """The column counts characters (é is one), and CRLF line ends count as one line."""
    path = tmp_path / "crlf.yaml"
    path.write_bytes(b"a: 1\r\nb: \xc3\xa9\xff\r\n")
    with pytest.raises(SpecError) as info:
        load(path)
    assert info.value.message == "spec is not UTF-8 text: byte 0xff (invalid start byte)"
    assert _where(info.value) == (2, 5)


def test_binary_file(tmp_path) -> None:
    """A binary file (here a PNG header) is refused at its first byte that is not UTF-8."""
    path = tmp_path / "image.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(SpecError) as info:
        load(path)
    assert info.value.message == "spec is not UTF-8 text: byte 0x89 (invalid start byte)"
    assert _where(info.value) == (1, 1)


def test_non_utf8_text_given_to_loads() -> None:
    """Text read with errors='surrogateescape' gives loads() the same error, at the same
    place, as the file gives load()."""
    text = b"attngraph: 1\nname: caf\xe9\n".decode("utf-8", "surrogateescape")
    with pytest.raises(SpecError) as info:
        loads(text, "t.yaml")
    assert info.value.message == "spec is not UTF-8 text: byte 0xe9 (undecodable)"
    assert _where(info.value) == (2, 10)


@pytest.mark.parametrize(
    ("text", "code", "line", "col"),
    [("a: 1\nb: x\x00y\n", "0000", 2, 5), ("a: \x1b[31mred\n", "001B", 1, 4),
     ("a: 'x\x7f'\n", "007F", 1, 6)],
)
def test_control_character(text: str, code: str, line: int, col: int) -> None:
    """A control character (binary data) is refused at its line and column, and the
    excerpt never writes it raw to the terminal."""
    with pytest.raises(SpecError) as info:
        loads(text, "c.yaml")
    err = info.value
    assert err.message == f"spec holds the control character U+{code}"
    assert _where(err) == (line, col)
    assert err.hint is not None and "binary file is not a spec" in err.hint
    assert chr(int(code, 16)) not in err.format()


# --- limits: depth, size, what is read ----------------------------------------


def _deep(n: int) -> str:
    return "x: " + "[" * n + "]" * n + "\n"


@pytest.mark.parametrize("n", [65, 3_000, 100_000])
def test_deep_brackets_are_refused_while_parsing(n: int) -> None:
    """A value nested thousands of brackets deep (once a segfault in libyaml's
    composer, a RecursionError in PyYAML's) is refused at the bracket that opens
    level 65, before any tree is built."""
    with pytest.raises(SpecError) as info:
        loads(_deep(n), "deep.yaml")
    err = info.value
    assert err.message == f"document nests deeper than {source.MAX_DEPTH} levels"
    assert (err.loc.file, *_where(err)) == ("deep.yaml", 1, 68)
    assert err.hint == (
        "a spec needs a few levels (nodes: id: field); look for brackets never closed"
    )


def test_sixty_four_levels_are_fine() -> None:
    """The limit is inclusive: 64 levels below the top-level map load."""
    data = loads(_deep(64)).data["x"]
    for _ in range(63):
        data = data[0]
    assert data == []
    maps = loads("x: " + "{a: " * 63 + "{}" + "}" * 63 + "\n").data["x"]
    for _ in range(63):
        maps = maps["a"]
    assert maps == {}


def test_deep_block_and_flow_mappings_are_refused() -> None:
    """Depth counts maps as well as lists, in flow and block style alike; a key sits
    at its map's level, so the error is at the value that opens level 65."""
    flow = "x: " + "{a: " * 5_000 + "1" + "}" * 5_000 + "\n"
    block = "".join("  " * i + "a:\n" for i in range(70)) + "  " * 70 + "b: 1\n"
    for text, where in ((flow, (1, 4 + 4 * 64)), (block, (66, 131))):
        with pytest.raises(SpecError) as info:
            loads(text)
        assert info.value.message == "document nests deeper than 64 levels"
        assert _where(info.value) == where


def test_deep_nesting_with_the_pure_python_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without libyaml the same document gives the same error, not a RecursionError
    (and a syntax error past the limit is never reached)."""
    import yaml

    monkeypatch.setattr(source, "_LOADER", yaml.SafeLoader)
    with pytest.raises(SpecError) as info:
        loads("x: " + "[" * 5_000 + "\n")
    assert info.value.message == "document nests deeper than 64 levels"
    assert _where(info.value) == (1, 68)


def test_too_many_nodes_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """A document with more nodes than MAX_NODES (no aliases) is refused at the node
    that goes over, while it is parsed."""
    monkeypatch.setattr(source, "MAX_NODES", 10)
    with pytest.raises(SpecError) as info:
        loads("x: [" + ", ".join("abcdefghijk") + "]\n")
    assert info.value.message == "document has more than 10 YAML nodes"
    assert _where(info.value) == (1, 26)


def test_oversized_text_is_located(monkeypatch: pytest.MonkeyPatch) -> None:
    """loads() measures UTF-8 bytes (é is two), and refuses at 1:1 with both figures."""
    monkeypatch.setattr(source, "MAX_BYTES", 10)
    with pytest.raises(SpecError) as info:
        loads("a: éééééé\n", "big.yaml")
    err = info.value
    assert err.message == "spec is 16 bytes, more than the limit of 10"
    assert (err.loc.file, *_where(err)) == ("big.yaml", 1, 1)
    assert err.hint == (
        "a spec is a few kilobytes of YAML; check that this is the file you meant"
    )


def test_oversized_file_is_located(monkeypatch: pytest.MonkeyPatch, spec_file) -> None:
    """A file over MAX_BYTES is refused at FILE:1:1, with its size and the limit."""
    monkeypatch.setattr(source, "MAX_BYTES", 10)
    path = spec_file("name: a_long_enough_name\n")
    with pytest.raises(SpecError) as info:
        load(path)
    assert str(info.value) == f"{path}:1:1: error: spec is 25 bytes, more than the limit of 10"


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_reads_at_most_one_byte_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A file whose size says 0 (as /proc files do) is read no further than
    MAX_BYTES + 1 bytes, then refused."""
    monkeypatch.setattr(source, "MAX_BYTES", 10)
    with pytest.raises(SpecError) as info:
        load("/proc/self/status")
    assert info.value.message == "spec is 11 bytes, more than the limit of 10"


def _load_within(path: str, seconds: float = 10.0) -> BaseException | None:
    """load(path) in a thread: what it raised, or a TimeoutError if it did not end."""
    import threading

    box: list[BaseException | None] = []

    def run() -> None:
        try:
            load(path)
            box.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    return box[0] if box else TimeoutError(f"load({path!r}) hung")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_fifo_is_refused_without_blocking(tmp_path) -> None:
    """A named pipe is refused at once (opened without blocking, never read)."""
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    err = _load_within(str(path))
    assert isinstance(err, SpecError), err
    assert err.message == f"{path} is a FIFO (named pipe), not a spec file"
    assert err.hint == "save the spec to a file and give its path"


@pytest.mark.parametrize("dev", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_device_is_refused(dev: str) -> None:
    """A character device (an endless /dev/zero, an empty /dev/null) is not a spec."""
    if not os.path.exists(dev):
        pytest.skip(f"no {dev}")
    err = _load_within(dev)
    assert isinstance(err, SpecError), err
    assert err.message == f"{dev} is a character device, not a spec file"


# --- plain values that are no spec values -------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a: 2020-01-01\n", "2020-01-01"),
        ("a: 2020-01-01 10:00:00\n", "2020-01-01 10:00:00"),
        ("a: =\n", "="),
        ("a: 1e400\n", "1e400"),
        ("a: <<\n", "<<"),
        (f"a: {2**63 - 1}\n", 2**63 - 1),
        (f"a: -{2**63 - 1}\n", -(2**63 - 1)),
        ("a: 0b" + "1" * 63 + "\n", 2**63 - 1),
        ("a: 1.5e+300\n", 1.5e300),
    ],
)
def test_plain_values_a_spec_may_hold(text: str, value: object) -> None:
    """YAML 1.1's dates and `=` stay the text written (a spec has no dates; the
    validator then says what it expected); 64-bit integers and finite floats load."""
    assert loads(text).data == {"a": value}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: .inf\n", "number '.inf' is not finite"),
        ("a: -.Inf\n", "number '-.Inf' is not finite"),
        ("a: .nan\n", "number '.nan' is not finite"),
        ("a: 1.0e+400\n", "number '1.0e+400' is not finite"),
        (f"a: {2**63}\n", "integer 9223372036854775808 is out of range"),
        ("a: 0x10000000000000000\n", "integer 0x10000000000000000 is out of range"),
        ("a: " + "9" * 400 + "\n", "integer 999999999999...9999 (400 characters) is out of range"),
        ("a: " + "1" * 5000 + "\n",
         "integer 111111111111...1111 (5000 characters) is out of range"),
    ],
)
def test_numbers_no_spec_can_use(text: str, message: str) -> None:
    """Non-finite floats and integers past 64 bits are refused at the value (an int of
    thousands of digits once raised Python's ValueError), each with a hint."""
    with pytest.raises(SpecError) as info:
        loads(text)
    assert info.value.message == message
    assert _where(info.value) == (1, 4)
    assert info.value.hint
