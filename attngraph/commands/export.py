"""``attngraph export SPEC -o FILE``: the compiled model as a file that runs without attngraph
(a torch.export program, or an ONNX model)."""

from __future__ import annotations

import click

from attngraph.cli import main, run_stage, spec_argument, write_output
from attngraph.commands.compile import MAX_BATCH, MAX_LENGTH, MAX_SEED


@main.command("export")
@spec_argument
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Where to write the program (e.g. model.pt2, model.onnx).")
@click.option("--format", "fmt", type=click.Choice(["pt2", "onnx"]), default="pt2",
              show_default=True,
              help="pt2: a torch.export program (torch.export.load reads it); onnx: an "
                   "ONNX model (onnxruntime runs it; needs pip install 'attngraph[onnx]').")
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

    The batch and every symbolic length (N, T, ...) are left dynamic (a loop or an
    rnn over items runs its step through torch's scan, so its length is dynamic too);
    the command checks the program at another batch and lengths and says which stayed
    dynamic. Load a pt2 program with ``torch.export.load(FILE).module()`` and call it
    with the inputs in the model's order; run an ONNX model with onnxruntime, its
    inputs and outputs named like the spec's.
    """
    import io

    import torch

    from attngraph.lower import compile as lower
    from attngraph.lower.export import export_onnx, export_program
    from attngraph.pipeline import load_spec

    graph = load_spec(spec, allow_large=allow_large, batch=batch, length=length)
    model = lower(graph, seed=seed)
    if fmt == "onnx":
        data, done = export_onnx(model, batch=batch, length=length, seed=seed)
        what_it_is = "ONNX model"
        feeds = ", ".join(f"'{k}': ..." for k in done.example)
        run = f"onnxruntime.InferenceSession('{output}').run(None, {{{feeds}}})"
    else:
        done = export_program(model, batch=batch, length=length, seed=seed)
        buf = io.BytesIO()
        torch.export.save(done.program, buf)
        data = buf.getvalue()
        what_it_is = "torch.export program"
        run = f"torch.export.load('{output}').module()({', '.join(done.example)})"
    write_output(output, data)
    symbols = sorted({d for n in graph.inputs for t in n.types.values() for d in t.dims
                      if isinstance(d, str)})
    what = ["batch " + ("dynamic" if done.batch_dynamic else f"fixed at {batch}")]
    if symbols:
        names = ", ".join(symbols)
        what.append(f"lengths {names} dynamic" if done.lengths_dynamic else
                    f"lengths {names} fixed at {length} (torch.export specialised them)")
    click.echo(f"wrote {output}: {what_it_is} of {graph.name} ({fmt}); " + "; ".join(what))
    click.echo(f"run it: {run}")
