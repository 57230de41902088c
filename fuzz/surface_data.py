"""Surface ``data``: mutated ``train --data`` files (CSV, JSONL, pairs, image folders).

Seeds are small valid files made in the case's folder for three specs: the catalog's
``global_attention`` (text and a label), a one-vector classifier (a ``vector`` input)
and ``bahdanau_translation`` (sentence pairs), a folder of class folders of
32×32 images (PNG, JPEG, GIF, BMP) for ``glimpse_soft``, and records for three tiny
imported models (:func:`make_imports`, with ``transformers``: a BERT classifier with
its tokenizer, a GPT-2 and a T5 reading ids). Operators damage values
(NaN, Infinity, 1e39, 2**64, 400-digit numbers, wrong JSON types, deep nesting,
missing and extra keys), lines and cells (quotes, tabs, U+2028, BOMs, UTF-16,
invalid UTF-8), image headers (sizes 0, 2**31, 100000, inconsistent, truncated), the
folders (empty, too many classes, odd names) and the path itself (a FIFO, a symlink
to /dev/zero or outside, a directory). The case then runs what ``train --data``
reads before it trains (:func:`attngraph.train.data.batches.data_task`, a validation
batch and a training batch), or ``--valid``, or ``predict`` / ``evaluate`` of a tiny
run trained on the same kind of file (in process, and through the CLI with ``-o``
over an existing file); an import's records go through what fine-tuning it reads
(:func:`attngraph.train.data.tokenized.tokenized_task`) or its predict and evaluate.
Every tensor of a batch and every number of a prediction must be finite.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

from fuzz.oracle import Outcome
from fuzz.seeds import ROOT
from fuzz.surface import (
    SPECIALS,
    Case,
    Exit,
    changed,
    cli,
    damage_bytes,
    fail,
    finite,
    snapshot,
    special,
)

__all__ = ["prepare", "run"]

VEC_SPEC = ("attngraph: 1\nname: v\ndims: {d: 3, classes: 3}\n"
            "inputs:\n  x: {type: vector, dim: d}\n"
            "nodes:\n  logits: {kind: linear, from: x, out: classes}\n"
            "outputs: {logits: logits}\n")
WORDS = ("the storm rain sun match team coach chef recipe late big small a of in on , . ! "
         "é 中 🙂").split()
LABELS = ("food", "sport", "tech")
#: values a JSON line may be given instead of a good one (raw JSON text)
ODD_JSON = ("null", "true", "false", "0", "-1", "1.5", "18446744073709551616", "1" * 400,
            "NaN", "Infinity", "-Infinity", "1e39", "-1e39", "1e309", "1e-400", "[]", "{}",
            '[1, [2, [3]]]', '""', '" "', '"<pad>"', '"<unk> <eos> <bos>"', '["a", 1]',
            '[{"a": 1}]', '[1, 2, 3]', '[1e39, 0, 0]', '[NaN, 1, 2]', '[1, 2]',
            '[1, 2, 3, 4]', '["1", "2", "3"]', '"\\ud800"', '"\\u0000"', '"a\\u2028b"',
            '{"text": "nested"}', '[true, false, null]', "1" * 5000)
#: cells a CSV row may be given
ODD_CELLS = ("", " ", '"', '""', '"a,b"', "1e39 0 0", "nan 1 2", "inf 1 2", "1 2",
             "1 2 3 4", "１ ２ ３", "1_000 2 3", "0x10 1 2", "-0 +1 .5", "1e-400 0 0",
             "\u2028", "a\nb", '"a\nb"', "\x00", "<pad>", "1" * 400 + " 0 0")


def _png(mode: str, size: tuple[int, int], fmt: str = "PNG") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, size, color=128 if mode in ("L", "P", "1", "I;16") else (10, 20, 30)
              if mode == "RGB" else None).save(buf, format=fmt)
    return buf.getvalue()


def prepare(root: Path) -> dict[str, Any]:
    """The specs, image bytes of every format and a tiny data run (trained once)."""
    from attngraph.frontend import load_spec, loads_spec
    from fuzz.surface_rundir import make_run

    images = {"png": _png("L", (32, 32)), "png-rgb": _png("RGB", (32, 32)),
              "png-rgba": _png("RGBA", (32, 32)), "png-p": _png("P", (32, 32)),
              "png-1": _png("1", (32, 32)), "png-16": _png("I;16", (32, 32)),
              "jpg": _png("L", (32, 32), "JPEG"), "gif": _png("L", (32, 32), "GIF"),
              "bmp": _png("L", (32, 32), "BMP"), "png-small": _png("L", (16, 16)),
              "png-wide": _png("L", (33, 32))}
    return {"ga": load_spec(ROOT / "specs" / "global_attention.yaml"),
            "vec": loads_spec(VEC_SPEC, "v.yaml"),
            "pairs": load_spec(ROOT / "specs" / "bahdanau_translation.yaml"),
            "img": load_spec(ROOT / "specs" / "glimpse_soft.yaml"),
            "images": images, "run": make_run(root), "imports": make_imports(root)}


#: an imported BERT's words (its tokenizer's vocabulary)
BERT_WORDS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a",
              "dog", "ran")


def make_imports(root: Path) -> dict[str, Path]:
    """Tiny imported runs (random weights), made once per worker beside the data run: a
    BERT classifier with a word-level tokenizer whose configuration names no classes, a
    GPT-2 and a T5 without tokenizers (their text is ids); none without transformers."""
    try:
        import torch
        import transformers
    except ImportError:
        return {}
    from attngraph.realmodels import import_model

    base = root.parent / "shared" / "imports"
    made = {name: base / name / "run" for name in ("bert", "gpt2", "t5")}
    if all((p / "checkpoint.pt").is_file() for p in made.values()):
        return made
    torch.manual_seed(0)
    models = {
        "bert": transformers.BertForSequenceClassification(transformers.BertConfig(
            vocab_size=len(BERT_WORDS), hidden_size=8, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=16, max_position_embeddings=12,
            num_labels=2)),
        "gpt2": transformers.GPT2LMHeadModel(transformers.GPT2Config(
            vocab_size=24, n_embd=8, n_layer=1, n_head=2, n_positions=12, eos_token_id=3,
            bos_token_id=3)),
        "t5": transformers.T5ForConditionalGeneration(transformers.T5Config(
            vocab_size=24, d_model=8, d_kv=4, num_heads=2, d_ff=16, num_layers=1,
            num_decoder_layers=1, eos_token_id=1, pad_token_id=0,
            decoder_start_token_id=0)),
    }
    for name, model in models.items():
        src = base / name / "src"
        shutil.rmtree(base / name, ignore_errors=True)
        model.save_pretrained(src)
        if name == "bert":
            (src / "vocab.txt").write_text("\n".join(BERT_WORDS) + "\n", encoding="utf-8")
            transformers.BertTokenizer(str(src / "vocab.txt")).save_pretrained(src)
        import_model(src, made[name])
    return made


# -- valid files -----------------------------------------------------------------------------

def _sentence(case: Case, n: int | None = None) -> str:
    return " ".join(case.rng.choice(WORDS) for _ in range(n or case.rng.randint(1, 8)))


def _ids(case: Case, n: int | None = None) -> str:
    """Token ids of an imported model without a tokenizer, written out."""
    return " ".join(str(case.rng.randint(4, 23)) for _ in range(n or case.rng.randint(1, 6)))


def _records(case: Case, fmt: str) -> list[dict[str, Any]]:
    n = case.rng.randint(10, 20)
    if fmt.startswith("import-bert"):
        return [{"text": " ".join(case.rng.choice(BERT_WORDS[4:]) for _ in
                                  range(case.rng.randint(1, 6))),
                 "label": case.rng.choice(("cats", "dogs"))} for _ in range(n)]
    if fmt.startswith("import-gpt2"):
        return [{"text": _ids(case)} for _ in range(n)]
    if fmt.startswith("import-t5"):
        return [{"text": _ids(case), "target": _ids(case)} for _ in range(n)]
    if fmt in ("jsonl", "csv"):
        return [{"text": _sentence(case), "label": case.rng.choice(LABELS)} for _ in range(n)]
    return [{"x": [round(case.rng.uniform(-3, 3), 3) for _ in range(3)],
             "label": case.rng.choice(LABELS)} for _ in range(n)]


def _jsonl(case: Case, recs: list[dict[str, Any]]) -> list[str]:
    """JSON lines of ``recs``, values damaged by the JSON operators."""
    rows = [{k: json.dumps(v, ensure_ascii=case.rng.random() < 0.5) for k, v in r.items()}
            for r in recs]
    raw: dict[int, str] = {}
    for _ in range(case.rng.randint(0, 3)):
        j = case.rng.randrange(len(rows))
        k = case.rng.randrange(8)
        keys = list(rows[j])
        if k <= 2 and keys:
            key = case.rng.choice(keys)
            rows[j][key] = case.pick(ODD_JSON)
            case.op(f"json-value line {j + 1} {key}={rows[j][key][:20]}")
        elif k == 3 and keys:
            key = case.rng.choice(keys)
            del rows[j][key]
            case.op(f"json-drop-key line {j + 1} {key}")
        elif k == 4:
            key = case.pick(("extra", "", "label ", "TEXT", "\u2028", "text\x00", "x" * 300))
            rows[j][key] = case.pick(ODD_JSON)
            case.op(f"json-extra-key line {j + 1} {key[:10]!r}")
        elif k == 5:
            raw[j] = case.pick(('[1, 2]', '"a string"', "1", "null", "[]", "{",
                                '{"text": "a", "text": "b", "label": "food"}',
                                '{"text": "a", "label": "food",}', "// comment",
                                "[" * 100_000 + "]" * 100_000, '{"a":' * 5000 + "1" + "}" * 5000,
                                '{"text": "a"} {"label": "b"}', "\ufeff{}"))
            case.op(f"json-line {j + 1}={raw[j][:20]!r}")
        elif k == 6:
            depth = case.pick((10, 63, 64, 65, 1000, 200_000))
            key = case.rng.choice(keys) if keys else "text"
            rows[j][key] = "[" * depth + "1" + "]" * depth
            case.op(f"json-deep line {j + 1} {key} depth {depth}")
        else:
            key = case.rng.choice(keys) if keys else "text"
            rows[j][key] = json.dumps("w " * case.pick((1000, 100_000)))
            case.op(f"json-long line {j + 1} {key}")
    out = []
    for j, r in enumerate(rows):
        out.append(raw[j] if j in raw else
                   "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in r.items()) + "}")
    return out


def _csv(case: Case, recs: list[dict[str, Any]], vec: bool) -> list[str]:
    names = list(recs[0])
    rows = [[" ".join(map(str, r[k])) if isinstance(r[k], list) else
             '"' + str(r[k]).replace('"', '""') + '"' if "," in str(r[k]) else str(r[k])
             for k in names] for r in recs]
    header = list(names)
    for _ in range(case.rng.randint(0, 3)):
        if not rows:
            break
        k = case.rng.randrange(7)
        j = case.rng.randrange(len(rows))
        if k <= 2 and rows[j]:
            c = case.rng.randrange(len(rows[j]))
            rows[j][c] = case.pick(ODD_CELLS)
            case.op(f"csv-cell row {j + 2} col {c + 1}={rows[j][c][:12]!r}")
        elif k == 3:
            rows[j].append(case.pick(ODD_CELLS))
            case.op(f"csv-extra-cell row {j + 2}")
        elif k == 4 and rows[j]:
            rows[j].pop()
            case.op(f"csv-missing-cell row {j + 2}")
        elif k == 5:
            c = case.rng.randrange(len(header))
            header[c] = case.pick(("", "label", "x", "text", " ", '"', "\ufefftext", "a,b"))
            case.op(f"csv-header col {c + 1}={header[c]!r}")
        else:
            # many rows, as many as a reader must take well inside the time limit
            rows = rows[:0] if case.rng.random() < 0.5 else (rows * 200)[:4_000]
            case.op(f"csv-rows {len(rows)}")
    return [",".join(header)] + [",".join(r) for r in rows]


def _pairs(case: Case) -> list[str]:
    lines = [f"{_sentence(case)}\t{_sentence(case)}" for _ in range(case.rng.randint(10, 16))]
    for _ in range(case.rng.randint(0, 3)):
        j = case.rng.randrange(len(lines))
        k = case.rng.randrange(5)
        if k == 0:
            lines[j] = lines[j].replace("\t", " ")
            case.op(f"pairs-no-tab line {j + 1}")
        elif k == 1:
            lines[j] += "\textra"
            case.op(f"pairs-two-tabs line {j + 1}")
        elif k == 2:
            src, _, tgt = lines[j].partition("\t")
            lines[j] = case.pick((f"\t{tgt}", f"{src}\t", "\t", " \t ", f"{src}\t<eos> <pad>"))
            case.op(f"pairs-side line {j + 1}={lines[j][:12]!r}")
        elif k == 3:
            lines[j] = lines[j] + " w" * case.pick((300, 20_000))
            case.op(f"pairs-long line {j + 1}")
        else:
            lines[j] = case.pick(("\u2028\t\u2029", "a\x00\tb", "\ufeffa\tb", "a\u0085b\tc"))
            case.op(f"pairs-odd line {j + 1}")
    return lines


def _damage_header(case: Case, data: bytes) -> bytes:
    """An image's header made to claim another size, or made inconsistent."""
    size = case.pick((0, 1, 31, 33, 2**16 - 1, 100_000, 2**31 - 1, 2**32 - 1), "header-size")
    b = bytearray(data)
    if data[:4] == b"\x89PNG" and len(b) >= 24:
        at = case.pick((16, 20))
        b[at:at + 4] = size.to_bytes(4, "big")
    elif data[:3] == b"GIF" and len(b) >= 10:
        at = case.pick((6, 8))
        b[at:at + 2] = min(size, 2**16 - 1).to_bytes(2, "little")
    elif data[:2] == b"BM" and len(b) >= 26:
        at = case.pick((18, 22))
        b[at:at + 4] = (min(size, 2**31 - 1) * case.pick((1, -1))).to_bytes(4, "little",
                                                                          signed=True)
    elif data[:2] == b"\xff\xd8":
        i = data.find(b"\xff\xc0")
        if i > 0 and i + 9 <= len(b):
            at = i + case.pick((5, 7))
            b[at:at + 2] = min(size, 2**16 - 1).to_bytes(2, "big")
    return bytes(b)


