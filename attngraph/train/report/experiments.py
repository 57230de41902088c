"""docs/experiments.md, written from real runs of ``attngraph compare``.

Each :class:`Experiment` is one question the attention posts ask, answered by
one comparison: the specs (or the one spec and its ``--vary``), the seeds, and
the spec's own step counts. :func:`run_experiment` trains it (reusing finished
runs under ``runs/experiments/<name>/``), draws its figures into
``docs/experiments/`` and returns its section; :func:`main` (``make
experiments``, ``python -m attngraph.train.report.experiments``) writes them all,
with the total time measured. A section's reading of the figures is made from
the numbers, not written by hand: a difference in a metric's mean counts when
it exceeds twice the larger of the two seed spreads (sample sd), and otherwise
the section says there is no difference at this number of seeds.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attngraph.fileio import write_file
from attngraph.train.report.compare import Comparison, compare, markdown, table, write_report
from attngraph.train.report.variants import parse_set, parse_vary

__all__ = ["Experiment", "EXPERIMENTS", "run_experiment", "reading", "main"]

#: Evaluation period of every run: fine enough to tell learning speeds apart.
EVAL_EVERY = 20
_KEY = "blocks.decode.nodes.score.key"
_HEADS = "nodes.q.heads+nodes.k.heads+nodes.v.heads"


@dataclass(frozen=True)
class Experiment:
    """One section: a question and the comparison that answers it."""

    name: str
    title: str
    question: str
    specs: tuple[str, ...]
    sets: tuple[str, ...] = ()
    varies: tuple[str, ...] = ()
    about: str = ""

    def command(self, seeds: str, out: str) -> str:
        """The ``attngraph compare`` line that makes this section's runs and figures."""
        opts = [*(f"--set '{s}'" for s in self.sets), *(f"--vary '{v}'" for v in self.varies)]
        return " ".join(["attngraph compare", *self.specs, *opts, f"--seeds {seeds}",
                         f"--eval-every {EVAL_EVERY}", f"--out {out}/{self.name}"])


EXPERIMENTS = (
    Experiment(
        "stop_gradient",
        "Stop-gradient: does the alignment model's gradient to the encoder matter?",
        "Bahdanau's alignment model scores each annotation h_j; its gradient reaches the "
        "encoder through the scorer's key and through the context c_t. Detaching the "
        "key (`{ref: enc, detach: true}`) leaves the encoder trained only through what "
        "it contributes to the context: does accuracy, alignment or learning speed change?",
        ("specs/bahdanau_translation.yaml",),
        varies=(f"key:{_KEY}=enc,{{ref: enc, detach: true}}",),
        about="`key=enc` is the spec as written; `key=ref-enc-detach-true` stops the gradient "
        "from the alignment model's scores to the encoder."),
    Experiment(
        "hard_vs_soft", "Hard vs soft glimpses",
        "A hard glimpse (a sampled location, trained by REINFORCE) against a soft "
        "expectation over the image's tiles, on the same cluttered digits: what does "
        "hard attention buy?",
        ("specs/glimpse_hard.yaml", "specs/glimpse_soft.yaml"),
        about="Each spec trains for its own steps (the hard model's REINFORCE needs more) "
        "towards its own target (accuracy 0.8 and 0.85): steps to target measure each "
        "against its own bar, and accuracy is the figure both share."),
    Experiment(
        "location_vs_content", "Location vs content",
        "A learned score per position (location) against a content scorer, on the "
        "needle task with the informative word always at position 3 (the task "
        "option location_attention is trained with, set for both).",
        ("specs/location_attention.yaml", "specs/global_attention.yaml"),
        sets=("train.options.needle_at=3",),
        about="With the needle at a fixed place both can solve it; the next section moves it."),
    Experiment(
        "location_vs_content_moving", "Location vs content, the needle anywhere",
        "The same two specs on the needle task with the informative word at a random "
        "position (needle_at -1, the task's default): can a score that depends only on "
        "the position find it?",
        ("specs/location_attention.yaml", "specs/global_attention.yaml"),
        sets=("train.options.needle_at=-1",),
        about="The needle words (ids 1..classes) never occur as noise, so even a uniform "
        "average of the words tells the class: accuracy alone cannot show where the "
        "model looks, `attention_peak` (the weight on the needle) does."),
    Experiment(
        "global_vs_local", "Global vs local-p",
        "Luong's global attention (every source word) against local-p (a predicted "
        "position and a Gaussian window around it), on string reversal.",
        ("specs/luong_translation.yaml", "specs/luong_local_p.yaml")),
    Experiment(
        "heads", "One head vs four",
        "Multi-head attention with its 32 dimensions in 1 head or in 4 heads of 8, "
        "on the needle task.",
        ("specs/multihead_attention.yaml",), varies=(f"heads:{_HEADS}=1,4",)),
)


