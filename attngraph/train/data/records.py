"""Reading the user's data files into located records (``attngraph train --data``).

:func:`read_records` reads one path into a list of :class:`Record` (a dict of
column -> value, and the :class:`~attngraph.errors.SourceLoc` of the line or
file it came from), by its form:

==========================  =====================================================
path                        records
==========================  =====================================================
``*.csv``                   one per row; the first row names the columns
``*.jsonl``, ``*.ndjson``   one per non-blank line, each a JSON object
``*.parquet``               one per row (only when ``pyarrow`` is installed)
``*.tsv``, ``*.txt``        sentence pairs: ``source<TAB>target`` per line; the
                            columns are ``source`` and ``target``
a folder                    a folder per class holding images (png, jpg, bmp,
                            gif): columns ``image`` (the file) and ``label``
                            (the folder's name)
==========================  =====================================================

Files are read through :mod:`attngraph.fileio` (:data:`~attngraph.fileio.DATA`):
a regular file only (a FIFO or a device is refused without being opened for
reading), at most 256 MiB, strict UTF-8 with lines split at ``\\n`` only (a
U+2028 inside a JSON string is a character, not a line break), JSON lines with
limits (nesting, 64-bit integers, finite numbers within float32). Every problem
is one :class:`~attngraph.errors.TrainingError` located at the file, line and
column with a hint: an empty file, a line that is not UTF-8, a JSON line that
does not parse, is not an object or holds NaN or 1e300, a CSV row with more or
fewer cells than the header, a pairs line without its tab, a class folder
without images. Nothing is trained on a file read only in part.
:func:`value_loc` locates a record's cell for the errors found later (a value of
the wrong kind, a number that is not finite).

Examples
--------
>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp())
>>> _ = (d / "t.jsonl").write_text('{"text": "a b", "label": "x"}\\n', encoding="utf-8")
>>> rec = read_records(d / "t.jsonl")
>>> rec[0].values, rec[0].loc.line
({'text': 'a b', 'label': 'x'}, 1)
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.fileio import DATA, check_regular, excerpt_text, lines, loads_json, read_bytes
from attngraph.fileio import read_text as read_file_text

__all__ = ["Record", "FORMATS", "IMAGE_SUFFIXES", "read_records", "columns_of", "data_error",
           "value_loc"]

#: Suffix -> format name.
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet",
           ".tsv": "pairs", ".txt": "pairs"}
#: The files an image folder's class folders may hold.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")


@dataclass(frozen=True)
class Record:
    """One example as read: column -> value, and where it was read."""

    values: Mapping[str, Any]
    loc: SourceLoc


def data_error(msg: str, loc: SourceLoc | str | Path, hint: str) -> TrainingError:
    """A TrainingError about the data, located at ``loc`` (a location or a file)."""
    where = loc if isinstance(loc, SourceLoc) else SourceLoc(file=str(loc))
    return TrainingError(msg, where, hint)


def _at(path: Path, line: int, col: int, text: str | None) -> SourceLoc:
    return SourceLoc(file=str(path), line=line, col=col, text=text)


def _text(path: Path) -> tuple[str, str]:
    """The file's text (see the module docstring), and that text for excerpts."""
    text = read_file_text(path, DATA)
    return text, excerpt_text(text)


def _empty(path: Path, what: str) -> TrainingError:
    return data_error(f"this data file holds no {what}", path,
                      "give a file with at least one example")


def _csv(path: Path) -> list[Record]:
    raw, text = _text(path)
    reader = csv.reader(io.StringIO(raw, newline=""))
    try:
        header = next(reader, None)
        if header is None or not any(h.strip() for h in header):
            raise _empty(path, "header row (the first row names the columns)")
        names = [h.strip() for h in header]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup or "" in names:
            msg = f"the header row has {'repeated' if dup else 'empty'} column names"
            what = ", ".join(dup) if dup else "an empty cell"
            raise data_error(msg + f" ({what})", _at(path, 1, 1, text),
                             "name every column once")
        out = []
        line = reader.line_num + 1
        for row in reader:
            if not row:
                line = reader.line_num + 1
                continue
            if len(row) != len(names):
                msg = f"this row has {len(row)} cells, the header {len(names)}"
                raise data_error(msg, _at(path, line, 1, text),
                                 "quote cells that hold commas; give every row one cell "
                                 "per column")
            out.append(Record(dict(zip(names, row, strict=True)), _at(path, line, 1, text)))
            line = reader.line_num + 1
    except csv.Error as exc:
        msg = f"this CSV row does not parse: {exc}"
        raise data_error(msg, _at(path, reader.line_num, 1, text),
                         "check its quotes") from None
    if not out:
        raise _empty(path, "rows after the header")
    return out


def _jsonl(path: Path) -> list[Record]:
    raw, text = _text(path)
    out = []
    for n, line in enumerate(lines(raw), 1):
        if not line.strip():
            continue
        value = loads_json(line, str(path), DATA, line=n, shown=text)
        if not isinstance(value, dict):
            msg = f"this line holds a JSON {type(value).__name__}, not an object"
            raise data_error(msg, _at(path, n, 1, text),
                             'write one object per line, e.g. {"text": "...", "label": "..."}')
        out.append(Record(value, _at(path, n, 1, text)))
    if not out:
        raise _empty(path, "JSON lines")
    return out


