"""Issue 25, data readers: every bad data file is one located error (FILE:LINE:COL,
message, hint); none trains to NaN, raises a Python error, hangs or reads without bound.

Each test here failed on the code before the shared reader (:mod:`attngraph.fileio`):
NaN and 1e300 trained to NaN parameters, a 5,000-digit integer raised ValueError,
5,000 brackets RecursionError, the label '²' a ValueError from int(), U+2028 split
a line, a FIFO hung, a 30000×30000 PNG header raised DecompressionBombError, and an
image folder given as a relative path found no image.
"""

from __future__ import annotations

import json
import os
import warnings
import zlib
from pathlib import Path

import pytest
from robust_support import refused as _refused

from attngraph.errors import TrainingError
from attngraph.frontend import load_spec, loads_spec
from attngraph.train.data.batches import data_task
from attngraph.train.data.records import read_records

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"
GS = ROOT / "specs" / "glimpse_soft.yaml"
TR = ROOT / "specs" / "bahdanau_translation.yaml"
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")

VECTOR = """\
attngraph: 1
name: vec_one
dims: {d: 3, n: 4, classes: 2}
inputs:
  x: {type: vector, dim: d}
nodes:
  h:      {kind: linear, from: x, out: n}
  logits: {kind: linear, from: h, out: classes}
outputs: {logits: logits}
"""


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _located(exc: TrainingError, file: Path, line: int, col: int, start: str,
             hint: str) -> None:
    """Assert the first diagnostic's file, line, column, message start and hint."""
    d = exc.diagnostics[0]
    assert (d.loc.file, d.loc.line, d.loc.col) == (str(file), line, col), d.format()
    assert d.message.startswith(start), d.message
    assert hint in (d.hint or ""), d.hint
    where = f"{file}:{line}:{col}" if line else str(file)
    assert f"{where}: error: {start}" in exc.format()


