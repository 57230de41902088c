"""``attngraph export SPEC -o FILE``: the compiled model as a file that runs without attngraph."""

from __future__ import annotations

from typing import Any

import click

from attngraph.cli import main, run_stage, spec_argument, write_output
from attngraph.commands.compile import MAX_BATCH, MAX_LENGTH, MAX_SEED


@main.command("export")
@spec_argument
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Where to write the program (e.g. model.pt2, model.py).")
@click.option("--format", "fmt", type=click.Choice(["pt2", "python"]), default="pt2",
              show_default=True,
              help="pt2: a torch.export program (torch.export.load reads it). python: a "
                   "readable PyTorch module file that imports torch only, without weights "
                   "(it loads the compiled model's state dict).")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True,
              help="Initialisation seed (0 to 2**63-1).")
@click.option("--batch", type=click.IntRange(2, MAX_BATCH), default=2, show_default=True,
              help=f"Batch of the example the program is traced on (2 to {MAX_BATCH}).")
@click.option("--length", type=click.IntRange(2, MAX_LENGTH), default=8, show_default=True,
              help=f"Size of every symbolic length in that example (2 to {MAX_LENGTH}).")
@click.option("--allow-large", is_flag=True, help="Accept specs over the size limits.")
@run_stage
def export_cmd(spec: str, output: str, fmt: str, seed: int, batch: int, length: int,
               allow_large: bool) -> None:
    """Export SPEC's compiled model (eval mode, fresh weights of --seed) to FILE.

    The batch and every symbolic length (N, T, ...) are left dynamic where the model
    allows: a recurrence run by steps (an rnn over items, a loop) fixes the lengths
    at --length. The command says which. Load the program with
    ``torch.export.load(FILE).module()`` and call it with the inputs by name.

    With --format python, FILE is the model's PyTorch source instead (what
    ``model.code`` shows): one class per concept, a forward with one statement per
    node, the same outputs; it takes the compiled model's state dict (--seed,
    --batch and --length do not change it).
    """
    import io

    import torch

    from attngraph.lower import compile as lower
    from attngraph.lower.export import export_program
    from attngraph.pipeline import load_spec

    graph = load_spec(spec, allow_large=allow_large, batch=batch, length=length)
    model = lower(graph, seed=seed)
    if fmt == "python":
        _write_python(model, output)
        return
    done = export_program(model, batch=batch, length=length, seed=seed)
    buf = io.BytesIO()
    torch.export.save(done.program, buf)
    write_output(output, buf.getvalue())
    symbols = sorted({d for n in graph.inputs for t in n.types.values() for d in t.dims
                      if isinstance(d, str)})
    what = ["batch " + ("dynamic" if done.batch_dynamic else f"fixed at {batch}")]
    if symbols:
        names = ", ".join(symbols)
        what.append(f"lengths {names} dynamic" if done.lengths_dynamic else
                    f"lengths {names} fixed at {length} (a recurrence runs by steps "
                    "while exporting)")
    args = ", ".join(done.example)
    click.echo(f"wrote {output}: torch.export program of {graph.name} ({fmt}); "
               + "; ".join(what))
    click.echo(f"run it: torch.export.load('{output}').module()({args})")


def _write_python(model: Any, output: str) -> None:
    """Write ``model.code`` to ``output`` and say how to run it."""
    from pathlib import Path

    from attngraph.lower.codegen import class_name

    write_output(output, model.code)
    graph = model.graph
    cls = class_name(graph.name)
    args = ", ".join(model.binder.signature().parameters)
    click.echo(f"wrote {output}: PyTorch module {cls} of {graph.name} (python; imports torch "
               "only, parameters empty)")
    click.echo(f"run it: from {Path(output).stem} import {cls}; model = {cls}(); "
               "model.load_state_dict(state_dict); model.eval(); "
               f"model({args})")
    click.echo("  (state_dict: torch.save(attngraph.compile(SPEC, seed=...).state_dict(), "
               "...) or a trained run's)")
