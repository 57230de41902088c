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
