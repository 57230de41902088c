"""Tests for attngraph.errors: locations, diagnostics, the hierarchy, hints."""

from __future__ import annotations

import pytest

from attngraph import errors
from attngraph.errors import (
    AttnGraphError,
    Diagnostic,
    GraphError,
    LoweringError,
    RenderError,
    ShapeError,
    SourceLoc,
    SpecError,
    TrainingError,
    did_you_mean,
)

TEXT = """\
attngraph: 1
nodes:
  s: {kind: scorer, fn: dot, query: q, key: k, pairs: all}
"""


# --- SourceLoc ---------------------------------------------------------------


def test_loc_str_with_and_without_position() -> None:
    """A location prints as FILE:LINE:COL, or just FILE when the line is unknown."""
    assert str(SourceLoc("a.yaml", 3, 5)) == "a.yaml:3:5"
    assert str(SourceLoc("a.yaml")) == "a.yaml"
    assert str(SourceLoc()) == "<spec>"


def test_loc_equality_ignores_text() -> None:
    """Two locations are equal by file, line and col, whatever text they carry."""
    assert SourceLoc("a.yaml", 1, 2, "x: 1\n") == SourceLoc("a.yaml", 1, 2)
    assert SourceLoc("a.yaml", 1, 2) != SourceLoc("a.yaml", 1, 3)


def test_loc_is_frozen() -> None:
    """A location cannot be changed after it is made."""
    loc = SourceLoc("a.yaml", 1, 1)
    with pytest.raises(AttributeError):
        loc.line = 2  # type: ignore[misc]


def test_excerpt_puts_caret_under_column() -> None:
    """The excerpt shows the numbered source line and a caret under column `col`."""
    loc = SourceLoc("a.yaml", 3, 6, TEXT)
    assert loc.excerpt() == (
        "   3 |   s: {kind: scorer, fn: dot, query: q, key: k, pairs: all}\n"
        "     |      ^"
    )
    src, caret = loc.excerpt().splitlines()
    assert src.index("|") == caret.index("|")
    # The caret sits under the character at column 6 of the source line.
    assert src[caret.index("^")] == TEXT.splitlines()[2][5] == "{"


def test_excerpt_gutter_widens_with_line_number() -> None:
    """For a two-digit line number the gutter widens and the caret stays aligned."""
    text = "\n" * 11 + "key: value\n"
    loc = SourceLoc("a.yaml", 12, 6, text)
    assert loc.excerpt() == "   12 | key: value\n      |      ^"


def test_excerpt_col_one_and_zero() -> None:
    """Column 1 puts the caret at the start; column 0 (unknown) does too."""
    assert SourceLoc("a", 1, 1, "abc\n").excerpt().endswith("| ^")
    assert SourceLoc("a", 1, 0, "abc\n").excerpt().endswith("| ^")


@pytest.mark.parametrize(
    "loc",
    [
        SourceLoc("a.yaml", 1, 1),  # no text
        SourceLoc("a.yaml", 0, 0, "x: 1\n"),  # no line
        SourceLoc("a.yaml", 5, 1, "x: 1\n"),  # line past the end
    ],
)
def test_excerpt_empty_when_unknown(loc: SourceLoc) -> None:
    """Without text, or with a line outside the text, the excerpt is empty."""
    assert loc.excerpt() == ""


def test_excerpt_of_a_long_line_is_a_window_around_the_column() -> None:
    """A line longer than 100 characters shows 100 of them around the column, marked
    with '...' where cut, and the caret stays under the character at the column."""
    line = "x: " + "[" * 5000 + "]" * 5000
    loc = SourceLoc("a.yaml", 1, 3000, line + "\n")
    src, caret = loc.excerpt().splitlines()
    assert src.startswith("   1 | ...") and src.endswith("...")
    assert len(src) == len("   1 | ") + 3 + 100 + 3
    assert caret.index("^") == len("   1 | ...") + 50
    assert src[caret.index("^")] == line[2999] == "["
    # near the start of the line: no leading cut, the caret at its column
    near = SourceLoc("a.yaml", 1, 5, line + "\n").excerpt().splitlines()
    assert near[0].startswith("   1 | x: [[") and near[0].endswith("...")
    assert near[1].index("^") == len("   1 | ") + 4
    # near the end: no trailing cut
    end = SourceLoc("a.yaml", 1, len(line), line + "\n").excerpt().splitlines()
    assert end[0].endswith("]]]") and end[0][end[1].index("^")] == "]"


def test_excerpt_never_prints_control_characters() -> None:
    """Control characters (a terminal escape, a NUL) print as U+FFFD, one for one, so
    the caret stays in place; tabs are kept."""
    loc = SourceLoc("a.yaml", 1, 6, "a:\t\x1b[2J\x00x\n")
    src, caret = loc.excerpt().splitlines()
    assert src == "   1 | a:\t\ufffd[2J\ufffdx"
    assert src[caret.index("^")] == "2"


# --- Diagnostic --------------------------------------------------------------


