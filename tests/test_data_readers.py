"""Reading data files: every form gives located records, every bad file one located error."""

from __future__ import annotations

from pathlib import Path

import pytest

from attngraph.errors import TrainingError
from attngraph.train.data.records import read_records


def _write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def _error(path: Path) -> TrainingError:
    with pytest.raises(TrainingError) as info:
        read_records(path)
    return info.value


def test_csv_rows_carry_their_line(tmp_path: Path) -> None:
    """CSV rows are dicts by header, located at their first line (a quoted newline
    inside a cell moves the next row's line on); blank lines are skipped."""
    p = _write(tmp_path / "d.csv", 'text,label\n"a, b",x\n\n"two\nlines",y\nc,x\n')
    recs = read_records(p)
    assert [r.values for r in recs] == [{"text": "a, b", "label": "x"},
                                       {"text": "two\nlines", "label": "y"},
                                       {"text": "c", "label": "x"}]
    assert [r.loc.line for r in recs] == [2, 4, 6]
    assert all(r.loc.file == str(p) for r in recs)


def test_jsonl_and_pairs_records(tmp_path: Path) -> None:
    """JSONL gives one object per non-blank line; a pairs file source/target per line."""
    j = _write(tmp_path / "d.jsonl", '{"a": 1}\n\n{"a": [2, 3]}\n')
    assert [(r.values, r.loc.line) for r in read_records(j)] == [({"a": 1}, 1),
                                                                 ({"a": [2, 3]}, 3)]
    t = _write(tmp_path / "d.tsv", "a b\tb a\nc\td e\n")
    assert [r.values for r in read_records(t)] == [{"source": "a b", "target": "b a"},
                                                  {"source": "c", "target": "d e"}]


def test_image_folder_gives_files_and_class_names(tmp_path: Path) -> None:
    """A folder of class folders gives one record per image: its path and its folder's name."""
    from PIL import Image

    for c in ("cat", "dog"):
        (tmp_path / c).mkdir()
        Image.new("L", (4, 4)).save(tmp_path / c / "1.png")
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    recs = read_records(tmp_path)
    assert [(Path(r.values["image"]).parent.name, r.values["label"]) for r in recs] == [
        ("cat", "cat"), ("dog", "dog")]


@pytest.mark.parametrize(("name", "data", "line", "col", "words"), [
    ("d.jsonl", '{"a": 1}\n{"a": 2,,}\n', 2, 9, "not JSON"),
    ("d.jsonl", '{"a": 1}\n[1, 2]\n', 2, 1, "not an object"),
    ("d.csv", "a,b\n1,2\n1,2,3\n", 3, 1, "3 cells, the header 2"),
    ("d.csv", "a,a\n1,2\n", 1, 1, "repeated"),
    ("d.tsv", "a\tb\nno tab here\n", 2, 12, "no tab"),
    ("d.tsv", "a\tb\tc\n", 1, 4, "more than one tab"),
])
def test_bad_lines_are_located(tmp_path: Path, name: str, data: str, line: int, col: int,
                               words: str) -> None:
    """A line that does not read names its file, line and column, with a hint."""
    exc = _error(_write(tmp_path / name, data))
    d = exc.diagnostics[0]
    assert words in d.message
    assert (d.loc.file, d.loc.line, d.loc.col) == (str(tmp_path / name), line, col)
    assert d.hint


def test_a_line_that_is_not_utf8_is_located(tmp_path: Path) -> None:
    """A Latin-1 byte on line 3 is reported at line 3 and its column, with how to convert."""
    p = _write(tmp_path / "d.jsonl", b'{"t": "a"}\n{"t": "b"}\n{"t": "caf\xe9"}\n')
    exc = _error(p)
    d = exc.diagnostics[0]
    assert "not UTF-8" in d.message and "0xe9" in d.message
    assert (d.loc.line, d.loc.col) == (3, 11)
    assert "utf-8" in (d.hint or "").lower()
    assert "3:11" in exc.format()


@pytest.mark.parametrize(("name", "data"), [
    ("d.jsonl", ""), ("d.jsonl", "\n\n"), ("d.csv", ""), ("d.csv", "a,b\n"), ("d.tsv", ""),
])
def test_empty_files_are_refused(tmp_path: Path, name: str, data: str) -> None:
    """A file without examples is an error at the file saying it holds none."""
    exc = _error(_write(tmp_path / name, data))
    assert "holds no" in exc.diagnostics[0].message
    assert exc.diagnostics[0].loc.file == str(tmp_path / name)


def test_missing_unknown_and_empty_folders(tmp_path: Path) -> None:
    """A missing path, an unknown suffix, a folder without class folders and a class
    folder without images each give one error naming the path."""
    assert "no such" in _error(tmp_path / "nope.csv").diagnostics[0].message
    assert "suffix" in _error(_write(tmp_path / "d.xlsx", "x")).diagnostics[0].message
    empty = tmp_path / "imgs"
    empty.mkdir()
    assert "no class folders" in _error(empty).diagnostics[0].message
    (empty / "cat").mkdir()
    exc = _error(empty)
    assert "'cat' holds no images" in exc.diagnostics[0].message
    assert exc.diagnostics[0].loc.file == str(empty / "cat")


def test_parquet_without_pyarrow_says_so(tmp_path: Path) -> None:
    """Parquet is read when pyarrow is installed; without it, one error says to install it."""
    pytest.importorskip("torch")
    p = tmp_path / "d.parquet"
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        p.write_bytes(b"PAR1")
        assert "pyarrow" in _error(p).diagnostics[0].message
        return
    pq.write_table(pa.table({"text": ["a b", "c"], "label": ["x", "y"]}), p)
    assert [r.values for r in read_records(p)] == [{"text": "a b", "label": "x"},
                                                  {"text": "c", "label": "y"}]
