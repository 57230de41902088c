"""``attngraph train``, ``attngraph attend`` and ``attngraph catalog``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from attngraph.cli import main, run_stage, spec_argument
from attngraph.train.store.seeds import MAX_SEED

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph


def _fields(_ctx: Any, _param: Any, value: tuple[str, ...]) -> dict[str, str]:
    """``--field INPUT=COLUMN`` options as a dict."""
    out = {}
    for item in value:
        key, eq, col = item.partition("=")
        if not eq or not key.strip() or not col.strip():
            msg = f"{item!r} is not INPUT=COLUMN (e.g. --field tokens=text)"
            raise click.BadParameter(msg)
        out[key.strip()] = col.strip()
    return out


def device_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``--device`` and ``--bf16``, shared by train, evaluate and predict."""
    fn = click.option("--bf16", is_flag=True,
                      help="bfloat16 autocast for the forward passes.")(fn)
    return click.option("--device", type=click.Choice(["cpu", "cuda", "mps", "auto"]),
                        default="cpu", show_default=True,
                        help="Where to run (auto: cuda when there is one, else cpu).")(fn)


@main.command()
@spec_argument
@click.option("--task", default=None, help="Built-in task [default: the spec's train.task].")
@click.option("--data", type=click.Path(), default=None,
              help="Train on your own data instead of a task: a .csv, .jsonl, .parquet, "
              "a .tsv/.txt of source<TAB>target pairs, or a folder of class folders of "
              "images (docs/data.md).")
@click.option("--valid", type=click.Path(), default=None,
              help="Validation data [default: a seeded --valid-fraction of --data].")
@click.option("--valid-fraction", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
              default=0.1, show_default=True, help="Share of --data held out for validation.")
@click.option("--field", "fields", multiple=True, callback=_fields, metavar="INPUT=COLUMN",
              help="Read the spec's input (or 'label') from this column; repeatable "
              "[default: the column named like the input].")
@click.option("--tokenize", type=click.Choice(["word", "char"]), default="word",
              show_default=True, help="Split text into words (lower-cased, punctuation "
              "apart) or characters.")
@click.option("--truncate", is_flag=True,
              help="A model of attngraph import reads a text longer than its positions by "
              "its first tokens, as its tokenizer truncates, instead of refusing it (a "
              "warning says how many).")
@click.option("--blocks", type=click.IntRange(min=2), default=None, metavar="N",
              help="A language model of attngraph import reads its records as a corpus: "
              "their texts joined (each closed by the end id) and cut into blocks of N "
              "tokens, at most its positions.")
@click.option("--epochs", type=click.IntRange(min=1), default=None,
              help="Passes over --data (sets --steps; evaluates every epoch); with "
              "--resume, the total to train on to.")
@click.option("--patience", type=click.IntRange(min=0), default=0, show_default=True,
              help="Stop after this many evaluations without a better validation figure "
              "(the task's first metric), keeping the best evaluation's weights as the "
              "run's model; 0 never stops early.")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Training steps: the total, also with --resume [default: the spec's; "
              "with --resume, the run's own].")
@click.option("--batch", type=click.IntRange(min=1), default=None,
              help="Examples per step, over all processes [default: the spec's].")
@click.option("--lr", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="Learning rate [default: the spec's].")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True,
              help=f"Seeds the parameters and the task's data (0 to {MAX_SEED}).")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Run directory for metrics.jsonl/.csv, checkpoint.pt, summary.json, "
              "attention.png and the model card README.md [default: runs/NAME].")
@click.option("--resume", is_flag=True,
              help="Continue from OUT/checkpoint.pt on to the total --steps/--epochs "
              "(same results as one straight run); a total already reached is refused.")
@click.option("--overwrite", is_flag=True,
              help="Start afresh in an OUT that holds a run, after moving that run aside "
              "to OUT.old-TIME (nothing is deleted).")
@click.option("--nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes for data-parallel training (torch.distributed, gloo).")
@click.option("--eval-every", type=click.IntRange(min=0), default=0,
              help="Validation metrics every this many steps [default: steps/5; with "
              "--epochs, every epoch].")
@click.option("--quiet", is_flag=True,
              help="No progress bar: a line every steps/10 steps instead.")
@device_options
@run_stage
def train(spec: str, task: str | None, data: str | None, valid: str | None,
          valid_fraction: float, fields: dict[str, str], tokenize: str, truncate: bool,
          blocks: int | None, epochs: int | None,
          patience: int, steps: int | None, batch: int | None,
          lr: float | None, seed: int, out: str | None, resume: bool, overwrite: bool,
          nproc: int, eval_every: int, quiet: bool, device: str, bf16: bool) -> None:
    """Train SPEC on a built-in task or on --data; write metrics and checkpoints.

    Settings not given come from the spec's train: section. Progress goes to
    stderr (a bar on a terminal), the summary to stdout. OUT explains itself:
    its README.md is a model card (the spec, the data and its split, the
    settings, the validation metrics, the attention picture, how to load it),
    and metrics.csv is the log as a table. An OUT that holds a run
    is never overwritten: continue it with --resume, or move it aside with
    --overwrite. With --data, the vocabularies and labels built from the
    training split are saved in OUT/data.json; then `attngraph evaluate` and
    `attngraph predict` read new data the same way. A run of `attngraph import`
    given --resume --data is fine-tuned on the records read by its own
    tokenizer (docs/real-models.md); it takes the --lr and --batch given, where
    a trained run refuses ones other than its own.
    """
    from attngraph.train.run.runner import RunConfig

    if task is not None and data is not None:
        click.echo("attngraph: error: give --task or --data, not both", err=True)
        raise SystemExit(2)
    if epochs is not None and steps is not None:
        click.echo("attngraph: error: give --epochs or --steps, not both", err=True)
        raise SystemExit(2)
    if (valid is not None or epochs is not None) and data is None and not resume:
        click.echo("attngraph: error: --valid and --epochs need --data", err=True)
        raise SystemExit(2)
    cfg = RunConfig(spec=spec, task=task, steps=steps, batch=batch, lr=lr, seed=seed,
                    out=out, resume=resume, overwrite=overwrite, quiet=quiet,
                    eval_every=eval_every, data=data, valid=valid,
                    valid_fraction=valid_fraction, fields=fields, tokenize=tokenize,
                    truncate=truncate, blocks=blocks, epochs=epochs, patience=patience,
                    device=device, bf16=bf16, picture=True)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ and nproc == 1:
        from attngraph.train.run.distributed import from_env

        summary = from_env(cfg)  # started by torchrun
        if int(os.environ["RANK"]) != 0:
            return
    else:
        from attngraph.train.run.distributed import launch

        summary = launch(cfg, nproc)
    click.echo(summary.format())