def test_diagnostic_format_full() -> None:
    """A diagnostic prints its located head line, the excerpt with the caret under
    the right column, then the hint."""
    diag = Diagnostic(
        SourceLoc("my_spec.yaml", 3, 6, TEXT),
        "node 's': scorer fn 'dot' needs equal dims",
        "use fn 'general'",
    )
    assert diag.format() == (
        "my_spec.yaml:3:6: error: node 's': scorer fn 'dot' needs equal dims\n"
        "   3 |   s: {kind: scorer, fn: dot, query: q, key: k, pairs: all}\n"
        "     |      ^\n"
        "hint: use fn 'general'"
    )


def test_diagnostic_format_without_text_or_hint() -> None:
    """With no source text and no hint, a diagnostic is its head line alone."""
    diag = Diagnostic(SourceLoc("a.yaml", 2, 1), "bad")
    assert diag.format() == "a.yaml:2:1: error: bad"


def test_diagnostic_format_color() -> None:
    """color=True paints only the word 'error'; the rest is unchanged."""
    diag = Diagnostic(SourceLoc("a.yaml", 1, 1), "bad")
    assert diag.format(color=True) == "a.yaml:1:1: \x1b[1;31merror\x1b[0m: bad"


# --- AttnGraphError and the hierarchy ----------------------------------------


@pytest.mark.parametrize(
    "cls", [SpecError, GraphError, ShapeError, LoweringError, RenderError, TrainingError]
)
def test_hierarchy_is_shallow(cls: type[AttnGraphError]) -> None:
    """Each error kind derives directly from AttnGraphError, itself an Exception."""
    assert cls.__bases__ == (AttnGraphError,)
    assert issubclass(cls, Exception)
    msg = "boom"
    with pytest.raises(AttnGraphError):
        raise cls(msg)


def test_error_str_is_located_head() -> None:
    """str(error) is 'LOC: error: message', and loc/message/hint read the first
    diagnostic."""
    loc = SourceLoc("a.yaml", 4, 2, TEXT)
    err = SpecError("unknown field 'foo'", loc, "remove it")
    assert str(err) == "a.yaml:4:2: error: unknown field 'foo'"
    assert err.loc == loc
    assert err.message == "unknown field 'foo'"
    assert err.hint == "remove it"
    assert err.diagnostics == (Diagnostic(loc, "unknown field 'foo'", "remove it"),)


def test_error_without_location() -> None:
    """An error made with a message only is located at the default '<spec>'."""
    err = GraphError("no outputs")
    assert err.loc == SourceLoc()
    assert str(err) == "<spec>: error: no outputs"
    assert err.hint is None


def test_error_with_several_diagnostics() -> None:
    """An error may carry several diagnostics; the first names the error and
    format() prints each one, in order."""
    first = Diagnostic(SourceLoc("a.yaml", 2, 1, TEXT), "first problem", "fix one")
    second = Diagnostic(SourceLoc("a.yaml", 3, 3, TEXT), "second problem")
    err = ShapeError("ignored", diagnostics=[first, second])
    assert err.diagnostics == (first, second)
    assert err.message == "first problem"
    assert str(err) == "a.yaml:2:1: error: first problem"
    out = err.format()
    assert first.format() in out
    assert second.format() in out
    assert out.index(first.format()) < out.index(second.format())


def test_public_names() -> None:
    """Every name in __all__ exists, and every error kind is exported."""
    for name in errors.__all__:
        assert hasattr(errors, name), name
    kinds = {cls.__name__ for cls in AttnGraphError.__subclasses__()}
    assert kinds | {"AttnGraphError"} <= set(errors.__all__)


# --- did_you_mean ------------------------------------------------------------


def test_did_you_mean_suggests_close_name() -> None:
    """A near miss suggests the closest known name."""
    known = ["additive", "dot", "scaled_dot", "general", "cosine"]
    assert did_you_mean("scaled_dt", known) == "did you mean 'scaled_dot'?"
    assert did_you_mean("adittive", known) == "did you mean 'additive'?"


def test_did_you_mean_lists_known_names_sorted() -> None:
    """With no close name, the hint lists the known names sorted, without repeats."""
    known = ["softmax", "items", "scorer", "items"]
    assert did_you_mean("zzz", known) == "known: items, scorer, softmax"


def test_did_you_mean_truncates_long_lists() -> None:
    """More than 40 known names are cut to the first 40 (sorted) and '...'."""
    known = [f"name{i:02d}" for i in range(45)]
    hint = did_you_mean("zzzzzz", known)
    assert hint == "known: " + ", ".join(known[:40]) + ", ..."


def test_did_you_mean_accepts_any_iterable() -> None:
    """Known names may come from any iterable, e.g. a registry's keys or a generator."""
    assert did_you_mean("dott", (n for n in ["dot", "cosine"])) == "did you mean 'dot'?"
    assert did_you_mean("dott", {"dot": 1, "cosine": 2}) == "did you mean 'dot'?"