def reading(cmp: Comparison, rows: list[dict[str, Any]]) -> list[str]:
    """What the table shows, one line per metric (and the learning speed).

    A difference counts when the means differ by more than twice the larger sd.
    """
    a, b = rows[0], rows[-1]
    lines = []
    for m in cmp.metric_names:
        if m not in a["metrics"] or m not in b["metrics"]:
            continue
        (ma, sa), (mb, sb) = a["metrics"][m], b["metrics"][m]
        gap, spread = mb - ma, 2 * max(sa, sb)
        if abs(gap) > spread and abs(gap) > 1e-3:
            better = b["variant"] if gap > 0 else a["variant"]
            lines.append(f"- **{m}**: `{better}` is higher by {abs(gap):.3f} "
                         f"({ma:.3f} vs {mb:.3f}), beyond twice the seeds' spread ({spread:.3f}).")
        else:
            lines.append(f"- **{m}**: no difference beyond the seeds' spread "
                         f"({ma:.3f} ± {sa:.3f} vs {mb:.3f} ± {sb:.3f}).")
    ta, tb = a["steps_to_target"], b["steps_to_target"]
    if ta and tb:
        apart = abs(ta[0] - tb[0]) > 2 * max(ta[1], tb[1])
        faster = a["variant"] if ta[0] < tb[0] else b["variant"]
        speed = (f"steps to the target: {ta[0]:.0f} ± {ta[1]:.0f} vs {tb[0]:.0f} ± {tb[1]:.0f} "
                 "(over the seeds that reached it): "
                 + (f"`{faster}` is faster" if apart else "no difference beyond the spread"))
    else:
        speed = "steps to the target: not reached by " + " and ".join(
            f"`{r['variant']}`" for r in (a, b) if not r["steps_to_target"])
    lines.append(f"- **learning speed**: target reached by {a['reached']} vs {b['reached']} "
                 f"seeds; {speed}; seconds per run {a['seconds'][0]:.1f} vs {b['seconds'][0]:.1f}.")
    return lines


