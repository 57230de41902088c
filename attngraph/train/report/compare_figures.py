"""The pictures of ``attngraph compare``: learning curves, attention side by side.

:func:`curves` draws, for every validation metric and for the training loss, one
panel with a line per variant: the mean over its seeds at each evaluated step,
and a band of ± one sample standard deviation. :func:`attention` draws each
variant's attention on one validation example with
:func:`attngraph.train.pictures.attend.attend_run`
(the picture ``attngraph attend`` makes, from the variant's first seed), then
sets those pictures side by side in one figure. matplotlib (Agg) is imported
only here.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

from attngraph.errors import AttnGraphError, SourceLoc, TrainingError
from attngraph.fileio import write_file
from attngraph.train.report.compare import SeedRun, stats

if TYPE_CHECKING:
    from attngraph.train.report.compare import Comparison

__all__ = ["curves", "attention", "mean_curve"]


def mean_curve(runs: list[SeedRun], metric: str, *, split: str = "valid"
               ) -> tuple[list[int], list[float], list[float]]:
    """``(steps, means, sds)`` of ``metric`` over the runs, at the steps all of them logged.

    >>> a = SeedRun(0, Path(), {}, 2, 0.0, [{"step": 1, "m": 0.0}, {"step": 2, "m": 1.0}], [])
    >>> b = SeedRun(1, Path(), {}, 2, 0.0, [{"step": 1, "m": 1.0}, {"step": 2, "m": 1.0}], [])
    >>> mean_curve([a, b], "m")
    ([1, 2], [0.5, 1.0], [0.7071067811865476, 0.0])
    """
    tables = [{int(row["step"]): row[metric] for row in (r.train if split == "train" else r.curve)
               if metric in row} for r in runs]
    common = sorted(set.intersection(*(set(t) for t in tables))) if tables else []
    pairs = [stats([t[s] for t in tables]) for s in common]
    return common, [p[0] for p in pairs], [p[1] for p in pairs]


def _save(fig: object, path: Path) -> None:
    """Save a figure, a failed write as one located error."""
    def refused(exc: OSError) -> TrainingError:
        msg = f"cannot write the picture: {exc.strerror or exc}"
        return TrainingError(msg, SourceLoc(str(path)), "compare into a folder you can "
                             "write: --out DIR")

    buf = io.BytesIO()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(buf, format=path.suffix[1:].lower() or None,  # type: ignore[attr-defined]
                    dpi=110)
    except OSError as exc:
        raise refused(exc) from None
    write_file(path, buf.getvalue(), failed=lambda _p, exc: refused(exc))


def curves(cmp: Comparison, path: Path) -> Path:
    """Learning curves of every variant, one panel per validation metric plus training loss."""
    from attngraph.train.pictures.plot import pyplot

    plt = pyplot()
    panels = [("valid", m) for m in cmp.metric_names] + [("train", "loss")]
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    try:
        for ax, (split, metric) in zip(axes.flat, panels, strict=False):
            for i, v in enumerate(cmp.variants):
                steps, mean, sd = mean_curve(cmp.runs[v.name], metric, split=split)
                if not steps:
                    continue
                colour = f"C{i % 10}"
                ax.plot(steps, mean, color=colour, label=v.name)
                ax.fill_between(steps, [m - s for m, s in zip(mean, sd, strict=True)],
                                [m + s for m, s in zip(mean, sd, strict=True)],
                                color=colour, alpha=0.2, linewidth=0)
            want = cmp.target.get(metric) if split == "valid" else None
            if want is not None:
                ax.axhline(want, color="grey", linestyle=":", linewidth=1)
            ax.set_title(f"{split} {metric}", fontsize=9)
            ax.set_xlabel("step", fontsize=8)
            ax.tick_params(labelsize=7)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        n = len(next(iter(cmp.runs.values())))
        axes.flat[0].legend(fontsize=7)
        fig.suptitle(f"{cmp.task}: mean ± sd over {n} seed{'s' if n > 1 else ''}", fontsize=10)
        fig.tight_layout()
        _save(fig, path)
    finally:
        plt.close(fig)
    return path


def attention(cmp: Comparison, path: Path, *, example: int = 0) -> tuple[Path, list[str]]:
    """Each variant's attention picture (its first seed's run), side by side in ``path``.

    Returns the path and a note per variant that has no picture (a spec without
    an attention output), which is left out rather than failing the comparison.
    """
    from attngraph.train.pictures.attend import attend_run
    from attngraph.train.pictures.plot import pyplot

    plt = pyplot()
    shots, notes = [], []
    for v in cmp.variants:
        run = cmp.runs[v.name][0]
        try:
            pic, _ = attend_run(run.out, example=example, out=run.out / f"attention_{example}.png")
        except AttnGraphError as exc:
            notes.append(f"{v.name}: no attention picture ({exc.message})")
            continue
        shots.append((v.name, pic))
    if not shots:
        msg = "no variant has an attention output to draw"
        raise TrainingError(msg, SourceLoc(str(cmp.variants[0].spec)),
                            "declare an output named attention (or weights, locations)")
    images = [plt.imread(pic) for _, pic in shots]
    tall = max(im.shape[0] / im.shape[1] for im in images)  # a words strip is low
    fig, axes = plt.subplots(1, len(shots), figsize=(5.0 * len(shots), 5.0 * tall + 0.5),
                             squeeze=False)
    try:
        for ax, (name, _), image in zip(axes.flat, shots, images, strict=True):
            ax.imshow(image)
            ax.set_title(f"{name} (seed {cmp.runs[name][0].seed}, example {example})",
                         fontsize=9)
            ax.axis("off")
        fig.tight_layout()
        _save(fig, path)
    finally:
        plt.close(fig)
    return path, notes
