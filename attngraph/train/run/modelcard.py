"""The model card of a run: ``README.md`` in its directory, a page that explains it.

:func:`card` writes, in markdown, what a reader of a run directory asks first:
the spec (name, title, summary, file), the data (a built-in task and its options,
or the data file, its split and the sizes of both parts, the labels), the
settings, the validation metrics of the weights kept against the spec's target
(and the last evaluation's, when early stopping kept an earlier step), the
attention picture when the directory has one (``attention*.png``: the one
``attngraph train`` draws at the end, or ``attngraph attend``'s), the run's
files, and how to load it from the command line and from Python
(:func:`attngraph.load_run`). It is text generation only; :func:`write_card`
writes it whole, at the end of every run (again on ``--resume``), and never over
a ``README.md`` that is not a model card (the user's own, in a directory trained
into).
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from attngraph.errors import AttnGraphError
from attngraph.fileio import read_bytes
from attngraph.train.store import directory as rundir

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph
    from attngraph.train.run.config import RunConfig
    from attngraph.train.run.record import RunSummary
    from attngraph.train.tasks.base import Task

__all__ = ["CARD_FILE", "PICTURE", "MARK", "card", "pictures", "write_card"]

#: File name of the model card inside a run's output directory.
CARD_FILE = "README.md"
#: how a README.md is read to tell the run's card (a card is a few kilobytes)
_CARD_ROLE = rundir.run_file(CARD_FILE, 1 << 20)
#: The picture ``attngraph train`` draws at the end of a run.
PICTURE = "attention.png"
#: The first line of every model card (a README.md without it is the user's own).
MARK = "<!-- attngraph model card: written by attngraph train, again on --resume -->"


def _code(text: object) -> str:
    """``text`` as inline code (a fence longer than any run of backticks in it)."""
    s = str(text)
    longest = max((len(run) for run in _runs(s, "`")), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{ticks}{pad}{s}{pad}{ticks}"


def _runs(s: str, ch: str) -> list[str]:
    """The runs of ``ch`` in ``s``."""
    out, cur = [], ""
    for c in s:
        if c == ch:
            cur += c
        elif cur:
            out.append(cur)
            cur = ""
    return [*out, cur] if cur else out


def _num(v: float) -> str:
    return "NaN" if math.isnan(v) else f"{v:.4f}"


def _spec_part(graph: Graph, cfg: RunConfig) -> list[str]:
    head = f"# {graph.name}" + (f": {graph.title}" if graph.title else "")
    lines = [MARK, head, ""]
    if graph.summary:
        lines += [" ".join(graph.summary.split()), ""]
    lines += [f"A model trained by `attngraph train` from the spec {_code(cfg.spec)}; "
              "the spec's text is stored in `checkpoint.pt`, so this directory is all a "
              "reader needs.", ""]
    source = _imported_from(Path(cfg.out or ""))
    if source is not None:
        lines += [f"Its weights were brought in by `attngraph import` from {source} "
                  "(`import.json` says how they were mapped), then trained on.", ""]
    return lines


def _imported_from(out: Path) -> str | None:
    """Where an imported run's weights came from (its ``import.json``), in words; None
    for a run that is no import, or whose file does not say."""
    from attngraph.errors import AttnGraphError
    from attngraph.train.store.imported import import_info, is_imported

    if not is_imported(out):
        return None
    try:
        info = import_info(out)
    except AttnGraphError:
        return None
    source, kind = info.get("source"), info.get("model_type")
    if not isinstance(source, str):
        return None
    return _code(source) + (f" (a {_code(kind)} model of `transformers`)"
                            if isinstance(kind, str) else "")


def _data_part(task: Task, cfg: RunConfig, summary: RunSummary) -> list[str]:
    from attngraph.train.data.batches import DataTask

    lines = ["## Data", ""]
    if isinstance(task, DataTask):
        held = (f"the file {_code(cfg.valid)}" if cfg.valid else
                f"a seeded {cfg.valid_fraction:g} of the data (seed {cfg.seed})")
        lines += [f"- data: {_code(cfg.data)}, a {task.enc.kind} run, {task.enc.reads}",
                  f"- split: {len(task.train)} training examples; {len(task.valid)} "
                  f"validation examples, {held}"]
        if task.enc.labels is not None:
            names = ", ".join(_code(n) for n in task.enc.labels.names)
            lines.append(f"- labels ({len(task.enc.labels.names)}): {names}")
        lines.append(f"- {task.enc.kept}")
    else:
        opts = ", ".join(f"{k}={v!r}" for k, v in sorted(task.opts.items())) or "none"
        area = f" ({task.area})" if getattr(task, "area", "") else ""
        drawn = summary.steps * (cfg.batch or 0)
        lines += [f"- task: the built-in task {_code(task.name)}{area}, seed {cfg.seed}; "
                  f"options: {opts}",
                  f"- split: training draws a fresh seeded batch of {cfg.batch} examples "
                  f"each step ({drawn} in all); validation is a fixed held-out set of "
                  f"{cfg.eval_size} examples"]
    return [*lines, ""]


def _settings_part(cfg: RunConfig, summary: RunSummary, patience: int) -> list[str]:
    rows = [("steps", summary.steps), ("batch", cfg.batch), ("learning rate", cfg.lr),
            ("seed", cfg.seed), ("evaluated every", f"{cfg.eval_every} steps")]
    if cfg.epochs:
        rows.append(("epochs", cfg.epochs))
    rows.append(("early stopping", f"--patience {patience}" if patience else "off"))
    rows += [("device", cfg.device + (", bf16" if cfg.bf16 else "")),
             ("processes", summary.world), ("seconds", f"{summary.seconds:.1f}")]
    lines = ["## Settings", "", "| setting | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in rows]
    return [*lines, ""]


def _metrics_part(summary: RunSummary) -> list[str]:
    kept = f"step {summary.best_step}" if summary.best_step is not None else \
        f"step {summary.steps}"
    last = summary.last_metrics
    head = ["metric", f"kept weights ({kept})"]
    if last is not None:
        head.append(f"last evaluation (step {summary.last_step})")
    head.append("target")
    lines = ["## Validation metrics", "", "| " + " | ".join(head) + " |",
             "|" + "---|" * len(head)]
    for k in sorted({*summary.metrics, *summary.target}):
        v = summary.metrics.get(k)
        cells = [_code(k), _num(v) if v is not None else "(missing)"]
        if last is not None:
            cells.append(_num(last[k]) if k in last else "-")
        want = summary.target.get(k)
        cells.append("-" if want is None else
                     f"≥ {want:g}, {'reached' if v is not None and v >= want else 'NOT reached'}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if summary.best_step is not None:
        stop = (f"; training stopped at step {summary.stopped_early}"
                if summary.stopped_early is not None else "")
        lines += [f"Early stopping kept the weights of step {summary.best_step}, the best "
                  f"validation {_code(summary.best_metric)}{stop}. These are the run's "
                  "model: `evaluate`, `predict`, `export` and `load_run` use them.", ""]
    elif summary.stopped_early is not None:
        lines += [f"Training stopped early at step {summary.stopped_early}.", ""]
    return lines


def _picture_part(out: Path, shown: Sequence[Path], note: str | None,
                  drawn: str, data: str | None) -> list[str]:
    lines = ["## Attention", ""]
    for pic in shown:
        said = f"{pic.stem}, {drawn}" if pic.name == PICTURE else pic.stem
        lines += [f"![{said}]({pic.name})", ""]
    if not shown:
        lines += [note or "No attention picture yet.", ""]
    if data is not None:  # a data run keeps no examples: one of the file's, or your own
        lines += [f"Draw another example with `attngraph attend {out} --data {data} "
                  f"--example N`, or your own text with `attngraph attend {out} --input "
                  "\"...\"`.", ""]
    else:
        lines += [f"Draw another example with `attngraph attend {out} --example N`.", ""]
    return lines


def _load_part(out: Path, task: Task) -> list[str]:
    from attngraph.train.data.batches import DataTask

    data = isinstance(task, DataTask)
    lines = ["## Load it", "", "```sh"]
    if data:
        lines += [f"attngraph evaluate {out} --data held-out.jsonl   # metrics on labelled data",
                  f"attngraph predict {out} --data new.jsonl -o preds.jsonl --attention",
                  f'attngraph attend {out} --input "some text"']
    else:
        lines.append(f"attngraph attend {out} --example 3   # what it attended to")
    lines += [f"attngraph export {out} -o model.onnx --format onnx", "```", "", "```python",
              "import attngraph", "", f"run = attngraph.load_run({json.dumps(str(out))})",
              "run.model   # a torch.nn.Module with the kept weights (eval mode)",
              "run.graph   # the spec's graph"]
    if data:
        lines.append('run.predict("new.jsonl", attention=True)   # one dict per example')
    lines += ["```", "", "## Files", "",
              "- `metrics.jsonl`: one JSON line per step (`\"split\": \"train\"`) and per "
              "evaluation (`\"split\": \"valid\"`); `metrics.csv`: the same lines as a table",
              "- `checkpoint.pt`: the weights, the optimiser and random states, the spec's "
              "text (read with `torch.load(weights_only=True)`)",
              "- `summary.json`: the figures above" + (f"; {task.enc.kept}"
                                                      if isinstance(task, DataTask) else ""),
              ""]
    return lines


def _drawn(cfg: RunConfig) -> str:
    """Which example ``attngraph train``'s picture shows."""
    if cfg.data is not None:
        return f"example 0 of {cfg.valid or cfg.data}"
    return "example 0 of the validation set"


