"""``attngraph compare``: train several specs, or one under variations, over seeds.

:func:`compare` makes the variants (:mod:`attngraph.train.report.variants`), writes
each one's spec to ``OUT/<variant>/spec.yaml``, checks that they all train on
the same task, and trains every variant at every seed with the one training
run there is (:func:`attngraph.train.run.runner.run`) into
``OUT/<variant>/seed<k>/``: ordinary run directories, which ``attngraph
attend``, ``evaluate`` and ``predict`` read. A finished run whose spec is
unchanged is reused rather than trained again (so a comparison can be extended
by a seed or a variant); one whose spec changed is refused unless
``overwrite``, which moves it aside as ``train --overwrite`` does.

The figures are read back from each run's own files: the final validation metrics
are the last ``"split": "valid"`` line of ``metrics.jsonl`` (``"test"`` in a run an
earlier version wrote), the steps and seconds
come from ``summary.json``. :func:`table` gives, per variant, the mean and the
sample standard deviation (n - 1; 0 for one seed) of every metric over the
seeds, how many seeds reached the spec's target, the first evaluated step at
which each did ("steps to target", a measure of learning speed), and the steps
and seconds. :func:`write_report` writes ``compare.json`` and ``compare.md``;
the pictures are :mod:`attngraph.train.report.compare_figures`'s.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import AttnGraphError, Diagnostic, SourceLoc, TrainingError
from attngraph.fileio import excerpt_text, lines, loads_json, read_json, read_text
from attngraph.train.report.variants import Override, Variant, Vary, variants, write_variant
from attngraph.train.store.directory import run_file
from attngraph.train.store.seeds import SEED_HINT, seed_problem

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

#: The split names of a validation line: ``test`` in runs of earlier versions.
_VALID = ("valid", "test")

__all__ = ["SeedRun", "Comparison", "compare", "read_run", "table", "markdown",
           "write_report", "stats"]


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


def _located(exc: AttnGraphError, variant: Variant) -> AttnGraphError:
    """``exc`` with a note naming the variant and its overrides."""
    notes = [Diagnostic(o.loc(), f"variant '{variant.name}' sets {o.label} here")
             for o in variant.overrides]
    return type(exc)("", diagnostics=[*exc.diagnostics, *notes])


def _load(variant: Variant, out: Path) -> tuple[Graph, Path, bool]:
    """Write and load a variant's spec: ``(graph, spec file, changed)``."""
    from attngraph.frontend import load_spec
    from attngraph.spectext import read_text

    try:
        text = read_text(variant.spec, 2_000_000)
        path, changed = write_variant(variant, text, variant.spec, out / variant.name)
        if not variant.overrides:  # errors then point at the user's own file
            path = Path(variant.spec)
        return load_spec(path, allow_large=True), path, changed
    except AttnGraphError as exc:
        if not variant.overrides:
            raise
        raise _located(exc, variant) from None


def _check_task(graphs: list[tuple[Variant, Graph]]) -> tuple[str, dict[str, float]]:
    """The one task every variant trains on, and the first's target."""

    first_v, first = graphs[0]
    for v, g in graphs:
        if g.train is None:
            msg = f"variant '{v.name}' has no train: section, so no task to compare on"
            raise TrainingError(msg, SourceLoc(g.file), "add train: {task: NAME, steps: N}")
    task = first.train.task if first.train is not None else ""
    for v, g in graphs[1:]:
        other = g.train.task if g.train is not None else ""
        if other != task:
            msg = (f"variant '{v.name}' trains on the task '{other}', but '{first_v.name}' "
                   f"on '{task}': their metrics do not compare")
            raise TrainingError(msg, g.where("train", "task"),
                                f"compare specs of one task, or set it: --set train.task={task}")
    return task, dict(first.train.target) if first.train is not None else {}


