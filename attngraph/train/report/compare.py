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
those figures are :mod:`attngraph.train.report.compare_table`'s (re-exported
here), the pictures :mod:`attngraph.train.report.compare_figures`'s.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import AttnGraphError, Diagnostic, SourceLoc, TrainingError
from attngraph.train.report.compare_table import (
    Comparison,
    SeedRun,
    markdown,
    read_run,
    stats,
    table,
    write_report,
)
from attngraph.train.report.variants import Override, Variant, Vary, variants, write_variant
from attngraph.train.store.seeds import SEED_HINT, seed_problem

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

__all__ = ["SeedRun", "Comparison", "compare", "read_run", "table", "markdown",
           "write_report", "stats"]


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
    root = Path(out)
    vs = variants(list(specs), list(sets), list(varies))
    _check_names_and_seeds([v.name for v in vs], seeds)
    loaded = [(v, *_load(v, root)) for v in vs]
    task, target = _check_task([(v, g) for v, g, _, _ in loaded])
    cmp = Comparison(task, target, [], vs, {}, out=root)
    base_v, base_g = loaded[0][0], loaded[0][1]
    for v, g, path, changed in loaded:
        cmp.targets[v.name] = dict(g.train.target) if g.train is not None else {}
        if v is not base_v:
            _add_diff(cmp, base_v, base_g, v, g)
        cmp.runs[v.name] = [
            _seed_run(v, path, seed, root / v.name / f"seed{seed}", reuse=not changed,
                      steps=steps, eval_every=eval_every, overwrite=overwrite,
                      stream=stream, note=note)
            for seed in seeds]
    first = [m for r in cmp.runs[base_v.name] for m in r.metrics]
    every = {m for rs in cmp.runs.values() for r in rs for m in r.metrics}
    cmp.metric_names = sorted(every, key=lambda m: (m not in target, m not in first, m))
    return cmp


def _check_names_and_seeds(names: list[str], seeds: Sequence[int]) -> None:
    """Refuse two variants of one name, no seeds, or a seed out of range."""
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


def _add_diff(cmp: Comparison, base_v: Variant, base_g: Graph, v: Variant, g: Graph) -> None:
    """Record ``v``'s diff against the first variant, as text and as markdown."""
    from attngraph.analysis.diff import diff, render_diff

    d = replace(diff(base_g, g), a=base_v.name, b=v.name)
    # an override the IR diff does not show (an edge's detach) is named too
    given = _given(base_v, v)
    cmp.diffs[v.name] = given + render_diff(d)
    cmp.diffs_md[v.name] = given.replace("\n", "\n\n") + render_diff(d, "markdown")


def _seed_run(v: Variant, path: Path, seed: int, rdir: Path, *, reuse: bool,
              steps: int | None, eval_every: int, overwrite: bool, stream: Any,
              note: Callable[[str], None] | None) -> SeedRun:
    """Variant ``v``'s run at ``seed`` in ``rdir``: the finished run there when it
    was trained as asked (and ``reuse``, its spec unchanged), else trained afresh."""
    from attngraph.train.run.runner import RunConfig, run

    done = rdir / "summary.json"
    if done.is_file() and not overwrite and reuse:
        r = read_run(rdir, seed, reused=True)
        if (steps is None or r.steps == steps) and _evaluated_every(r, eval_every):
            if note is not None:
                note(f"{v.name} seed {seed}: reused {rdir}")
            return r
    cfg = RunConfig(spec=str(path), steps=steps, seed=seed, out=str(rdir),
                    overwrite=overwrite or done.is_file(), quiet=True,
                    eval_every=eval_every)
    summary = run(cfg, stream=stream or io.StringIO())
    r = read_run(rdir, seed)
    if note is not None:
        figures = ", ".join(f"{k} {x:.3f}" for k, x in sorted(summary.metrics.items()))
        note(f"{v.name} seed {seed}: {figures} ({summary.seconds:.1f} s)")
    return r


def _evaluated_every(r: SeedRun, every: int) -> bool:
    """True when a finished run was evaluated as ``every`` asks (0: as train's default)."""
    every = every or max(1, r.steps // 5)
    want = sorted({*range(every, r.steps + 1, every), r.steps})
    return [int(row["step"]) for row in r.curve] == want


def _given(a: Variant, b: Variant) -> str:
    """A line naming the overrides of ``b`` that ``a`` does not share, if any."""
    labels = [o.label for o in b.overrides if o.label not in {x.label for x in a.overrides}]
    return f"{b.name} sets {'; '.join(labels)}\n" if labels else ""