def _parquet(path: Path) -> list[Record]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        msg = "reading Parquet needs the pyarrow package, which is not installed"
        raise data_error(msg, path, "pip install pyarrow, or give the data as CSV or "
                         "JSONL") from None
    import pyarrow as pa

    data = read_bytes(path, DATA)
    try:
        rows = pq.read_table(pa.BufferReader(data)).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for a bad file
        msg = f"cannot read this Parquet file: {exc}"
        raise data_error(msg, path, "check that it is a Parquet file") from None
    if not rows:
        raise _empty(path, "rows")
    return [Record(r, _at(path, i, 1, None)) for i, r in enumerate(rows, 1)]


def _pairs(path: Path) -> list[Record]:
    raw, text = _text(path)
    out = []
    for n, line in enumerate(lines(raw), 1):
        if not line.strip():
            continue
        if "\t" not in line:
            msg = "this line has no tab between source and target"
            raise data_error(msg, _at(path, n, len(line) + 1, text),
                             "write each pair as: source<TAB>target")
        src, tgt = line.split("\t", 1)
        if "\t" in tgt:
            col = len(src) + 2 + tgt.index("\t")
            msg = "this line has more than one tab"
            raise data_error(msg, _at(path, n, col, text),
                             "write each pair as: source<TAB>target, with no tab inside")
        out.append(Record({"source": src, "target": tgt}, _at(path, n, 1, text)))
    if not out:
        raise _empty(path, "sentence pairs")
    return out


def _images(path: Path) -> list[Record]:
    # the images' names are absolute: an image is read relative to its record's file,
    # which for a folder is the image itself (a relative --data would count twice)
    where = path.absolute()
    classes = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not classes:
        msg = "this folder holds no class folders"
        raise data_error(msg, path, "put the images of each class in a folder named after "
                         "the class: DATA/cat/1.png, DATA/dog/2.png ...")
    out: list[Record] = []
    for c in classes:
        files = sorted(p for p in c.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not files:
            msg = f"the class folder '{c.name}' holds no images"
            raise data_error(msg, c, f"add images ({', '.join(IMAGE_SUFFIXES)}) or remove it")
        out.extend(Record({"image": str(where / c.name / f.name), "label": c.name},
                          SourceLoc(file=str(f))) for f in files)
    return out


def read_records(path: str | Path) -> list[Record]:
    """Every record of the data at ``path`` (see the module docstring for the forms).

    Parameters
    ----------
    path : str or Path
        A data file, or a folder of class folders of images.

    Returns
    -------
    list of Record
        At least one.

    Raises
    ------
    TrainingError
        A missing path, an unknown suffix, or a file that does not read whole,
        located at its file, line and column.
    """
    p = Path(path)
    try:
        is_dir, exists = p.is_dir(), p.exists()
    except OSError as exc:  # a name the system refuses (too long, ...)
        msg = f"cannot read the data path: {exc.strerror or exc}"
        raise data_error(msg, p, "check the path given to --data / --valid") from None
    if is_dir:
        return _images(p)
    if not exists:
        msg = "no such data file or folder"
        raise data_error(msg, p, "check the path given to --data / --valid")
    check_regular(p, DATA)  # a FIFO or a device: refused before its suffix is read
    fmt = FORMATS.get(p.suffix.lower())
    if fmt is None:
        msg = f"cannot tell the format of '{p.name}' from its suffix"
        known = ", ".join(sorted(FORMATS))
        raise data_error(msg, p, f"name it with one of {known}, or give a folder of "
                         "class folders of images")
    readers = {"csv": _csv, "jsonl": _jsonl, "parquet": _parquet, "pairs": _pairs}
    return readers[fmt](p)


#: A JSON string, or a bracket (to find an object's key at the top level).
_JSON_PART = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _csv_cell(line: str, index: int) -> int | None:
    """The 1-based column where cell ``index`` of a CSV row starts on ``line``."""
    if index == 0:
        return 1
    cell, quoted = 0, False
    for i, ch in enumerate(line):
        if ch == '"':
            quoted = not quoted  # a doubled quote toggles twice
        elif ch == "," and not quoted:
            cell += 1
            if cell == index:
                return i + 2
    return None


def _unquote(token: str) -> str | None:
    """A JSON string token's text (None if it does not parse)."""
    try:
        return str(json.loads(token))
    except ValueError:
        return None


def _json_value(line: str, key: str) -> int | None:
    """The 1-based column of the value of top-level ``key`` in a JSON object line."""
    depth = 0
    for m in _JSON_PART.finditer(line):
        tok = m.group()
        if tok in ("[", "{"):
            depth += 1
        elif tok in ("]", "}"):
            depth -= 1
        elif depth == 1:
            rest = line[m.end():].lstrip()
            if rest.startswith(":") and _unquote(tok) == key:
                after = rest[1:]
                return len(line) - len(after.lstrip()) + 1
    return None


def value_loc(rec: Record, column: str) -> SourceLoc:
    """Where ``rec``'s value of ``column`` was read: the CSV cell or the JSON value
    on the record's line when that can be told, else the record's location."""
    loc = rec.loc
    if loc.text is None or loc.line <= 0 or column not in rec.values:
        return loc
    parts = loc.text.split("\n", loc.line)
    line = parts[loc.line - 1] if len(parts) >= loc.line else ""
    suffix = Path(loc.file).suffix.lower()
    col = None
    if suffix == ".csv":
        col = _csv_cell(line, list(rec.values).index(column))
    elif FORMATS.get(suffix) == "jsonl":
        col = _json_value(line, column)
    return SourceLoc(loc.file, loc.line, col, loc.text) if col else loc


def columns_of(records: list[Record]) -> list[str]:
    """The columns of ``records``, in first-seen order."""
    seen: dict[str, None] = {}
    for r in records:
        seen.update(dict.fromkeys(r.values))
    return list(seen)