def _release(fifo: Path) -> None:
    """Open ``fifo`` for writing and close it, so a reader blocked on it returns."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


# --- numbers -------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "col", "start", "hint"), [
    ("NaN", 21, "NaN is not a finite number", "finite number"),
    ("Infinity", 21, "Infinity is not a finite number", "finite number"),
    ("-Infinity", 21, "-Infinity is not a finite number", "finite number"),
    ("1e300", 21, "number 1e300 is too large for float32", "sensible size"),
    ("[1, NaN, 2]", 25, "NaN is not a finite number", "finite number"),
])
def test_non_finite_json_numbers_are_located(tmp_path: Path, value: str, col: int, start: str,
                                             hint: str) -> None:
    """NaN, Infinity and 1e300 in a JSON line are refused at their column, never read."""
    p = _write(tmp_path / "d.jsonl", '{"x": [1, 2, 3], "label": "a"}\n'
               f'{{"label": "b", "x": {value}}}\n')
    _located(_refused(lambda: read_records(p)), p, 2, col, start, hint)


@pytest.mark.parametrize(("cell", "start"), [
    ("nan 1 2", "column 'x' holds nan, which is not a finite number"),
    ("1 inf 2", "column 'x' holds inf, which is not a finite number"),
    ("1 2 1e39", "column 'x' holds 1e+39, which is too large for float32"),
    ("1 2 -1e39", "column 'x' holds -1e+39, which is too large for float32"),
])
def test_non_finite_csv_cells_are_located_and_never_trained(tmp_path: Path, cell: str,
                                                            start: str, cli) -> None:
    """nan, inf and 1e39 in a CSV vector cell are refused at the cell's line and column
    before training: the CLI exits 1 with the located error and writes no run."""
    spec = _write(tmp_path / "vec.yaml", VECTOR)
    p = _write(tmp_path / "d.csv", f"label,x\na,1 2 3\nb,{cell}\na,3 2 1\n")
    exc = _refused(lambda: data_task(loads_spec(VECTOR, str(spec)), str(p), valid=str(p)))
    _located(exc, p, 3, 3, start, "finite numbers")
    res = cli("train", spec, "--data", p, "--valid", p,
              "--steps", "2", "--out", tmp_path / "run")
    assert res.exit_code == 1 and f"{p}:3:3: error: {start}" in res.stderr
    assert "Traceback" not in res.output and not (tmp_path / "run").exists()


def test_a_nan_in_jsonl_is_never_trained_on(tmp_path: Path, cli) -> None:
    """`train --data` on a JSONL with NaN exits 1 at the value, and writes no run."""
    p = _write(tmp_path / "d.jsonl", '{"text": "a b", "label": "x"}\n'
               '{"text": "b", "label": "y", "w": NaN}\n')
    res = cli("train", GA, "--data", p, "--steps", "2",
              "--out", tmp_path / "run", code=1)
    assert f"{p}:2:34: error: NaN is not a finite number" in res.stderr
    assert "Traceback" not in res.output and not (tmp_path / "run").exists()


@pytest.mark.parametrize(("text", "col", "start", "hint"), [
    # a JSON integer of 5,000 digits, shown shortened (Python itself refuses int() of
    # more than 4,300 digits with a ValueError)
    pytest.param('{"text": "a", "label": "x"}\n{"text": "a", "label": ' + "7" * 5000 + "}\n",
                 24, "integer 777777777777...7777 (5000 characters) is out of range",
                 "64 bits", id="5000_digit_integer"),
    # a line nested 5,000 deep, refused at the 65th bracket, without recursing
    pytest.param('{"text": "a", "label": "x"}\n{"x": ' + "[" * 5000 + "]" * 5000 + "}\n",
                 70, "this line nests deeper than 64 levels", "brackets never closed",
                 id="nested_5000_deep"),
    # a "\ud800" escape (not Unicode text, and it could not be written to data.json);
    # an escaped pair (the first line) reads as its character
    pytest.param('{"text": "\\ud83d\\ude00", "label": "x"}\n'
                 '{"text": "ab\\ud800", "label": "x"}\n',
                 13, "this string escapes a lone surrogate", "in pairs",
                 id="lone_surrogate_escape"),
])
def test_a_hostile_json_line_is_located(tmp_path: Path, text: str, col: int, start: str,
                                        hint: str) -> None:
    """A JSON line Python's reader would choke on is refused at its place on line 2,
    with a hint."""
    p = _write(tmp_path / "d.jsonl", text)
    _located(_refused(lambda: read_records(p)), p, 2, col, start, hint)


# --- labels --------------------------------------------------------------------------

@pytest.mark.parametrize(("labels", "names"), [
    (["1", "²", "1"], ["1", "²"]),
    (["--5", "3", "3"], ["--5", "3"]),
    (["10", "-2", "3"], ["-2", "3", "10"]),
    (["7" * 5000, "1", "1"], ["1", "7" * 5000]),
])
def test_labels_that_look_like_numbers(tmp_path: Path, labels: list[str],
                                       names: list[str]) -> None:
    """Labels sort as numbers only when all are ASCII integers ('²' passes str.isdigit,
    '--5' passes lstrip('-').isdigit, and int() refuses both): else as text."""
    p = _write(tmp_path / "d.csv", "text,label\n" + "".join(f"a b,{n}\n" for n in labels))
    task = data_task(load_spec(GA), str(p), valid=str(p))
    assert task.enc.labels is not None and task.enc.labels.names == names


# --- lines ---------------------------------------------------------------------------

def test_a_line_separator_inside_a_json_string_is_a_character(tmp_path: Path) -> None:
    """U+2028 (and U+0085, U+2029) inside a JSON string stay in the string: the next
    record is line 2, and an error after it is located and shown at its own line."""
    p = _write(tmp_path / "d.jsonl", '{"text": "a\u2028b\x85c\u2029d", "label": "x"}\n'
               '{"text": "e", "label": "y"}\n{"text": "f",, "label": "y"}\n')
    exc = _refused(lambda: read_records(p))
    _located(exc, p, 3, 14, "this line is not JSON", "one JSON object per line")
    assert '   3 | {"text": "f",, "label": "y"}' in exc.format()
    p.write_text(p.read_text(encoding="utf-8").replace(",,", ","), encoding="utf-8")
    recs = read_records(p)
    assert [(r.values["text"], r.loc.line) for r in recs] == [
        ("a\u2028b\x85c\u2029d", 1), ("e", 2), ("f", 3)]


def test_a_line_separator_in_a_pairs_file_is_a_character(tmp_path: Path) -> None:
    """The pairs reader splits at newlines only: U+2028 is part of the source."""
    p = _write(tmp_path / "d.tsv", "a\u2028b\tc\nd\te\n")
    assert [(r.values, r.loc.line) for r in read_records(p)] == [
        ({"source": "a\u2028b", "target": "c"}, 1), ({"source": "d", "target": "e"}, 2)]


# --- files that are not regular files --------------------------------------------------

@needs_fifo
def test_a_fifo_as_the_data_file_is_refused_without_hanging(tmp_path: Path) -> None:
    """A named pipe given as --data is refused (it is never opened for reading)."""
    fifo = tmp_path / "d.jsonl"
    os.mkfifo(fifo)
    try:
        exc = _refused(lambda: read_records(fifo))
    finally:
        _release(fifo)
    assert exc.message == f"{fifo} is a FIFO (named pipe), not a data file"
    assert exc.loc.file == str(fifo) and "regular file" in (exc.hint or "")


@needs_fifo
def test_a_fifo_as_an_image_in_a_class_folder_is_refused(tmp_path: Path) -> None:
    """A named pipe called 2.png among a class's images is refused at that file."""
    from PIL import Image

    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        Image.new("L", (32, 32)).save(tmp_path / c / "1.png")
    fifo = tmp_path / "b" / "2.png"
    os.mkfifo(fifo)
    try:
        exc = _refused(lambda: data_task(load_spec(GS), str(tmp_path), valid=str(tmp_path)))
    finally:
        _release(fifo)
    assert exc.loc.file == str(fifo)
    assert exc.message == f"{tmp_path.absolute() / 'b' / '2.png'} is a FIFO (named pipe), " \
        "not an image file"