def _put(p: Path, data: bytes) -> None:
    """Write ``data`` at ``p``, whatever was there (a folder, a FIFO, a link) removed."""
    if not p.parent.is_dir() or p.parent.is_symlink():
        return  # its class folder was replaced by an earlier operator
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p)
    elif p.exists() or p.is_symlink():
        p.unlink()
    p.write_bytes(data)


def _images(case: Case, where: Path) -> Path:
    """A folder of class folders of images, damaged by the image operators."""
    imgs = case.state["images"]
    folder = where / "img"
    classes = ["cat", "dog"]
    if case.rng.random() < 0.15:
        classes = case.pick((["a"] * 1, [f"c{j}" for j in range(12)], ["é", "中"],
                             [" ", "-"], ["a\nb", "c"], [".hidden", "x"], ["1", "10", "2"]),
                            "classes")
        classes = list(dict.fromkeys(classes))
    files = []
    for c in classes:
        (folder / c).mkdir(parents=True, exist_ok=True)
        for j in range(6):
            p = folder / c / f"{j}.png"
            p.write_bytes(imgs["png"])
            files.append(p)
    for _ in range(case.rng.randint(1, 3)):
        p = case.rng.choice(files)
        k = case.rng.randrange(7)
        if k == 0:
            fmt = case.pick(sorted(imgs), "image-format")
            ext = {"jpg": ".jpg", "gif": ".gif", "bmp": ".bmp"}.get(fmt, ".png")
            q = p.with_suffix(case.pick((ext, ".png", ".JPEG", ".gif")))
            if p.is_file() and not p.is_symlink():
                p.unlink()
            _put(q, imgs[fmt])
        elif k == 1:
            fmt = case.pick(("png", "jpg", "gif", "bmp"), "damage-header-of")
            _put(p, _damage_header(case, imgs[fmt]))
        elif k == 2 and p.is_file() and not p.is_symlink():
            data, what = damage_bytes(case.rng, p.read_bytes())
            case.op(f"image-bytes {what}")
            _put(p, data)
        elif k == 3:
            special(p, case.pick(SPECIALS, "image-special"), case.outside)
        elif k == 4:
            c = folder / case.rng.choice(classes)
            if c.is_symlink() or not c.is_dir():
                continue
            what = case.pick(("empty", "file", "nested", "text-only", "outside-dir"),
                             "class-folder")
            shutil.rmtree(c)
            c.mkdir()
            if what == "file":
                c.rmdir()
                c.write_text("x\n", encoding="utf-8")
            elif what == "nested":
                (c / "deeper").mkdir()
                (c / "deeper" / "0.png").write_bytes(imgs["png"])
            elif what == "text-only":
                (c / "notes.txt").write_text("x\n", encoding="utf-8")
            elif what == "outside-dir":
                c.rmdir()
                c.symlink_to(case.outside, target_is_directory=True)
                break  # nothing is written through the link
        elif k == 5:
            c = folder / case.rng.choice(classes)
            if c.is_dir() and not c.is_symlink():
                _put(c / case.pick(("a.png.txt", "b.PNG", "c.jpeg", ".d.png", "e .png",
                                    "f\n.png"), "odd-name"), imgs["png"])
        else:
            _put(p, case.pick((b"", b"\x89PNG\r\n\x1a\n", b"GIF89a", b"BM", b"\xff\xd8",
                                     b"\xff\xd8\xff\xc0\x00\x11\x08", b"not an image\n")))
            case.op("image-stub")
    return folder


