"""Records to a spec's inputs: columns by name or --field, located errors for bad data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngraph.errors import TrainingError
from attngraph.frontend import load_spec
from attngraph.train.data.batches import data_task
from attngraph.train.data.encoding import make_encoding
from attngraph.train.data.records import read_records

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"
TR = ROOT / "specs" / "bahdanau_translation.yaml"
GS = ROOT / "specs" / "glimpse_soft.yaml"


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _fail(graph_file: Path, data: Path, **kw: object) -> TrainingError:
    with pytest.raises(TrainingError) as info:
        data_task(load_spec(graph_file), str(data), **kw)  # type: ignore[arg-type]
    return info.value


def test_columns_by_name_else_the_one_left_over(tmp_path: Path) -> None:
    """The tokens input reads column 'tokens' when there is one, else the only column
    besides the label; --field maps any column; the label column is 'label' by default."""
    g = load_spec(GA)
    recs = read_records(_jsonl(tmp_path / "a.jsonl", [{"text": "a b", "label": "x"}]))
    assert make_encoding(g, recs).fields == {"tokens": "text"}
    recs = read_records(_jsonl(tmp_path / "b.jsonl", [{"tokens": "a", "text": "b",
                                                       "label": "x"}]))
    assert make_encoding(g, recs).fields == {"tokens": "tokens"}
    enc = make_encoding(g, recs, fields={"tokens": "text", "label": "tokens"})
    assert (enc.fields, enc.label) == ({"tokens": "text"}, "tokens")


def test_a_missing_column_names_its_line_and_the_columns(tmp_path: Path) -> None:
    """A record without the text column is located at its line, with --field in the hint."""
    p = _jsonl(tmp_path / "d.jsonl", [{"text": "a b", "label": "x"}] * 3
               + [{"txt": "a", "label": "y"}])
    exc = _fail(GA, p, valid=str(p))
    d = exc.diagnostics[0]
    assert "no column 'text'" in d.message
    assert (d.loc.file, d.loc.line) == (str(p), 4)
    assert "--field tokens=COLUMN" in (d.hint or "") and "did you mean 'txt'" in (d.hint or "")


def test_no_label_column_and_unknown_field(tmp_path: Path) -> None:
    """Data without a label column, a --field for an input the spec lacks, and a --field
    naming a column the data lacks each say what to map."""
    p = _jsonl(tmp_path / "d.jsonl", [{"text": "a b", "words": "c"}] * 4)
    assert "no 'label' column" in _fail(GA, p, valid=str(p)).diagnostics[0].message
    q = _jsonl(tmp_path / "e.jsonl", [{"text": "a b", "label": "x"}] * 4)
    exc = _fail(GA, q, valid=str(q), fields={"tokenz": "text"})
    assert "no input 'tokenz'" in exc.diagnostics[0].message
    assert "did you mean 'tokens'" in (exc.diagnostics[0].hint or "")
    exc = _fail(GA, q, valid=str(q), fields={"tokens": "body"})
    assert "no column 'body'" in exc.diagnostics[0].message


@pytest.mark.parametrize(("row", "words"), [
    ({"text": 12, "label": "x"}, "holds int 12, not text"),
    ({"text": "a", "label": [1]}, "not a label"),
    ({"text": "  ", "label": "x"}, "holds no word token"),
])
def test_values_of_the_wrong_type_are_located(tmp_path: Path, row: dict[str, object],
                                              words: str) -> None:
    """A number where text belongs, a list as a label, blank text: one error at the line."""
    p = _jsonl(tmp_path / "d.jsonl", [{"text": "a b", "label": "x"}, row])
    exc = _fail(GA, p, valid=str(p))
    assert words in exc.diagnostics[0].message
    assert exc.diagnostics[0].loc.line == 2


def test_more_labels_than_classes_points_at_the_spec(tmp_path: Path) -> None:
    """Five labels for a spec with 4 classes is refused at the spec's dims, not trained."""
    p = _jsonl(tmp_path / "d.jsonl", [{"text": "a", "label": str(i)} for i in range(5)])
    exc = _fail(GA, p, valid=str(p))
    d = exc.diagnostics[0]
    assert "5 labels" in d.message and "4 classes" in d.message
    assert d.loc.file == str(GA) and d.loc.line > 0
    assert "at least 5" in (d.hint or "")


def test_a_validation_label_unseen_in_training(tmp_path: Path) -> None:
    """A validation record whose label the training split lacks is located in that file."""
    t = _jsonl(tmp_path / "t.jsonl", [{"text": "a", "label": "x"}, {"text": "b", "label": "y"}])
    v = _jsonl(tmp_path / "v.jsonl", [{"text": "a", "label": "z"}])
    exc = _fail(GA, t, valid=str(v))
    assert "label 'z' is not among the training labels" in exc.diagnostics[0].message
    assert exc.diagnostics[0].loc.file == str(v)


def test_images_of_another_size_are_refused(tmp_path: Path) -> None:
    """A 28×28 image for a 32×32 input names the file's record and says to resize."""
    from PIL import Image

    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        Image.new("L", (28, 28)).save(tmp_path / c / "1.png")
    exc = _fail(GS, tmp_path, valid=str(tmp_path))
    d = exc.diagnostics[0]
    assert "28×28" in d.message and "32×32" in d.message
    assert d.loc.file.endswith("1.png") and "resize" in (d.hint or "")