@main.command()
@click.argument("run_dir", type=click.Path(file_okay=False, exists=True))
@click.option("--example", type=click.IntRange(min=0), default=0, show_default=True,
              help="Which example of the run's validation batch (of --data when given).")
@click.option("--input", "text", default=None,
              help="Your own example: text for the run's text input (a run trained with "
              "--data, or written by attngraph import).")
@click.option("--data", type=click.Path(), default=None,
              help="Draw --example of this data file (a run trained with --data).")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              help="Picture file (png, svg, pdf); a missing directory is made "
              "[default: RUN_DIR/attention_EXAMPLE.png].")
@click.option("--query", type=click.IntRange(min=0), default=0, show_default=True,
              help="The query node of a graph picture.")
@click.option("--layer", "layers", type=click.IntRange(min=0), multiple=True,
              help="A layer to draw, of a run written by attngraph import (repeat the "
              "option for several) [default: every layer].")
@click.option("--head", "heads", type=click.IntRange(min=0), multiple=True,
              help="A head to draw, of a run written by attngraph import (repeat the "
              "option for several) [default: every head].")
@run_stage
def attend(run_dir: str, example: int, text: str | None, data: str | None,
           output: str | None, query: int, layers: tuple[int, ...],
           heads: tuple[int, ...]) -> None:
    """Draw what the model trained in RUN_DIR attended to on one example.

    Words coloured by weight, a translation's alignment matrix, the glimpse path
    over an image, a decoder's weights over an image's tiles at each step (one
    panel per token emitted), a node's neighbours in a graph, a memory's write
    and read heads over its slots, a handwriting window over the string beside
    the pen's path, or a canvas drawn step by step with its read and write
    windows (DRAW), after the spec's outputs.
    The example is one of the run's validation batch, of --data, or your own --input.
    A run written by attngraph import is drawn over --input (or the text of record
    --example of --data), every layer (rows) and head (columns), tokenized by the
    run's tokenizer/ (else read as ids).
    """
    from attngraph.train.pictures.attend import attend_run

    path, view = attend_run(run_dir, example=example, out=output, query=query,
                            text=text, data=data, layers=layers, heads=heads)
    click.echo(f"{path} ({view})")


def _axes_summary(graph: Graph) -> str:
    """``hardness/basis/reach`` of the attention sites (repeats counted), ``;``-separated."""
    from collections import Counter

    from attngraph.analysis.describe import describe

    sites = describe(graph).sites
    counts = Counter("/".join(s.axes[k].value for k in ("hardness", "basis", "reach")
                              if k in s.axes) for s in sites)
    return "; ".join(f"{n}× {a}" if n > 1 else a for a, n in counts.items()) \
        or "no attention site"


def _builtin_specs() -> Path:
    """The catalog folder: ./specs when there is one, else the one beside the package."""
    here = Path("specs")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parent.parent.parent / "specs"


@main.command()
@click.option("--dir", "spec_dir", type=click.Path(file_okay=False, exists=True),
              default=None, help="Folder of catalog specs [default: ./specs, else the "
              "catalog that comes with attngraph].")
@run_stage
def catalog(spec_dir: str | None) -> None:
    """List the catalog: one line per spec (name, title, axes, application area, task)."""
    from attngraph.cli import echo_error
    from attngraph.errors import AttnGraphError
    from attngraph.frontend import load_spec
    from attngraph.train.tasks.lookup import TASKS

    folder = Path(spec_dir) if spec_dir is not None else _builtin_specs()
    files = sorted(folder.glob("*.yaml"))
    if not files:
        click.echo(f"no specs in {folder}", err=True)
        return
    rows, bad = [], 0
    for f in files:
        try:
            g = load_spec(f)
        except AttnGraphError as exc:
            echo_error(exc)
            bad += 1
            continue
        task = g.train.task if g.train is not None else "-"
        area = TASKS[task].area if task in TASKS else ""
        rows.append((g.name, g.title or "", _axes_summary(g), task, area or "-"))
    if rows:
        wn, wt, wa, wr = (max(len(r[i]) for r in rows) for i in (0, 1, 2, 4))
        for name, title, axes, task, area in rows:
            click.echo(f"{name:<{wn}}  {title:<{wt}}  {axes:<{wa}}  {area:<{wr}}  {task}")
    if bad:
        click.echo(f"{bad} of {len(files)} specs have errors", err=True)
        raise SystemExit(1)