def pictures(out: Path) -> list[Path]:
    """The attention pictures in the run directory ``out`` (``attention*.png``), by name."""
    return sorted(p for p in out.glob("attention*.png") if p.is_file() and not p.is_symlink())


def card(summary: RunSummary, cfg: RunConfig, graph: Graph, task: Task, *,
         patience: int = 0, note: str | None = None) -> str:
    """The model card of a finished run, in markdown.

    Parameters
    ----------
    summary : RunSummary
        What the run reached (its metrics are the kept weights').
    cfg : RunConfig
        Its settings, every one filled in.
    graph, task :
        The spec's graph and the task it trained on.
    patience : int
        The early stopping patience in effect (0: off).
    note : str, optional
        Said in place of a picture when the directory has none (why).
    """
    out = Path(cfg.out or "")
    parts = [_spec_part(graph, cfg), _data_part(task, cfg, summary),
             _metrics_part(summary), _settings_part(cfg, summary, patience),
             _picture_part(out, pictures(out), note, _drawn(cfg), cfg.valid or cfg.data),
             _load_part(out, task)]
    return "\n".join(line for part in parts for line in part).rstrip("\n") + "\n"


def _not_ours(path: Path) -> str:
    """What ``path`` is when it is no file of the run to replace: a symbolic link, a
    directory, a FIFO...; "" for a regular file."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
    return ""


def _leave(path: Path, what: str, stream: TextIO) -> Path | None:
    """Say on ``stream`` that the README.md at ``path`` (``what`` it is) is left as it is;
    None: no card written."""
    stream.write(f"{path}: note: left this README.md as it is ({what}); the run's figures "
                 "are in summary.json\n")
    return None


def write_card(out: Path, text: str, stream: TextIO) -> Path | None:
    """Write ``text`` to ``out/README.md`` whole; a README.md that is not a model card
    (the user's own, a link, a directory, a FIFO) is left as it was, with a note on
    ``stream``, so that a run never fails at its end on its card. Returns the path
    written, or None."""
    path = out / CARD_FILE
    if path.exists() or path.is_symlink():
        what = _not_ours(path)
        if what:  # never written through a link, never opened if it may block
            return _leave(path, what, stream)
        try:  # the guarded reader: a file swapped for a FIFO cannot hang it
            first = read_bytes(path, _CARD_ROLE)[:len(MARK.encode("utf-8"))]
        except AttnGraphError:  # unreadable, or larger than any card: not the run's
            return _leave(path, "unreadable or larger than a card", stream)
        if first != MARK.encode("utf-8"):
            return _leave(path, "not a model card", stream)
    rundir.atomic_write(path, text.encode("utf-8"))
    return path
