"""``attngraph compare``: variants over seeds, the table read from the runs' own files."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from attngraph.errors import SpecError
from attngraph.train.report.variants import apply, parse_set, parse_vary, split_values

PNG = b"\x89PNG\r\n\x1a\n"

TINY = """\
attngraph: 1
name: {name}
dims: {{vocab: 16, d: 8, classes: 4}}
inputs:
  tokens: {{type: tokens, vocab: vocab}}
nodes:
  x:      {{kind: items, from: tokens, embed: d}}
  score:  {{kind: scorer, fn: {fn}, query: {{learned: d}}, key: x}}
  p:      {{kind: softmax, scores: score}}
  z:      {{kind: readout, weights: p, values: x}}
  logits: {{kind: linear, from: z, out: classes}}
outputs: {{logits: logits, attention: p}}
train:
  task: {task}
  steps: 6
  batch: 8
  lr: 0.01
  target: {{accuracy: 0.5}}
  options: {{vocab: 16, classes: 4, length: 6}}
"""


def _spec(tmp: Path, name: str, fn: str = "dot", task: str = "needle") -> str:
    path = tmp / f"{name}.yaml"
    path.write_text(TINY.format(name=name, fn=fn, task=task), encoding="utf-8")
    return str(path)


def _final(run: Path) -> dict[str, float]:
    """The last test line of a run's metrics.jsonl, without step and split."""
    lines = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    last = [ln for ln in lines if ln["split"] == "valid"][-1]
    return {k: v for k, v in last.items() if k not in ("step", "split")}


def test_two_specs_two_seeds_end_to_end(tmp_path: Path, cli) -> None:
    """Two tiny specs over seeds 0,1: every run is an ordinary run directory, the
    table's mean and sd of every metric equal those computed from the runs' own
    metrics files, and the learning curves and attention pictures are PNG files."""
    a, b = _spec(tmp_path, "tiny_dot", "dot"), _spec(tmp_path, "tiny_add", "additive")
    out = tmp_path / "cmp"
    res = cli("compare", a, b, "--seeds", "0,1", "--out", out, code=0)
    data = json.loads((out / "compare.json").read_text())
    assert [r["variant"] for r in data["variants"]] == ["tiny_dot", "tiny_add"]
    for row in data["variants"]:
        runs = [out / row["variant"] / f"seed{k}" for k in (0, 1)]
        for run in runs:
            assert (run / "checkpoint.pt").is_file() and (run / "summary.json").is_file()
        finals = [_final(r) for r in runs]
        assert set(row["metrics"]) == {"accuracy", "attention_peak"}
        for m, (mean, sd) in row["metrics"].items():
            vals = [f[m] for f in finals]
            assert mean == pytest.approx(statistics.mean(vals), abs=1e-12)
            assert sd == pytest.approx(statistics.stdev(vals), abs=1e-12)
        assert row["steps"] == [6.0, 0.0]
        assert row["reached"] == f"{sum(f['accuracy'] >= 0.5 for f in finals)}/2"
    for pic in ("curves.png", "attention.png"):
        assert (out / pic).read_bytes()[:8] == PNG
    md = (out / "compare.md").read_text()
    assert "| `tiny_dot` |" in md and "accuracy (≥ 0.5)" in md
    mean, sd = data["variants"][1]["metrics"]["accuracy"]
    assert f"{mean:.3f} ± {sd:.3f}" in res.stdout


def test_vary_trains_a_variant_that_differs_and_prints_its_diff(tmp_path: Path, cli) -> None:
    """--vary makes one variant per value from one spec: its spec file carries the
    override, `attngraph diff` of the two is printed, and the runs differ."""
    a = _spec(tmp_path, "tiny", "dot")
    out = tmp_path / "cmp"
    res = cli("compare", a, "--vary", "fn:nodes.score.fn=dot,additive", "--seeds", "0,1",
              "--out", out, code=0)
    assert "# diff: fn=dot -> fn=additive" in res.stdout
    assert "score ↔ score: fn dot vs additive" in res.stdout
    assert "fn: additive" in (out / "fn=additive" / "spec.yaml").read_text()
    assert _final(out / "fn=dot" / "seed0") != _final(out / "fn=additive" / "seed0")
    # a second call reuses the finished runs and gives the same table
    again = cli("compare", a, "--vary", "fn:nodes.score.fn=dot,additive", "--seeds", "0,1",
                "--out", out, code=0)
    assert "seed 1: reused" in again.stderr
    assert again.stdout.split("task needle")[1] == res.stdout.split("task needle")[1]
    # finer evaluation than the finished runs had: trained again, the old runs moved aside
    finer = cli("compare", a, "--vary", "fn:nodes.score.fn=dot,additive", "--seeds", "0",
                "--eval-every", "2", "--out", out, code=0)
    assert "reused" not in finer.stderr
    tests = [json.loads(ln)["step"] for ln in (out / "fn=dot" / "seed0" / "metrics.jsonl")
             .read_text().splitlines() if '"valid"' in ln]
    assert tests == [2, 4, 6]
    assert list((out / "fn=dot").glob("seed0.old-*"))


