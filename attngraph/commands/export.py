"""``attngraph export SPEC|RUN -o FILE``: the compiled model as a file that runs without
attngraph (a torch.export program, an ONNX model, or the model's PyTorch source)."""

from __future__ import annotations

import keyword
from pathlib import Path
from typing import Any

import click

from attngraph.cli import main, run_stage, write_output
from attngraph.commands import MAX_BATCH, MAX_LENGTH, MAX_SEED
from attngraph.errors import LoweringError
from attngraph.lower.export.programs import FORMATS

#: the format a file's suffix names when --format is not given
_SUFFIXES = {".pt2": "pt2", ".onnx": "onnx", ".py": "python"}


@main.command("export")
@click.argument("spec", metavar="SPEC|RUN", type=click.Path())
@click.option("-o", "--output", required=True, metavar="FILE",
              help="Where to write it; its suffix picks the format when --format is not "
                   "given (model.pt2, model.onnx, model.py; any other: pt2).")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default=None,
              help="pt2: a torch.export program (torch.export.load reads it); onnx: an "
                   "ONNX model (onnxruntime runs it; needs pip install 'attngraph[onnx]'); "
                   "python: a readable PyTorch module file that imports torch only (of a RUN, "
                   "with the run's weights beside it and a load() that reads them). "
                   "[default: from -o's suffix, else pt2]")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True,
              help="Initialisation seed of a SPEC's fresh weights (0 to 2**63-1).")
@click.option("--batch", type=click.IntRange(2, MAX_BATCH), default=2, show_default=True,
              help=f"Batch of the example the program is traced on (2 to {MAX_BATCH}).")
@click.option("--length", type=click.IntRange(2, MAX_LENGTH), default=8, show_default=True,
              help=f"Size of every symbolic length in that example (2 to {MAX_LENGTH}).")
@click.option("--allow-large", is_flag=True, help="Accept specs over the size limits.")
@run_stage
def export_cmd(spec: str, output: str, fmt: str | None, seed: int, batch: int, length: int,
               allow_large: bool) -> None:
    """Export SPEC's compiled model (eval mode, fresh weights of --seed), or the trained
    model of RUN (a directory written by ``attngraph train``), to FILE.

    The program takes every input of the model, the padding masks included
    (``<input>_mask``, bool, True at the real items: pass all True for a batch
    without padding), and the command prints them. The batch and every symbolic
    length (N, T, ...) are left dynamic (a loop or an rnn over items runs its step
    through torch's scan, so its length is dynamic too); the command checks the
    program at another batch and lengths and says which stayed dynamic. Load a pt2
    program with ``torch.export.load(FILE).module()`` and call it with the inputs in
    that order; run an ONNX model with onnxruntime, its inputs and outputs named like
    the model's.

    With --format python (or a FILE named .py), FILE is the model's PyTorch source
    instead (what ``model.code`` shows): one class per concept, a forward with one
    statement per node, the same outputs; it takes the compiled model's state dict (--seed,
    --batch and --length do not change it). Of a RUN, the run's weights are written
    beside it (FILE with the suffix .safetensors) and the file ends with ``load()``,
    which builds the model with them using torch alone.
    """
    from attngraph.lower.export.inputs import program_inputs
    from attngraph.lower.export.programs import export_file

    fmt = fmt or _SUFFIXES.get(Path(output).suffix.lower(), "pt2")
    graph, model, weights = _model(spec, seed=seed, batch=batch, length=length,
                                   allow_large=allow_large)
    beside = _weights_path(output) if fmt == "python" and Path(spec).is_dir() else None
    # made and checked (it loads back) before anything is written
    made = export_file(model, fmt, batch=batch, length=length, seed=seed,
                       weights=beside.name if beside is not None else None)
    if fmt == "python":
        _write_python(model, output, made.data, made.class_name or "",
                      (beside, made.weights, weights) if beside is not None else None)
        return
    done = made.exported
    if done is None:  # pt2 and onnx carry the program they came from
        msg = f"{graph.name}: the {fmt} export returned no program"
        raise LoweringError(msg, None, "report the spec")
    if fmt == "onnx":
        what_it_is = "ONNX model"
        feeds = ", ".join(f"{k!r}: ..." for k in done.example)
        run = f"onnxruntime.InferenceSession({output!r}).run(None, {{{feeds}}})"
    else:
        what_it_is = "torch.export program"
        run = f"torch.export.load({output!r}).module()({', '.join(done.example)})"
    write_output(output, made.data)
    symbols = sorted({d for n in graph.inputs for t in n.types.values() for d in t.dims
                      if isinstance(d, str)})
    what = ["batch " + ("dynamic" if done.batch_dynamic else f"fixed at {batch}")]
    if symbols:
        names = ", ".join(symbols)
        what.append(f"lengths {names} dynamic" if done.lengths_dynamic else
                    f"lengths {names} fixed at {length} (torch.export specialised them)")
    click.echo(f"wrote {output}: {what_it_is} of {graph.name} ({fmt}, {weights}); "
               + "; ".join(what))
    click.echo("inputs: " + ", ".join(str(i) for i in program_inputs(model)))
    if any(i.mask_of for i in program_inputs(model)):
        click.echo("  (every mask is required: all True for a batch without padding)")
    click.echo(f"run it: {run}")