# -- the case ---------------------------------------------------------------------------------

def _file(case: Case, fmt: str) -> tuple[Path, str]:
    """A (damaged) data path of ``fmt``, and the key of the spec it is for."""
    where = case.tmp
    if fmt == "images":
        return _images(case, where), "img"
    if fmt == "pairs":
        lines, spec, name = _pairs(case), "pairs", case.pick(("d.tsv", "d.txt"))
    elif fmt.startswith("import-"):
        recs = _records(case, fmt)
        if fmt.endswith("csv"):
            lines, name = _csv(case, recs, False), "d.csv"
        else:
            lines, name = _jsonl(case, recs), "d.jsonl"
        spec = fmt
    elif fmt in ("jsonl", "vec-jsonl"):
        lines = _jsonl(case, _records(case, fmt))
        spec, name = ("ga" if fmt == "jsonl" else "vec"), case.pick(("d.jsonl", "d.ndjson"))
    elif fmt == "image-csv":
        folder = _images(case, where)
        lines = ["image,label"] + [f"{p.relative_to(where).as_posix()},{p.parent.name}"
                                   for p in sorted(folder.glob("*/*"))]
        if case.rng.random() < 0.3:
            lines.append(case.pick(("/dev/zero,cat", "../outside/sentinel.txt,cat", "img,cat",
                                    "img/cat,dog", ",cat", "nofile.png,cat",
                                    str(case.outside / "sentinel.txt") + ",dog"), "image-cell"))
        spec, name = "img", "d.csv"
    else:
        lines = _csv(case, _records(case, fmt), fmt == "vec-csv")
        spec, name = ("ga" if fmt == "csv" else "vec"), "d.csv"
    data = "\n".join(lines).encode("utf-8", "surrogatepass") + (
        b"\n" if case.rng.random() < 0.8 else b"")
    if case.rng.random() < 0.3:
        data, what = damage_bytes(case.rng, data)
        case.op(f"bytes {what}")
    path = where / name
    path.write_bytes(data)
    if case.rng.random() < 0.05:
        path = path.rename(path.with_suffix(case.pick((".json", ".csv.gz", "", ".TSV"),
                                                      "suffix")))
    if case.rng.random() < 0.07:
        special(path, case.pick(SPECIALS, "path"), case.outside)
    return path, spec


