"""Runs on your own data: train from four kinds of file, evaluate, predict, reload.

Each data set is made in the test: texts with labels (JSONL), texts in a CSV
with its own column names (mapped with --field, split into characters), a
folder of PNGs per class, and a file of sentence pairs. Each is trained for a
few steps, evaluated and predicted with the CLI; a fresh Python process then
reloads every run with ``attngraph.load_run`` and must give the same
predictions. The slow test trains to a target.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
KEYS = {"sport": "goal", "food": "bread", "tech": "chip", "art": "paint"}
FILLER = "the a of and to in is it that was for on are with as his they be at one".split()
COLOURS = "red blue green gold pink gray teal navy".split()


def make_texts(n: int, seed: int = 0) -> list[dict[str, str]]:
    """Sentences of filler words with one keyword that names the label."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(sorted(KEYS))
        words = rng.choices(FILLER, k=rng.randint(4, 9))
        words.insert(rng.randrange(len(words) + 1), KEYS[label])
        rows.append({"text": " ".join(words), "label": label})
    return rows


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, n: int, seed: int = 1) -> Path:
    """Letters a-h with one of x/y/z marking the class, in columns body and category."""
    rng = random.Random(seed)
    lines = ["id,body,category"]
    for i in range(n):
        mark = rng.choice("xyz")
        chars = rng.choices("abcdefgh", k=rng.randint(4, 8))
        chars.insert(rng.randrange(len(chars) + 1), mark)
        lines.append(f'{i},"{"".join(chars)}",{ {"x": "ex", "y": "why", "z": "zed"}[mark]}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_images(folder: Path, n: int, seed: int = 2) -> Path:
    """32×32 grey PNGs: a bright 8×8 square in the top-left ('left') or bottom-right."""
    from PIL import Image

    rng = random.Random(seed)
    for label, (x0, y0) in {"left": (0, 0), "right": (24, 24)}.items():
        (folder / label).mkdir(parents=True)
        for i in range(n):
            im = Image.new("L", (32, 32), color=rng.randint(0, 40))
            im.paste(rng.randint(200, 255), (x0, y0, x0 + 8, y0 + 8))
            im.save(folder / label / f"{i}.png")
    return folder


def write_pairs(path: Path, n: int, seed: int = 3) -> Path:
    """Sentences of colour words and their reversal, source<TAB>target."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        src = rng.choices(COLOURS, k=rng.randint(3, 5))
        lines.append(" ".join(src) + "\t" + " ".join(reversed(src)))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _cases(tmp_path: Path) -> dict[str, tuple[str, Path, list[str]]]:
    """name -> (spec, data, extra train options)."""
    return {
        "jsonl": ("global_attention", write_jsonl(tmp_path / "texts.jsonl", make_texts(160)),
                  ["--epochs", "3", "--batch", "16"]),
        "csv": ("global_attention", write_csv(tmp_path / "letters.csv", 120),
                ["--field", "tokens=body", "--field", "label=category", "--tokenize", "char",
                 "--steps", "30", "--batch", "16"]),
        "png": ("glimpse_soft", write_images(tmp_path / "images", 24),
                ["--steps", "15", "--batch", "16"]),
        "pairs": ("bahdanau_translation", write_pairs(tmp_path / "pairs.tsv", 200),
                  ["--steps", "60", "--batch", "32"]),
    }


def test_train_evaluate_predict_and_reload_in_a_fresh_process(tmp_path: Path, cli) -> None:
    """Every form of data trains, evaluates and predicts from the CLI; the saved run
    reloaded in another process predicts exactly the same; classification accuracy
    from evaluate is the share of predictions equal to the labels."""
    cases = _cases(tmp_path)
    for name, (spec, data, extra) in cases.items():
        run = tmp_path / f"run_{name}"
        res = cli("train", SPECS / f"{spec}.yaml", "--data", data, "--out",
                  run, "--quiet", *extra, code=0)
        assert f"{spec} on data" in res.stdout
        assert (run / "data.json").is_file() and (run / "checkpoint.pt").is_file()
        metrics = json.loads(cli("evaluate", run, "--data", data, "--json", code=0).stdout)
        cli("predict", run, "--data", data, "-o", tmp_path / f"{name}.jsonl", code=0)
        rows = [json.loads(ln) for ln in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        assert [r["index"] for r in rows] == list(range(int(metrics["examples"])))
        if name == "pairs":
            assert all(isinstance(r["prediction"], str) and "target" in r for r in rows)
            continue
        right = sum(r["prediction"] == r["label"] for r in rows) / len(rows)
        assert metrics["accuracy"] == pytest.approx(right, abs=1e-6)
        assert all(abs(sum(r["probabilities"].values()) - 1) < 1e-4 for r in rows)
    script = (
        "import json, sys, attngraph\n"
        "out = {}\n"
        "for name, data in json.loads(sys.argv[1]).items():\n"
        "    run = attngraph.load_run(sys.argv[2] + '/run_' + name)\n"
        "    out[name] = run.predict(data)\n"
        "print(json.dumps(out))\n"
    )
    data = {name: str(d) for name, (_, d, _) in cases.items()}
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(data), str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, check=False,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    fresh = json.loads(proc.stdout)
    for name in cases:
        saved = [json.loads(ln) for ln in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
        assert fresh[name] == saved, name


def test_predict_attention_and_attend_on_your_own_text(tmp_path: Path, cli) -> None:
    """predict --attention gives weights over each example's own tokens (summing to 1);
    attend --input draws the user's sentence; a decoder translates without a target."""
    data = write_jsonl(tmp_path / "t.jsonl", make_texts(96))
    run = tmp_path / "run"
    cli("train", SPECS / "global_attention.yaml", "--data", data, "--out", run,
        "--quiet", "--steps", "12", "--batch", "16", code=0)
    mine = write_jsonl(tmp_path / "mine.jsonl", [{"text": "The goal, at last!"}])
    row = json.loads(cli("predict", run, "--data", mine, "--attention", code=0).stdout)
    assert row["tokens"] == ["the", "goal", ",", "at", "last", "!"]
    assert len(row["attention"]) == 6 and sum(row["attention"]) == pytest.approx(1, abs=1e-4)
    assert row["prediction"] in KEYS and "label" not in row
    res = cli("attend", run, "--input", "the bread is fresh", "-o", tmp_path / "a.png", code=0)
    assert "(words)" in res.stdout and (tmp_path / "a.png").stat().st_size > 0


def test_a_translation_run_generates_greedy_and_by_beam_search(tmp_path: Path, cli) -> None:
    """Predicting with a decoder needs no target column, greedy or with --beam; each
    prediction has its score; attend --input draws the alignment."""
    data = write_pairs(tmp_path / "p.tsv", 64)
    run = tmp_path / "run"
    cli("train", SPECS / "bahdanau_translation.yaml", "--data", data, "--out",
        run, "--quiet", "--steps", "4", "--batch", "16", code=0)
    src = write_jsonl(tmp_path / "src.jsonl", [{"source": "red blue"}])
    row = json.loads(cli("predict", run, "--data", src, "--max-length", "5", code=0).stdout)
    assert isinstance(row["prediction"], str) and len(row["prediction"].split()) <= 5
    given = json.loads(cli("predict", run, "--input", "red blue", "--max-length", "5",
                           code=0).stdout)
    assert given["prediction"] == row["prediction"] and given["score"] == row["score"]
    beam = json.loads(cli("predict", run, "--data", src, "--beam", "3", code=0).stdout)
    # the summed log-probability of the text written (attngraph.generate's tests check
    # beam search itself against exact search)
    assert isinstance(beam["prediction"], str) and beam["score"] <= 0.0
    assert row["score"] <= 0.0
    for opts in ((), ("--beam", "3")):  # the key/value cache changes no token
        args = ("predict", str(run), "--data", str(src), "--max-length", "5", *opts)
        cached = json.loads(cli(*args, code=0).stdout)
        plain = json.loads(cli(*args, "--no-cache", code=0).stdout)
        assert cached["prediction"] == plain["prediction"]
        assert cached["score"] == pytest.approx(plain["score"], abs=1e-5)
    res = cli("attend", run, "--input", "red blue green", "-o", tmp_path / "a.png", code=0)
    assert "(alignment)" in res.stdout
    # the default budget is each record's own (twice its source, plus 2): a record
    # gives the same text alone as beside a longer one
    from attngraph import load_run
    from attngraph.train.data.vocab import EOS

    reloaded = load_run(run)
    with torch.no_grad():  # a decoder that never ends a text: it runs its whole budget
        dict(reloaded.model.named_parameters())[
            "nodes.dec.nodes.logits.bias"][EOS] = -1e4
    recs = [{"source": "red blue"}, {"source": " ".join(["red", "blue"] * 6)}]
    for beam in (1, 3):
        one = reloaded.predict(recs[:1], beam=beam)[0]
        both = reloaded.predict(recs, batch=2, beam=beam)
        assert len(one["prediction"].split()) == 2 * 2 + 2
        assert both[0]["prediction"] == one["prediction"]
        assert both[0]["score"] == pytest.approx(one["score"], abs=1e-5)
        assert len(both[1]["prediction"].split()) == 2 * 12 + 2
    # a budget of 0 is refused, not read as "the default"
    from attngraph.errors import LoweringError

    with pytest.raises(LoweringError, match="max_length must be a whole number >= 1, not 0"):
        reloaded.predict(recs, max_length=0)


TEACHER_ONLY = """\
attngraph: 1
name: teacher_only
dims: {vocab: 12, e: 8}
inputs:
  source: {type: tokens, vocab: vocab}
  target: {type: labels, per_item: true, length: T, classes: vocab}
nodes:
  y: {kind: embedding, from: target, dim: e, vocab: vocab}
  logits: {kind: linear, from: y, out: vocab}
outputs: {logits: logits}
"""


def test_a_decoder_that_never_feeds_back_is_not_asked_to_generate(tmp_path: Path, cli) -> None:
    """A spec reading its target only by teacher forcing trains and evaluates, but
    predict refuses it with one error rather than printing text made from padding."""
    spec = tmp_path / "t.yaml"
    spec.write_text(TEACHER_ONLY, encoding="utf-8")
    data = write_pairs(tmp_path / "p.tsv", 32)
    run = tmp_path / "run"
    cli("train", spec, "--data", data, "--out", run, "--quiet", "--steps", "2", code=0)
    assert "token_accuracy" in json.loads(cli("evaluate", run, "--data", data,
                                              "--json", code=0).stdout)
    res = cli("predict", run, "--data", data)
    assert res.exit_code == 1 and "cannot generate" in res.stderr
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_data_runs_reach_their_targets(tmp_path: Path, cli) -> None:
    """Trained long enough, the keyword texts classify at >= 0.95 on held-out data and
    the colour sentences reverse with sequence accuracy >= 0.9."""
    texts = write_jsonl(tmp_path / "t.jsonl", make_texts(400))
    held = write_jsonl(tmp_path / "h.jsonl", make_texts(100, seed=9))
    cli("train", SPECS / "global_attention.yaml", "--data", texts, "--valid",
        held, "--epochs", "6", "--batch", "16", "--out", tmp_path / "a", "--quiet", code=0)
    got = json.loads(cli("evaluate", tmp_path / "a", "--data", held, "--json", code=0).stdout)
    assert got["accuracy"] >= 0.95
    pairs = write_pairs(tmp_path / "p.tsv", 400)
    cli("train", SPECS / "bahdanau_translation.yaml", "--data", pairs, "--steps",
        "250", "--batch", "32", "--out", tmp_path / "b", "--quiet", code=0)
    got = json.loads(cli("evaluate", tmp_path / "b", "--data", pairs, "--json", code=0).stdout)
    assert got["sequence_accuracy"] >= 0.9