def test_seq2seq_pairs_encode_source_and_target(tmp_path: Path) -> None:
    """A pairs file feeds a translation spec: source ids with a mask, the target's ids
    as teacher input (pad after it) and as the target (<eos> then IGNORE)."""
    p = tmp_path / "p.tsv"
    p.write_text("a b c\tc b a\nb\tb\n", encoding="utf-8")
    task = data_task(load_spec(TR), str(p), valid=str(p))
    b = task.batch(2, split="valid")
    v = task.enc.vocabs["source"]
    assert b["source"].tolist() == [v.encode(["a", "b", "c"]), v.encode(["b"]) + [1, 1]]
    assert b["source_mask"].tolist() == [[True] * 3, [True, False, False]]
    t = task.enc.vocabs["target"]
    assert b["target"].tolist() == [t.encode(["c", "b", "a"]) + [3], t.encode(["b"]) + [3, 1, 1]]
    assert b["target_out"].tolist() == [t.encode(["c", "b", "a"]) + [3],
                                        t.encode(["b"]) + [3, -100, -100]]


def test_cli_errors_are_located_lines_not_tracebacks(tmp_path: Path, cli) -> None:
    """attngraph train --data on a bad file exits 1 with FILE:LINE:COL and a hint."""
    p = tmp_path / "d.jsonl"
    p.write_bytes(b'{"text": "a", "label": "x"}\n{"text": "\xff", "label": "y"}\n')
    res = cli("train", GA, "--data", p, "--out",
              tmp_path / "run", code=1)
    assert f"{p}:2:" in res.stderr and "not UTF-8" in res.stderr and "hint:" in res.stderr
    assert "Traceback" not in res.output
    assert not (tmp_path / "run").exists()


VECTORS = """\
attngraph: 1
name: vec_classifier
dims: {d: 3, n: 4, classes: 2}
inputs:
  x: {type: vectors, dim: d}
nodes:
  h:      {kind: items, from: x, dim: n}
  score:  {kind: scorer, fn: additive, query: {learned: n}, key: h}
  p:      {kind: softmax, scores: score}
  z:      {kind: readout, weights: p, values: h}
  logits: {kind: linear, from: z, out: classes}
outputs: {logits: logits, attention: p}
"""


def test_numbers_feed_vectors_padded_with_a_mask(tmp_path: Path) -> None:
    """Lists of number lists feed a vectors input: padded with zeros to the longest,
    with a mask; a row with the wrong count of numbers is located at its line."""
    spec = tmp_path / "v.yaml"
    spec.write_text(VECTORS, encoding="utf-8")
    p = _jsonl(tmp_path / "v.jsonl", [{"x": [[1, 2, 3]], "label": "a"},
                                      {"x": [[4, 5, 6], [7, 8, 9]], "label": "b"}])
    task = data_task(load_spec(spec), str(p), valid=str(p))
    b = task.batch(2, split="valid")
    assert b["x"].tolist() == [[[1, 2, 3], [0, 0, 0]], [[4, 5, 6], [7, 8, 9]]]
    assert b["x_mask"].tolist() == [[True, False], [True, True]]
    assert b["target"].tolist() == [0, 1]
    bad = _jsonl(tmp_path / "w.jsonl", [{"x": [[1, 2, 3]], "label": "a"},
                                        {"x": [[1, 2]], "label": "b"}])
    exc = _fail(spec, bad, valid=str(bad))
    assert "2 numbers" in exc.diagnostics[0].message and exc.diagnostics[0].loc.line == 2
    exc = _fail(spec, _jsonl(tmp_path / "s.jsonl", [{"x": "1 2 3", "label": "a"}]),
                valid=str(tmp_path / "s.jsonl"))
    assert "not a list of lists of numbers" in exc.diagnostics[0].message


def test_csv_cells_give_image_files_and_number_vectors(tmp_path: Path) -> None:
    """A CSV cell names an image relative to the CSV's folder (read as grey, scaled to
    [0, 1]); a cell of numbers separated by spaces feeds a vector input."""
    from PIL import Image

    (tmp_path / "img").mkdir()
    Image.new("L", (32, 32), color=255).save(tmp_path / "img" / "w.png")
    Image.new("L", (32, 32), color=0).save(tmp_path / "img" / "b.png")
    p = tmp_path / "d.csv"
    p.write_text("image,label\nimg/w.png,white\nimg/b.png,black\n", encoding="utf-8")
    b = data_task(load_spec(GS), str(p), valid=str(p)).batch(2, split="valid")
    assert b["image"].shape == (2, 1, 32, 32)
    assert b["image"][0].min() == 1.0 and b["image"][1].max() == 0.0
    assert b["target"].tolist() == [1, 0]  # black < white
    spec = tmp_path / "v.yaml"
    spec.write_text("attngraph: 1\nname: v\ndims: {d: 3, classes: 2}\n"
                    "inputs:\n  x: {type: vector, dim: d}\n"
                    "nodes:\n  logits: {kind: linear, from: x, out: classes}\n"
                    "outputs: {logits: logits}\n", encoding="utf-8")
    q = tmp_path / "v.csv"
    q.write_text("x,label\n0.5 1 -2,a\n3 4 5,b\n", encoding="utf-8")
    b = data_task(load_spec(spec), str(q), valid=str(q)).batch(2, split="valid")
    assert b["x"].tolist() == [[0.5, 1.0, -2.0], [3.0, 4.0, 5.0]]
    q.write_text("x,label\n0.5 one 2,a\n", encoding="utf-8")
    exc = _fail(spec, q, valid=str(q))
    assert "numbers separated by spaces" in exc.diagnostics[0].message
    assert exc.diagnostics[0].loc.line == 2
