"""The figures of a comparison: its runs read back, and the table over the seeds.

:func:`read_run` reads one run directory's figures (the final validation metrics
from the last ``"split": "valid"`` line of ``metrics.jsonl``, ``"test"`` in a run an
earlier version wrote; the steps and seconds from ``summary.json``); :func:`table`
gives per variant the mean and sample standard deviation of every metric over the
seeds, how many reached the target and at which step; :func:`markdown` and
:func:`write_report` write them. :mod:`attngraph.train.report.compare` trains the
runs and re-exports these names.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attngraph.errors import SourceLoc, TrainingError
from attngraph.fileio import excerpt_text, lines, loads_json, read_json, read_text
from attngraph.train.report.variants import Variant
from attngraph.train.store.directory import run_file

#: The split names of a validation line: ``test`` in runs of earlier versions.
_VALID = ("valid", "test")

__all__ = ["SeedRun", "Comparison", "read_run", "table", "markdown", "write_report", "stats"]


@dataclass
class SeedRun:
    """One trained run of a variant, as its files say."""

    seed: int
    out: Path
    metrics: dict[str, float]
    steps: int
    seconds: float
    #: the validation lines of metrics.jsonl (step and metrics), in order
    curve: list[dict[str, float]]
    #: the training lines (step, loss and the first metric)
    train: list[dict[str, float]]
    reused: bool = False


@dataclass
class Comparison:
    """What :func:`compare` trained and read back."""

    task: str
    target: dict[str, float]
    metric_names: list[str]
    variants: list[Variant]
    runs: dict[str, list[SeedRun]]
    #: each variant's diff against the first, as ``attngraph diff`` prints it
    diffs: dict[str, str] = field(default_factory=dict)
    diffs_md: dict[str, str] = field(default_factory=dict)
    out: Path = Path()
    #: each variant's own target (its spec's ``train.target``)
    targets: dict[str, dict[str, float]] = field(default_factory=dict)


def stats(values: Sequence[float]) -> tuple[float, float]:
    """``(mean, sample standard deviation)``; the deviation of one value is 0.

    >>> stats([1.0, 2.0, 3.0])
    (2.0, 1.0)
    >>> stats([0.5])
    (0.5, 0.0)
    """
    vals = [float(v) for v in values]
    return statistics.fmean(vals), statistics.stdev(vals) if len(vals) > 1 else 0.0


def read_run(out: Path, seed: int, *, reused: bool = False) -> SeedRun:
    """A run directory's figures, from its ``metrics.jsonl`` and ``summary.json``.

    Raises
    ------
    TrainingError
        A missing or damaged file, located at it.
    """
    from attngraph.train.run.record import METRICS_FILE, SUMMARY_FILE

    curve: list[dict[str, float]] = []
    train: list[dict[str, float]] = []
    log, summ = out / METRICS_FILE, out / SUMMARY_FILE
    role = run_file(METRICS_FILE, 1 << 30)
    # through attngraph.fileio: regular files, bounded, JSON with limits (NaN as written)
    text = read_text(log, role)
    summary = read_json(summ, run_file(SUMMARY_FILE), what="this run's summary.json",
                        nonfinite=True)
    shown = excerpt_text(text)
    for i, line in enumerate(lines(text), 1):
        if not line.strip():
            continue
        rec = loads_json(line, str(log), role, line=i, shown=shown, nonfinite=True,
                         float32=False)
        try:
            split = rec.pop("split")
            row = {k: float(v) for k, v in rec.items()}
            if not row["step"] >= 0:
                raise ValueError
        except (ValueError, KeyError, TypeError, AttributeError):
            msg = "this line is not a step's JSON object"
            raise TrainingError(msg, SourceLoc(str(log), i, 1, shown),
                                "train the run again with --overwrite") from None
        (curve if split in _VALID else train).append(row)
    if not curve:
        msg = "this run's metrics log has no validation line"
        raise TrainingError(msg, SourceLoc(str(log)), "train it again with --overwrite")
    final = {k: v for k, v in curve[-1].items() if k != "step"}
    steps: Any = None
    seconds: Any = None
    if isinstance(summary, dict):
        steps = summary.get("steps", int(curve[-1]["step"]))
        seconds = summary.get("seconds", 0.0)
    if not _count(steps) or not isinstance(seconds, int | float) or isinstance(seconds, bool):
        msg = "this run's summary.json is damaged (no whole number of steps and seconds)"
        raise TrainingError(msg, SourceLoc(str(summ)), "train it again with --overwrite")
    return SeedRun(seed, out, final, int(steps), float(seconds), curve, train, reused)


def _count(v: object) -> bool:
    """True for a whole number of steps (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _to_target(r: SeedRun, target: dict[str, float]) -> int | None:
    """The first evaluated step at which every target metric was reached."""
    if not target:
        return None
    for row in r.curve:
        if all(row.get(k, float("-inf")) >= v for k, v in target.items()):
            return int(row["step"])
    return None


def table(cmp: Comparison) -> list[dict[str, Any]]:
    """One row per variant: every metric's ``[mean, sd]`` and the run figures."""
    rows = []
    for v in cmp.variants:
        rs = cmp.runs[v.name]
        row: dict[str, Any] = {"variant": v.name, "spec": v.spec,
                               "overrides": [o.label for o in v.overrides],
                               "seeds": [r.seed for r in rs], "metrics": {}}
        for m in cmp.metric_names:
            vals = [r.metrics[m] for r in rs if m in r.metrics]
            if vals:
                row["metrics"][m] = list(stats(vals))
        target = cmp.targets.get(v.name, cmp.target)
        hits = [_to_target(r, target) for r in rs]
        reached = [h for h in hits if h is not None]
        row["target"] = target
        row["reached"] = f"{len(reached)}/{len(rs)}" if target else "-"
        row["steps_to_target"] = list(stats(reached)) if reached else None
        row["steps"] = list(stats([r.steps for r in rs]))
        row["seconds"] = list(stats([r.seconds for r in rs]))
        rows.append(row)
    return rows


def _pm(pair: Sequence[float] | None, digits: int = 3) -> str:
    if pair is None:
        return "-"
    return f"{pair[0]:.{digits}f} ± {pair[1]:.{digits}f}"


def markdown(cmp: Comparison, rows: list[dict[str, Any]] | None = None) -> str:
    """The table as a markdown table (mean ± sd over the seeds)."""
    rows = rows if rows is not None else table(cmp)
    # the targets in the header when every variant has the same, else in a column
    one = all(t == cmp.target for t in cmp.targets.values())
    target = cmp.target if one else {}
    head = ["variant", *(f"{m} (≥ {target[m]:g})" if m in target else m
                         for m in cmp.metric_names),
            *([] if one else ["target"]), "reached", "steps to target", "steps", "seconds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [f"`{row['variant']}`",
                 *(_pm(row["metrics"].get(m)) for m in cmp.metric_names),
                 *([] if one else [", ".join(f"{k} ≥ {x:g}" for k, x in row["target"].items())]),
                 row["reached"], _pm(row["steps_to_target"], 0), _pm(row["steps"], 0),
                 _pm(row["seconds"], 1)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_report(cmp: Comparison, figures: dict[str, str] | None = None) -> dict[str, Path]:
    """Write ``OUT/compare.json`` and ``OUT/compare.md``; their paths by kind."""
    from attngraph.train.store.directory import atomic_write

    rows = table(cmp)
    data = {"task": cmp.task, "target": cmp.target, "metrics": cmp.metric_names,
            "note": "each figure is [mean, sample sd] over the seeds' runs",
            "variants": rows, "diffs": cmp.diffs, "figures": figures or {},
            "runs": {n: [str(r.out) for r in rs] for n, rs in cmp.runs.items()}}
    js, md = cmp.out / "compare.json", cmp.out / "compare.md"
    atomic_write(js, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    parts = [f"# Comparison on the task `{cmp.task}`", "",
             f"Mean ± sample sd over seeds {', '.join(map(str, rows[0]['seeds']))}.", "",
             markdown(cmp, rows)]
    for name, text in cmp.diffs_md.items():
        parts += [f"Diff of `{cmp.variants[0].name}` and `{name}`:", "", text.replace(
            "## ", "#### ").replace("### ", "##### ")]
    for kind, path in (figures or {}).items():
        parts += [f"![{kind}]({Path(path).name})", ""]
    atomic_write(md, "\n".join(parts).encode("utf-8"))
    return {"json": js, "markdown": md}
