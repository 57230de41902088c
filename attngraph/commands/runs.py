"""``attngraph evaluate`` and ``attngraph predict``: a trained run on new data."""

from __future__ import annotations

import json

import click

from attngraph.cli import main, run_stage, write_output
from attngraph.commands.train import device_options

_run_argument = click.argument("run_dir", metavar="RUN", type=click.Path(file_okay=False,
                                                                         exists=True))
_data_option = click.option("--data", type=click.Path(), required=True,
                            help="Records in any form train --data reads (docs/data.md).")


def _json(value: object, run_dir: str) -> str:
    """``value`` as one line of strict JSON: NaN or infinity (which Run.predict and
    Run.evaluate refuse first) is an error, never an invalid JSON file."""
    from attngraph.errors import SourceLoc, TrainingError
    from attngraph.train.trained.finite import nonfinite_at

    bad = nonfinite_at(value)
    if bad is not None:
        msg = f"the run's output {bad} is NaN or infinite: it is not written"
        raise TrainingError(msg, SourceLoc(run_dir), "the run's parameters are damaged or "
                            "too large: train it again")
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


_truncate_option = click.option(
    "--truncate", is_flag=True,
    help="A run of attngraph import reads a text longer than the model's positions by its "
    "first tokens (a classifier's text, an encoder's source; as its tokenizer truncates) "
    "instead of refusing it.")
_max_length_option = click.option(
    "--max-length", type=click.IntRange(min=1), default=None,
    help="Decoders: most target tokens generated [default: twice each example's own "
         "source, plus 2].")
_beam_option = click.option("--beam", type=click.IntRange(min=1), default=1, show_default=True,
                            help="Decoders: beam width (1: greedy).")


@main.command()
@_run_argument
@_data_option
@click.option("--batch", type=click.IntRange(min=1), default=256, show_default=True,
              help="Examples per forward pass.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the report as one JSON object instead of the table.")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              help="Also write the report as JSON to this file; a missing directory is made.")
@click.option("--picture", type=click.Path(dir_okay=False), default=None,
              help="Draw a classifier's confusion matrix to this file (png, svg, pdf; "
              "a missing directory is made).")
@_max_length_option
@_beam_option
@_truncate_option
@device_options
@run_stage
def evaluate(run_dir: str, data: str, batch: int, as_json: bool, output: str | None,
             picture: str | None, max_length: int | None, beam: int, truncate: bool,
             device: str, bf16: bool) -> None:
    """Scores of the run trained in RUN on the labelled records of --data.

    The records are read with the run's own fields, vocabularies and labels
    (RUN/data.json); every example is scored. Printed: the loss (the training
    objective) and the metrics; for a classifier each class's precision, recall,
    F1 and support, their macro and weighted averages and the confusion matrix;
    for a decoder also the BLEU and exact match of the text it generates. A run
    written by attngraph import reads each record's text with the run's tokenizer/
    and scores its label (a classifier), or gives a generating model's loss and
    perplexity on the records (a causal decoder's text; an encoder-decoder's target)
    and, where the records have a target, the BLEU and exact match of what it
    generates.
    """
    from attngraph.errors import SourceLoc, TrainingError
    from attngraph.train.trained.evaluation_text import format_report
    from attngraph.train.trained.reloaded import load_run

    run = load_run(run_dir, device=device)
    imported = run.imported
    where = None
    if picture is not None:
        from attngraph.train.pictures.attend import picture_path

        where = picture_path(picture)  # a suffix matplotlib cannot write fails first
        if run.labels is None and not imported:
            msg = "--picture draws a classifier's confusion matrix; this run is not one"
            raise TrainingError(msg, SourceLoc(picture), "leave --picture out for a decoder "
                                "run: its report has token accuracy and BLEU instead")
    if imported:
        report = run.evaluate(data, batch=batch, max_length=max_length, beam=beam,
                              bf16=bf16, truncate=truncate)
        if where is not None and report.classes is None:
            msg = "--picture draws a classifier's confusion matrix; this model is not one"
            raise TrainingError(msg, SourceLoc(str(picture)), "leave --picture out: a generating "
                                "model's report has exact match and BLEU instead")
    else:
        report = run.evaluate(data, batch=batch, bf16=bf16, beam=beam, max_length=max_length,
                              truncate=truncate)
    title = f"{run.graph.name} on {data}"
    text = _json(report.to_dict(), run_dir)
    written = []
    if output is not None:
        write_output(output, text + "\n", error=TrainingError)
        written.append(f"report: {output}")
    if where is not None and report.classes is not None:
        from attngraph.train.pictures.confusion import confusion_picture

        write_output(where, confusion_picture(report.classes, where, title=title),
                     error=TrainingError)
        written.append(f"confusion matrix: {where}")
    if as_json:  # stdout is the JSON alone
        click.echo(text)
        return
    click.echo(format_report(report, title))
    for line in written:
        click.echo(line)


@main.command()
@_run_argument
@click.option("--data", type=click.Path(), default=None,
              help="Records in any form train --data reads (docs/data.md).")
@click.option("--input", "texts", multiple=True, metavar="TEXT",
              help="A text to predict for, instead of --data (repeat it for several).")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), default=None,
              help="JSONL file of predictions, one line per example [default: stdout].")
@click.option("--attention", is_flag=True,
              help="Add each example's attention weights (heads averaged) and its tokens.")
@click.option("--batch", type=click.IntRange(min=1), default=64, show_default=True,
              help="Examples per forward pass.")
@_max_length_option
@_beam_option
@click.option("--cache/--no-cache", default=True, show_default=True,
              help="Decoders: generate with a key/value cache (--no-cache re-runs the "
              "prefix at every step; the same tokens, slower).")
@_truncate_option
@device_options
@run_stage
def predict(run_dir: str, data: str | None, texts: tuple[str, ...], output: str | None,
            attention: bool, batch: int, max_length: int | None, beam: int, cache: bool,
            truncate: bool, device: str, bf16: bool) -> None:
    """Predictions of the run trained in RUN for the records of --data, or for each
    text given by --input.

    One JSON object per example: its index (and line), the prediction as a
    label name (with the probabilities) or as text (a decoder's greedy output,
    up to <eos>), the record's own label or target when it has one, and with
    --attention the weights over its tokens. A run written by attngraph import
    reads each record's text with the run's tokenizer/ (else as ids) and gives
    the text the model generates, or its label (docs/real-models.md).
    """
    from attngraph.errors import TrainingError
    from attngraph.train.trained.reloaded import load_run

    if (data is None) == (not texts):
        msg = "give the records to predict for: --data FILE, or one or more --input TEXT (not both)"
        raise click.UsageError(msg)
    run = load_run(run_dir, device=device)
    rows = run.predict(data if data is not None else list(texts), attention=attention,
                       batch=batch, max_length=max_length, beam=beam, bf16=bf16, cache=cache,
                       truncate=truncate)
    text = "".join(_json(r, run_dir) + "\n" for r in rows)
    if output is None:
        click.echo(text, nl=False)
        return
    write_output(output, text, error=TrainingError)
    click.echo(f"{output} ({len(rows)} predictions)")
