"""``attngraph import``: a real model's weights into a run directory (docs/real-models.md)."""

from __future__ import annotations

import click

from attngraph.cli import main, run_stage


@main.command("import")
@click.argument("source", type=click.Path(exists=True))
@click.option("--out", "out", type=click.Path(file_okay=False), required=True,
              help="The run directory to write (predict, evaluate, attend, describe and "
              "export read it; train --resume --data fine-tunes it on your records).")
@click.option("--spec", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The spec to read the model into, its name map beside it as "
              "NAME.names.yaml [default: the spec of specs/real/ for the model's model_type].")
@click.option("--config", type=click.Path(dir_okay=False, exists=True), default=None,
              help="The model's config.json [default: the one in SOURCE or beside it].")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="The run's seed for training on from the import.")
@run_stage
def import_(source: str, out: str, spec: str | None, config: str | None, seed: int) -> None:
    """Read the model in SOURCE (a transformers model directory or a safetensors file)
    into its spec and write it as a run directory.

    Every tensor of the checkpoint must fill one parameter of the spec through the
    spec's name map, in the parameter's shape; a missing, extra or wrongly-shaped
    tensor is refused with both names and both shapes. A model past the limit of
    specs (100M parameters) imports, and its run loads, when the machine has twice
    its weights' size free. Reading safetensors files
    needs the `real` extra (pip install 'attngraph[real]'); transformers itself is
    needed only to use the model's tokenizer.
    """
    from attngraph.realmodels.rundir import import_model

    imp = import_model(source, out, spec=spec, config=config, seed=seed)
    n = sum(p.numel() for p in imp.model.parameters())
    dims = ", ".join(f"{k}={v}" for k, v in imp.dims.items())
    click.echo(f"{out}: {imp.graph.name} ({dims}), {n:,} parameters from "
               f"{imp.source.weights_file}")