def compare(specs: Sequence[str], *, seeds: Sequence[int] = (0, 1, 2),
            out: str | Path = "runs/compare", sets: Sequence[Override] = (),
            varies: Sequence[Vary] = (), steps: int | None = None,
            eval_every: int = 0, overwrite: bool = False, stream: Any = None,
            note: Callable[[str], None] | None = None) -> Comparison:
    """Train every variant at every seed (or reuse its finished run); read them back.

    Parameters
    ----------
    specs : sequence of str
        Spec files; with ``varies``, each is trained under every combination.
    seeds : sequence of int
        The seeds, each a run per variant.
    out : str or Path
        The comparison's folder: ``OUT/<variant>/seed<k>/`` and the reports.
    sets, varies : sequence
        Overrides for every variant, and the variables (see
        :mod:`attngraph.train.report.variants`).
    steps : int, optional
        Training steps of every run [default: each spec's own].
    eval_every : int
        Validation metrics every this many steps (0: a fifth of the steps, as ``train``);
        finer evaluation measures the steps to the target more finely.
    overwrite : bool
        Train afresh where a run is (moved aside first), instead of reusing it.
    stream : file, optional
        Where the runs' progress lines go (default: nowhere).
    note : callable, optional
        Called with one line per run trained or reused.

    Returns
    -------
    Comparison

    Raises
    ------
    AttnGraphError
        A bad override (located in its text, and in the variant's spec), specs
        of different tasks, two variants of one name, or any error of training.
    """
    import io

    from attngraph.analysis.diff import diff, render_diff
    from attngraph.train.run.runner import RunConfig, run

    root = Path(out)
    vs = variants(list(specs), list(sets), list(varies))
    names = [v.name for v in vs]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        msg = f"two variants are both named '{dup}'"
        raise TrainingError(msg, SourceLoc(dup), "give each spec its own file name")
    if not seeds:
        msg = "no seeds given"
        raise TrainingError(msg, SourceLoc("--seeds"), "e.g. --seeds 0,1,2")
    for seed in seeds:
        problem = seed_problem(seed)
        if problem is not None:
            raise TrainingError(problem, SourceLoc("--seeds"), SEED_HINT)
    loaded = [(v, *_load(v, root)) for v in vs]
    task, target = _check_task([(v, g) for v, g, _, _ in loaded])
    cmp = Comparison(task, target, [], vs, {}, out=root)
    base_v, base_g = loaded[0][0], loaded[0][1]
    for v, g, path, changed in loaded:
        cmp.targets[v.name] = dict(g.train.target) if g.train is not None else {}
        if v is not base_v:
            d = replace(diff(base_g, g), a=base_v.name, b=v.name)
            # an override the IR diff does not show (an edge's detach) is named too
            given = _given(base_v, v)
            cmp.diffs[v.name] = given + render_diff(d)
            cmp.diffs_md[v.name] = given.replace("\n", "\n\n") + render_diff(d, "markdown")
        runs = []
        for seed in seeds:
            rdir = root / v.name / f"seed{seed}"
            done = rdir / "summary.json"
            if done.is_file() and not overwrite and not changed:
                r = read_run(rdir, seed, reused=True)
                if (steps is None or r.steps == steps) and _evaluated_every(r, eval_every):
                    runs.append(r)
                    if note is not None:
                        note(f"{v.name} seed {seed}: reused {rdir}")
                    continue
            cfg = RunConfig(spec=str(path), steps=steps, seed=seed, out=str(rdir),
                            overwrite=overwrite or done.is_file(), quiet=True,
                            eval_every=eval_every)
            summary = run(cfg, stream=stream or io.StringIO())
            runs.append(read_run(rdir, seed))
            if note is not None:
                figures = ", ".join(f"{k} {x:.3f}" for k, x in sorted(summary.metrics.items()))
                note(f"{v.name} seed {seed}: {figures} ({summary.seconds:.1f} s)")
        cmp.runs[v.name] = runs
    first = [m for r in cmp.runs[base_v.name] for m in r.metrics]
    every = {m for rs in cmp.runs.values() for r in rs for m in r.metrics}
    cmp.metric_names = sorted(every, key=lambda m: (m not in target, m not in first, m))
    return cmp


def _evaluated_every(r: SeedRun, every: int) -> bool:
    """True when a finished run was evaluated as ``every`` asks (0: as train's default)."""
    every = every or max(1, r.steps // 5)
    want = sorted({*range(every, r.steps + 1, every), r.steps})
    return [int(row["step"]) for row in r.curve] == want


def _given(a: Variant, b: Variant) -> str:
    """A line naming the overrides of ``b`` that ``a`` does not share, if any."""
    labels = [o.label for o in b.overrides if o.label not in {x.label for x in a.overrides}]
    return f"{b.name} sets {'; '.join(labels)}\n" if labels else ""


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