def test_dev_zero_as_a_data_file_is_refused(tmp_path: Path) -> None:
    """/dev/zero (an endless device), directly or behind a .jsonl link, is refused
    before a byte is read: never read until memory runs out."""
    if not Path("/dev/zero").exists():
        pytest.skip("needs /dev/zero")
    link = tmp_path / "d.jsonl"
    link.symlink_to("/dev/zero")
    for p in (Path("/dev/zero"), link):
        exc = _refused(lambda p=p: read_records(p))  # type: ignore[misc]
        assert exc.message == f"{p} is a character device, not a data file"
        assert exc.loc.file == str(p)


def test_a_data_file_over_the_size_bound_is_refused(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A data file past the reader's bound is refused at 1:1 with a hint."""
    from dataclasses import replace

    from attngraph.fileio import DATA
    from attngraph.train.data import records as data

    monkeypatch.setattr(data, "DATA", replace(DATA, limit=100))
    p = _write(tmp_path / "d.jsonl", '{"text": "a", "label": "x"}\n' * 10)
    _located(_refused(lambda: read_records(p)), p, 1, 1,
             "data file is 280 bytes, more than the limit of 100", "split it")


# --- images --------------------------------------------------------------------------

def _png(path: Path) -> Path:
    """A real 32×32 grey PNG."""
    from PIL import Image

    Image.new("L", (32, 32)).save(path)
    return path


def _png_header(width: int, height: int) -> bytes:
    """A 65-byte PNG: a header claiming width × height, a tiny IDAT, the end."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (len(data).to_bytes(4, "big") + kind + data
                + zlib.crc32(kind + data).to_bytes(4, "big"))

    ihdr = width.to_bytes(4, "big") + height.to_bytes(4, "big") + bytes([8, 0, 0, 0, 0])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"\x78\x9c" + bytes(6))
            + chunk(b"IEND", b""))


def test_a_png_header_claiming_30000_squared_is_refused_before_decoding(
        tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """A 65-byte PNG whose header says 30000×30000 is refused by its header, at the file
    (PIL's DecompressionBombError and its warning never show)."""
    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        _png(tmp_path / c / "1.png")
    bomb = _write(tmp_path / "b" / "1.png", _png_header(30000, 30000))
    assert len(bomb.read_bytes()) == 65
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        exc = _refused(lambda: data_task(load_spec(GS), str(tmp_path), valid=str(tmp_path)))
    assert not seen
    _located(exc, bomb, 0, 0, "the image's header says 30000×30000 pixels", "real size")
    assert "DecompressionBomb" not in capfd.readouterr().err


def test_an_image_named_in_a_csv_is_refused_at_its_cell(tmp_path: Path) -> None:
    """A damaged image named by a CSV row is refused at that row's image cell."""
    _png(tmp_path / "ok.png")
    _write(tmp_path / "bad.png", b"\x89PNG\r\n\x1a\nnot really")
    p = _write(tmp_path / "d.csv", "label,image\na,ok.png\nb,bad.png\n")
    exc = _refused(lambda: data_task(load_spec(GS), str(p), valid=str(p)))
    _located(exc, p, 3, 3, f"{tmp_path / 'bad.png'} is not a PNG, JPEG, GIF or BMP image",
             "give image files")


def test_an_image_folder_given_as_a_relative_path(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """--data images (relative to the current directory) reads every image: the images'
    paths are not taken relative to the folder a second time."""
    from PIL import Image

    for c, shade in (("dark", 0), ("light", 255)):
        (tmp_path / "images" / c).mkdir(parents=True)
        for i in range(3):
            Image.new("L", (32, 32), color=shade).save(tmp_path / "images" / c / f"{i}.png")
    monkeypatch.chdir(tmp_path)
    task = data_task(load_spec(GS), "images", valid="images")
    batch = task.batch(6, split="valid")
    assert batch["image"].shape == (6, 1, 32, 32)
    assert json.dumps(task.enc.labels.names if task.enc.labels else None) == \
        '["dark", "light"]'