def _check_batch(batch: Any, what: str) -> None:
    bad = finite(batch)
    if bad:
        fail("nonfinite", f"{what} batch", f"the {what} batch's {bad} is not finite")


def run(case: Case) -> Outcome:
    """One mutated data file through what train, predict or evaluate read."""
    from attngraph.train.data.batches import data_task
    from attngraph.train.trained.reloaded import load_run

    imports = [f"import-{m}-{f}" for m in case.state["imports"] for f in ("jsonl", "csv")]
    fmt = case.pick(("jsonl", "csv", "vec-jsonl", "vec-csv", "pairs", "images", "image-csv",
                     *imports), "format")
    path, key = _file(case, fmt)
    if key.startswith("import-"):
        return _imported(case, path, case.state["imports"][key.split("-")[1]])
    graph = case.state[key]
    action = "train"
    if key == "ga":
        action = case.pick(("train", "train", "valid", "predict", "evaluate", "predict-cli"),
                           "action")
    if action in ("train", "valid"):
        fields = {}
        if case.rng.random() < 0.1:
            fields = {case.pick(("tokens", "label", "x", "nope")): case.pick(("text", "label",
                                                                             "x", "missing"))}
            case.op(f"fields={fields}")
        mode = case.pick(("word", "char"))
        if action == "valid":
            good = case.tmp / "good.jsonl"
            good.write_text("".join(json.dumps({"text": _sentence(case), "label": lab}) + "\n"
                                    for lab in LABELS * 2), encoding="utf-8")
            task = data_task(graph, str(good), valid=str(path), mode=mode)
        else:
            task = data_task(graph, str(path), valid=str(path) if case.rng.random() < 0.5
                             else None, fields=fields, mode=mode, seed=case.index % 7)
        _check_batch(task.batch(4, split="test"), "validation")
        _check_batch(task.batch(4), "training")
        return Outcome("valid")
    run_dir = case.state["run"]
    if action == "predict-cli":
        out = case.tmp / "preds.jsonl"
        out.write_text("an earlier file: kept whole unless the command succeeds\n",
                       encoding="utf-8")
        before = snapshot(case.tmp)
        try:
            cli("predict", str(run_dir), "--data", str(path), "-o", str(out))
        except Exit:
            lost = changed(before, snapshot(case.tmp))
            if lost:
                fail("lost-file", "predict -o after an error",
                             f"a failed predict changed {lost[:3]}")
            raise
        # JSON Lines end at \n only: a U+0085 or U+2028 inside a string is a character
        lines = out.read_text(encoding="utf-8").split("\n")
        lines = [ln for ln in lines if ln]
        rows = [json.loads(ln) for ln in lines]
        bad = finite(rows)
        if bad:
            fail("nonfinite", "predict -o", f"prediction {bad} is not finite")
        return Outcome("valid")
    run = load_run(run_dir)
    if action == "predict":
        rows = run.predict(str(path), attention=case.rng.random() < 0.5)
        bad = finite(rows)
        if bad:
            fail("nonfinite", "Run.predict", f"prediction {bad} is not finite")
    else:
        metrics = run.evaluate(str(path))
        bad = finite(metrics)
        if bad:
            fail("nonfinite", "Run.evaluate", f"metric {bad} is not finite")
    return Outcome("valid")