def _model(spec: str, *, seed: int, batch: int, length: int,
           allow_large: bool) -> tuple[Any, Any, str]:
    """The graph and model to export, and whose weights they hold.

    A directory is a run: its spec is the text stored in its checkpoint (checked
    against its hash by :func:`attngraph.load_run`), its weights the trained ones.
    """
    from attngraph.frontend import load_spec, loads_spec
    from attngraph.lower import compile as lower

    if not Path(spec).is_dir():
        graph = load_spec(spec, allow_large=allow_large, batch=batch, length=length)
        return graph, lower(graph, seed=seed), f"fresh weights of seed {seed}"
    from attngraph.train.store.checkpoints import load_checkpoint
    from attngraph.train.trained.reloaded import load_run

    trained = load_run(spec)
    ckpt = load_checkpoint(Path(spec))
    # the run's spec was accepted when it trained: its size is not checked again
    graph = loads_spec(ckpt.spec_text, ckpt.spec_file, allow_large=True, batch=batch,
                       length=length)
    model = lower(graph, seed=0)
    model.load_state_dict(trained.model.state_dict())
    return graph, model.eval(), f"the weights trained in {spec}"


def _weights_path(output: str) -> Path:
    """Where the weights of a Python file go: beside it, with the suffix .safetensors."""
    out = Path(output)
    if out.suffix == ".safetensors":
        msg = f"{output}: the Python file would be overwritten by its own weights"
        raise LoweringError(msg, None, "name the file .py: its weights go beside it, "
                            "as .safetensors")
    return out.with_suffix(".safetensors")


def _from(output: str, name: str) -> str:
    """How to get ``name`` from the Python file ``output``: an import where the file is
    a module Python can import (``NAME.py``, run beside it), else ``runpy``."""
    out = Path(output)
    if out.suffix == ".py" and out.stem.isidentifier() and not keyword.iskeyword(out.stem):
        return f"from {out.stem} import {name}"
    return f"{name} = runpy.run_path({output!r})[{name!r}]"


def _write_python(model: Any, output: str, code: bytes, cls: str,
                  weights: tuple[Path, bytes | None, str] | None = None) -> None:
    """Write ``code`` (``model.code``, whose spec class is ``cls``) to ``output``, and
    ``weights`` (where, the bytes, whose) beside it; say how to run it."""
    graph = model.graph
    args = ", ".join(model.binder.signature().parameters)
    if weights is not None:
        where, data, whose = weights
        write_output(where, data or b"")  # the weights first: the code's load() reads them
        write_output(output, code)
        click.echo(f"wrote {output} and {where}: PyTorch module {cls} of {graph.name} "
                   f"(python; imports torch only; {whose})")
        click.echo(f"run it: {_from(output, 'load')}; model = load(); model({args})")
        return
    write_output(output, code)
    click.echo(f"wrote {output}: PyTorch module {cls} of {graph.name} (python; imports torch "
               "only, parameters empty)")
    click.echo(f"run it: {_from(output, cls)}; model = {cls}(); "
               "model.load_state_dict(state_dict); model.eval(); "
               f"model({args})")
    click.echo("  (state_dict: torch.save(attngraph.compile(SPEC, seed=...).state_dict(), "
               "...) or a trained run's: attngraph.load_run(RUN).model.state_dict())")
