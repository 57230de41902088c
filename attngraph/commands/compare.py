"""``attngraph compare``: several specs, or one under variations, over several seeds."""

from __future__ import annotations

import sys
from typing import Any

import click

from attngraph.cli import main, run_stage
from attngraph.train.store.seeds import SEED_HINT, seed_problem


def _seeds(_ctx: Any, _param: Any, value: str) -> list[int]:
    """``--seeds 0,1,2`` as a list of distinct integers."""
    try:
        seeds = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        msg = f"{value!r} is not a comma-separated list of integers (e.g. 0,1,2)"
        raise click.BadParameter(msg) from None
    if not seeds or len(set(seeds)) != len(seeds):
        msg = f"{value!r}: give at least one seed, each once (e.g. 0,1,2)"
        raise click.BadParameter(msg)
    for s in seeds:
        problem = seed_problem(s)
        if problem is not None:
            msg = f"{problem}: {SEED_HINT}"
            raise click.BadParameter(msg)
    return seeds


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--set", "sets", multiple=True, metavar="PATH=VALUE",
              help="Override a spec's field in every variant, e.g. nodes.score.fn=dot "
              "(keys joined by dots, the value read as YAML); repeatable.")
@click.option("--vary", "varies", multiple=True, metavar="NAME:PATH=V1,V2",
              help="Train each spec once per value of PATH, named NAME=V; several "
              "paths joined by + take the same value (heads:nodes.q.heads+nodes.k.heads=1,4); "
              "repeatable (every combination).")
@click.option("--seeds", default="0,1,2", show_default=True, callback=_seeds,
              help="Seeds, comma-separated (each 0 to 2**32-1): one run per variant and seed.")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Training steps of every run [default: each spec's own].")
@click.option("--eval-every", type=click.IntRange(min=0), default=0,
              help="Test metrics every this many steps [default: steps/5]; finer gives "
              "finer learning curves and steps to target.")
@click.option("--out", "out", type=click.Path(file_okay=False), default="runs/compare",
              show_default=True, help="Folder of the runs (OUT/VARIANT/seedK/), the "
              "tables and the pictures.")
@click.option("--example", type=click.IntRange(min=0), default=0, show_default=True,
              help="The validation example whose attention is drawn.")
@click.option("--overwrite", is_flag=True,
              help="Train every run afresh (an earlier one is moved aside), instead of "
              "reusing the finished runs of unchanged specs.")
@click.option("--verbose", is_flag=True, help="Show each run's progress lines on stderr.")
@run_stage
def compare(specs: tuple[str, ...], sets: tuple[str, ...], varies: tuple[str, ...],
            seeds: list[int], steps: int | None, eval_every: int, out: str, example: int,
            overwrite: bool, verbose: bool) -> None:
    """Train SPECS (or one spec under --vary) over --seeds and compare them.

    Every run is an ordinary run directory OUT/VARIANT/seedK/ (attend, evaluate
    and predict read it); a finished run of an unchanged spec is reused. Prints
    each variant's diff against the first and a table of every validation metric
    (mean ± sd over the seeds), the seeds that reached the spec's target, the
    steps to reach it, steps and seconds; writes OUT/compare.json,
    OUT/compare.md, the learning curves OUT/curves.png and the attention
    pictures side by side OUT/attention.png.
    """
    from pathlib import Path

    from attngraph.train.report.compare import compare as run_compare
    from attngraph.train.report.compare import markdown, write_report
    from attngraph.train.report.compare_figures import attention, curves
    from attngraph.train.report.variants import parse_set, parse_vary

    overrides = [parse_set(s) for s in sets]
    variables = [parse_vary(v) for v in varies]
    cmp = run_compare(list(specs), seeds=seeds, out=out, sets=overrides, varies=variables,
                      steps=steps, eval_every=eval_every, overwrite=overwrite,
                      stream=sys.stderr if verbose else None,
                      note=lambda line: click.echo(line, err=True))
    for name, text in cmp.diffs.items():
        click.echo(f"# diff: {cmp.variants[0].name} -> {name}")
        click.echo(text.rstrip("\n"))
        click.echo("")
    root = Path(out)
    figures = {"curves": str(curves(cmp, root / "curves.png"))}
    pic, notes = attention(cmp, root / "attention.png", example=example)
    figures["attention"] = str(pic)
    for line in notes:
        click.echo(line, err=True)
    files = write_report(cmp, figures)
    click.echo(f"task {cmp.task}, mean ± sd over seeds {','.join(map(str, seeds))}:")
    click.echo(markdown(cmp).rstrip("\n"))
    for kind, path in {**{k: str(v) for k, v in files.items()}, **figures}.items():
        click.echo(f"{kind + ':':<10} {path}")