def _imported(case: Case, path: Path, run_dir: Path) -> Outcome:
    """A data file through what fine-tuning an import reads (its own tokenizer, else
    ids), or through its predict and evaluate."""
    from attngraph.train.data.tokenized import tokenized_task
    from attngraph.train.trained.reloaded import load_run

    run = load_run(run_dir)
    action = case.pick(("train", "train", "predict", "evaluate"), "action")
    if action == "train":
        fields = {}
        if case.rng.random() < 0.1:
            fields = {case.pick(("tokens", "label", "source", "target", "nope")):
                      case.pick(("text", "label", "target", "missing"))}
            case.op(f"fields={fields}")
        task = tokenized_task(run.graph, run_dir, str(path), seed=case.index % 7,
                              valid=str(path) if case.rng.random() < 0.5 else None,
                              fields=fields, truncate=case.rng.random() < 0.3,
                              blocks=case.pick((None, None, None, 1, 2, 5, 12, 13)))
        _check_batch(task.batch(4, split="valid"), "validation")
        _check_batch(task.batch(4), "training")
        return Outcome("valid")
    if action == "predict":
        rows = run.predict(str(path), max_length=3, attention=case.rng.random() < 0.5,
                           truncate=case.rng.random() < 0.3)
        bad = finite(rows)
    else:
        bad = finite(run.evaluate(str(path), max_length=3, truncate=case.rng.random() < 0.3))
    if bad:
        fail("nonfinite", f"{action} of an import", f"{bad} is not finite")
    return Outcome("valid")