def run_experiment(exp: Experiment, *, seeds: list[int], runs: Path, figures: Path,
                   steps: int | None = None) -> tuple[str, float, float]:
    """Train (or reuse) one experiment's runs: its markdown section, this call's
    seconds, and the training seconds its runs' summaries state."""
    from attngraph.train.report.compare_figures import attention, curves

    start = time.perf_counter()
    out = runs / exp.name
    cmp = compare(list(exp.specs), seeds=seeds, out=out, steps=steps, eval_every=EVAL_EVERY,
                  sets=[parse_set(s) for s in exp.sets],
                  varies=[parse_vary(v) for v in exp.varies],
                  note=lambda line: print(f"{exp.name}: {line}", file=sys.stderr))
    figures.mkdir(parents=True, exist_ok=True)
    curve = curves(cmp, out / "curves.png")
    pic, notes = attention(cmp, out / "attention.png")
    write_report(cmp, {"curves": str(curve), "attention": str(pic)})
    shown = {}
    for kind, path in (("curves", curve), ("attention", pic)):
        shown[kind] = figures / f"{exp.name}-{kind}.png"
        shutil.copyfile(path, shown[kind])
    rows = table(cmp)
    seconds = sum(r.seconds for rs in cmp.runs.values() for r in rs)
    seed_text = ",".join(map(str, seeds))
    parts = [f"## {exp.title}", "", f"**Question.** {exp.question}", "",
             "**Compared**: " + ", ".join(f"`{v.name}` ({v.spec}"
                                          + (f" with {', '.join(o.label for o in v.overrides)}"
                                             if v.overrides else "") + ")"
                                          for v in cmp.variants) + ".",
             *([exp.about] if exp.about else []), "",
             "Made by:", "", "```", exp.command(seed_text, str(runs)), "```", "",
             markdown(cmp, rows)]
    for name, text in cmp.diffs.items():
        parts += [f"`attngraph diff` of `{cmp.variants[0].name}` and `{name}`:", "",
                  "```", text.rstrip("\n"), "```", ""]
    parts += [f"![learning curves]({figures.name}/{shown['curves'].name})", "",
              f"![attention]({figures.name}/{shown['attention'].name})", "",
              *(f"({n})" for n in notes),
              "**What they show** (read from the table above):", "",
              *reading(cmp, rows), "",
              f"Training time of these {sum(len(rs) for rs in cmp.runs.values())} runs: "
              f"{seconds:.0f} s.", ""]
    return "\n".join(parts), time.perf_counter() - start, seconds


def main(argv: list[str] | None = None) -> int:
    """Write docs/experiments.md from the experiments named (default: all)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="experiments to run [default: all]: "
                    + ", ".join(e.name for e in EXPERIMENTS))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--runs", default="runs/experiments")
    ap.add_argument("--out", default="docs/experiments.md")
    ap.add_argument("--steps", type=int, default=None,
                    help="override every spec's steps (only to try the generator out)")
    args = ap.parse_args(argv)
    known = {e.name: e for e in EXPERIMENTS}
    bad = [n for n in args.names if n not in known]
    if bad:
        ap.error(f"unknown experiment {', '.join(bad)}; known: {', '.join(known)}")
    chosen = [known[n] for n in args.names] if args.names else list(EXPERIMENTS)
    seeds = [int(s) for s in args.seeds.split(",")]
    out = Path(args.out)
    figures = out.parent / out.stem
    sections, total, trained = [], 0.0, 0.0
    for exp in chosen:
        text, secs, train = run_experiment(exp, seeds=seeds, runs=Path(args.runs),
                                           figures=figures, steps=args.steps)
        sections.append(text)
        total += secs
        trained += train
    missing = [e for e in EXPERIMENTS if e not in chosen]
    head = ["# Experiments", "",
            "Questions the attention posts ask that only an experiment answers. Every "
            "section was produced by `make experiments` (`python -m "
            "attngraph.train.report.experiments`), which runs the `attngraph compare` line it "
            "shows; the runs stay in " + f"`{args.runs}/`. Mean ± sample sd over seeds "
            f"{args.seeds}, each spec at its own steps"
            + (f" (here overridden to {args.steps})" if args.steps else "") + ".", "",
            f"Training time of all {len(seeds)}-seed runs below, the sum of the seconds "
            f"each run's summary states: {trained:.0f} s (CPU, torch's threads at 1 per "
            "run, on a machine shared by other jobs). Wall time of this generation: "
            f"{total:.0f} s (finished runs are reused, so a regeneration only redraws).", ""]
    if missing:
        head += ["Not run in this generation: " + ", ".join(f"`{e.name}` ({e.title})"
                                                           for e in missing)
                 + "; `make experiments` writes them.", ""]
    write_file(out, "\n".join(head + sections))
    print(f"{out} ({total:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
