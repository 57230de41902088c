"""The benchmark script still runs (tiny sizes; its figures are not checked)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_quick_runs_every_comparison_and_writes_the_report(tmp_path: Path) -> None:
    """`benchmarks/run.py --quick` runs all ten comparisons in one process, prints a
    table with a row per target and writes a report with the machine and table."""
    out = tmp_path / "perf.md"
    res = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
        # the checkout under test, not whichever attngraph the environment installed
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr[-3000:]
    for row in ("MHSA spec / projections+SDPA", "MHSA spec / nn.MultiheadAttention",
                "global attention spec", "Bahdanau additive", "peak memory spec",
                "local spec (banded)", "`attngraph validate` cold",
                "`attngraph.compile` of a", "torch.compile speedup",
                "masked bidirectional GRU", "bahdanau_translation spec / hand-written twin",
                "glimpse_hard spec / hand-written twin", "torch.compile(fullgraph"):
        assert row in res.stdout, row
    # the real-model specs against transformers, and cached generation
    real = ("gpt2 spec / transformers GPT2LMHeadModel",
            "llama spec / transformers LlamaForCausalLM",
            "bert spec / transformers BertForSequenceClassification",
            "bert spec with every layer's weights / transformers, output_attentions",
            "cached generate: spec / transformers' GPT2LMHeadModel.generate",
            "uncached (re-run prefix) / cached")
    if importlib.util.find_spec("transformers") is None:
        real = ("(skipped) real-model specs / transformers",)
    for row in real:
        assert row in res.stdout, row
    doc = out.read_text(encoding="utf-8")
    assert "Quick smoke run" in doc
    for key in ("CPU:", "torch:", "python:", "date:", "| comparison |"):
        assert key in doc, key


def test_paired_timing_alternates_each_pair_and_keeps_its_fastest_call() -> None:
    """`paired` runs the two variants of a pair alternately within a round (a b b a,
    then b a a b), keeps each one's fastest call, and gives a time per round."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from timing import paired
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    calls: list[str] = []
    slow = {"a": iter([0.02, 0.0, 0.0, 0.0]), "b": iter([0.0, 0.0, 0.02, 0.0])}

    def variant(name: str) -> object:
        def call() -> None:
            calls.append(name)
            delay = next(slow[name], 0.0)
            if delay:
                import time
                time.sleep(delay)
        return call

    times = paired({"a": variant("a"), "b": variant("b"), "c": variant("c")},
                   [("a", "b")], repeats=2, warmup=0, inner=2)
    assert calls == ["a", "b", "b", "a", "b", "a", "a", "b"]  # "c" is in no pair
    assert set(times) == {"a", "b"}
    assert [len(v) for v in times.values()] == [2, 2]
    # the slow first call of "a" (round 0) and third of "b" (round 1) are dropped
    assert max(times["a"] + times["b"]) < 0.015
