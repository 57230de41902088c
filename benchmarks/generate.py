"""Greedy generation with the key/value cache (issue 27 part 3), against transformers.

Usage: ``python benchmarks/generate.py [--quick] [--repeats R] [--threads T] [--tokens L]``,
or as part of ``make bench`` (``benchmarks/run.py --only generate``).
A GPT-2-small-sized model (124M parameters, random weights) is built by
``transformers``, saved, and imported into specs/real/gpt2.yaml
(:func:`attngraph.realmodels.load_model`); both then generate L greedy tokens
(default 256) from one 8-token prompt. Rows, as in benchmarks/run.py:

- cached ``attngraph.generate`` / ``GPT2LMHeadModel.generate`` (its own cache), the
  median of interleaved rounds of the per-round ratio;
- uncached (``cache=False``: the prefix re-run at every step) / cached. The uncached
  path is too slow to run 256 steps: its time is estimated as the sum of its steps'
  forwards over the prefix (p + t tokens at step t), forward timed at nine prefix
  lengths and interpolated; a context row runs it for real at L/8 tokens and shows
  the estimate for that run beside it.

Prints the table; ``--out FILE`` appends nothing to docs: it writes the rows alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402
from report import Row, render_table  # noqa: E402
from timing import interleaved, ratio_stat  # noqa: E402

import attngraph  # noqa: E402

#: GPT-2 small (124M) and a tiny smoke size
FULL = {"vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024}
SMALL = {"vocab_size": 61, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 128}


def _models(cfg: dict[str, int], tmp: Path) -> tuple[torch.nn.Module, torch.nn.Module]:
    """transformers' GPT-2 with random weights, and the same weights in the spec."""
    import transformers

    from attngraph.realmodels import load_model

    torch.manual_seed(0)
    ref = transformers.GPT2LMHeadModel(transformers.GPT2Config(**cfg)).eval()
    ref.save_pretrained(tmp)
    return ref, load_model(tmp).model.eval()


def _uncached_estimate(spec: torch.nn.Module, prompt: torch.Tensor, tokens: int,
                       rounds: int) -> float:
    """Seconds the uncached path takes for ``tokens`` steps: step t re-runs forward over
    the prefix of p + t tokens, so the sum of those forwards, each timed (median of
    ``rounds``) at nine prefix lengths and interpolated linearly between them."""
    p = prompt.shape[1]
    at = sorted({p + round(i * (tokens - 1) / 8) for i in range(9)})
    cost = {}
    with torch.no_grad():
        for n in at:
            ids = torch.randint(1, 50, (1, n), generator=torch.Generator().manual_seed(n))
            cost[n] = statistics.median(_timed(lambda ids=ids: spec(tokens=ids))
                                        for _ in range(rounds))
    total = 0.0
    for n in range(p, p + tokens):
        hi = next(m for m in at if m >= n)
        lo = max(m for m in at if m <= n)
        w = 0.0 if hi == lo else (n - lo) / (hi - lo)
        total += cost[lo] * (1 - w) + cost[hi] * w
    return total


def bench_generate(quick: bool, repeats: int, tokens: int) -> list[Row]:
    """Cached greedy generation vs transformers' cached generate and vs uncached."""
    cfg = SMALL if quick else FULL
    with tempfile.TemporaryDirectory() as tmp:
        ref, spec = _models(cfg, Path(tmp))
    prompt = torch.randint(1, cfg["vocab_size"], (1, 8),
                           generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = ref.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens,
                            do_sample=False, pad_token_id=0)[0, 8:]
    got = attngraph.generate(spec, {"tokens": prompt}, max_length=tokens).tokens[0]
    same = torch.equal(want, got)
    with torch.no_grad():
        times = interleaved({
            "spec": lambda: attngraph.generate(spec, {"tokens": prompt}, max_length=tokens),
            "hf": lambda: ref.generate(prompt, max_new_tokens=tokens, min_new_tokens=tokens,
                                       do_sample=False, pad_token_id=0),
        }, repeats, warmup=1, inner=1)
    ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    r = ratio_stat(times, "spec", "hf")
    size = "GPT-2 small (124M)" if not quick else "tiny GPT-2"
    conf = f"{size}, B=1, prompt 8, {tokens} greedy tokens, fp32"
    est = _uncached_estimate(spec, prompt, tokens, max(3, repeats))
    short = max(tokens // 8, 2)
    direct = {k: statistics.median(v) for k, v in interleaved({
        "plain": lambda: attngraph.generate(spec, {"tokens": prompt}, max_length=short,
                                            cache=False),
        "cached": lambda: attngraph.generate(spec, {"tokens": prompt}, max_length=short),
    }, max(3, repeats), warmup=1, inner=1).items()}
    check = _uncached_estimate(spec, prompt, short, max(3, repeats))
    return [
        Row("cached generate: spec / transformers' GPT2LMHeadModel.generate", conf,
            r.fmt(), "<= 1.2x", r.median <= 1.2,
            f"{ms['spec']:.0f} ms vs {ms['hf']:.0f} ms; "
            f"same tokens as transformers: {'yes' if same else 'NO'}"),
        Row("uncached (re-run prefix) / cached, extrapolated", conf,
            f"{est * 1e3 / ms['spec']:.1f}x", ">= 5x", est * 1e3 / ms["spec"] >= 5,
            f"uncached {est:.1f} s at {tokens} tokens: the sum of its {tokens} forwards over "
            "the prefix, each timed at 9 prefix lengths and interpolated (not run: too slow)"),
        Row("(context) uncached / cached, measured", f"as above, {short} tokens",
            f"{direct['plain'] / direct['cached']:.1f}x", "-", None,
            f"{direct['plain'] * 1e3:.0f} ms vs {direct['cached'] * 1e3:.0f} ms; the "
            f"estimate above gives {check * 1e3:.0f} ms for the uncached run"),
    ]


def _timed(fn) -> float:  # noqa: ANN001
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    ap.add_argument("--repeats", type=int, default=None, help="interleaved rounds")
    ap.add_argument("--threads", type=int, default=2, help="torch threads, all variants")
    ap.add_argument("--tokens", type=int, default=256, help="greedy tokens to generate")
    ap.add_argument("--out", default="-", help="write the table to FILE ('-': none)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    rows = bench_generate(a.quick, a.repeats or (2 if a.quick else 5), a.tokens)
    table = render_table(rows)
    print(table)
    if a.out != "-":
        Path(a.out).write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