def test_bad_override_path_is_located_in_its_text(tmp_path: Path, cli) -> None:
    """A key the spec lacks is one error at its column of the --set text, with the
    keys there and a "did you mean"; no traceback, nothing trained."""
    a = _spec(tmp_path, "tiny")
    out = tmp_path / "cmp"
    res = cli("compare", a, "--set", "nodes.scor.fn=dot", "--seeds", "0", "--out", out, code=1)
    assert "--set:1:7: error: nodes has no key 'scor'" in res.stderr
    assert "did you mean 'score'" in res.stderr and "Traceback" not in res.output
    assert not (out / "tiny" / "seed0").exists()


def test_override_that_breaks_the_spec_names_the_variant(tmp_path: Path, cli) -> None:
    """An override the spec's validation refuses is reported in the variant's spec
    and, next to it, at the override that made it."""
    a = _spec(tmp_path, "tiny")
    res = cli("compare", a, "--vary", "fn:nodes.score.fn=dot,nonsense", "--seeds", "0",
              "--out", tmp_path / "cmp", code=1)
    assert "nonsense" in res.stderr and "fn=nonsense" in res.stderr
    assert "variant 'fn=nonsense' sets nodes.score.fn=nonsense here" in res.stderr
    assert "Traceback" not in res.output


def test_specs_of_different_tasks_are_refused(tmp_path: Path, cli) -> None:
    """Two specs trained on different tasks do not compare: one error at the second
    spec's train.task, with the --set that would align them."""
    a, b = _spec(tmp_path, "one"), _spec(tmp_path, "two", task="copy")
    res = cli("compare", a, b, "--seeds", "0", "--out", tmp_path / "cmp", code=1)
    assert f"{b}:14:9: error: variant 'two' trains on the task 'copy'" in res.stderr
    assert "--set train.task=needle" in res.stderr


def test_unknown_spec_and_bad_seeds(tmp_path: Path, cli) -> None:
    """A missing spec file and a bad --seeds list each give one clear error."""
    res = cli("compare", tmp_path / "nope.yaml", "--out", tmp_path / "cmp")
    assert res.exit_code == 1 and "nope.yaml" in res.stderr and "Traceback" not in res.output
    res = cli("compare", _spec(tmp_path, "tiny"), "--seeds", "0,x")
    assert res.exit_code == 2 and "not a comma-separated list of integers" in res.output


def test_parse_and_apply() -> None:
    """Overrides read their value as YAML, split values outside brackets, refuse a
    step into a scalar at the key's column, and leave the original untouched."""
    doc = {"nodes": {"q": {"heads": 1}, "k": {"heads": 1}}, "list": [1, 2]}
    v = parse_vary("h:nodes.q.heads+nodes.k.heads=1,4")
    got = apply(doc, [o for _, o in v.choices[1]])
    assert got["nodes"] == {"q": {"heads": 4}, "k": {"heads": 4}}
    assert doc["nodes"]["q"]["heads"] == 1
    assert apply(doc, [parse_set("list.1={ref: enc, detach: true}")])["list"] == [
        1, {"ref": "enc", "detach": True}]
    assert split_values("a,{x: 1, y: 2},[3, 4]") == ["a", "{x: 1, y: 2}", "[3, 4]"]
    with pytest.raises(SpecError) as err:
        apply(doc, [parse_set("nodes.q.heads.x=1")])
    assert str(err.value.loc) == "--set:1:15" and "the value '1'" in err.value.message
    with pytest.raises(SpecError) as err:
        parse_vary("h:nodes.q.heads=1")
    assert "at least two values" in err.value.message
