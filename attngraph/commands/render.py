"""``attngraph render``: draw a spec's architecture or per-item (unrolled) diagram."""

from __future__ import annotations

import click

from attngraph.cli import RegistryChoice, main, run_stage, spec_or_run_argument, write_output
from attngraph.commands import load_spec_or_run
from renderers import FORMATS, VIEWS

_SUFFIX = {".svg": "svg", ".png": "png", ".pdf": "pdf", ".dot": "dot", ".gv": "dot",
           ".mmd": "mermaid", ".mermaid": "mermaid", ".json": "json"}


def infer_format(output: str | None, fmt: str | None) -> str:
    """The format given, else the one the output's suffix names, else svg (dot on stdout)."""
    from pathlib import Path

    from attngraph.errors import RenderError, SourceLoc

    if fmt:
        return fmt
    if output is None:
        return "dot"
    suffix = Path(output).suffix.lower()
    if suffix not in _SUFFIX:
        msg = f"cannot tell the format from '{output}'"
        raise RenderError(msg, SourceLoc(output), hint="give --format " + "|".join(FORMATS.names())
                          + " or a suffix: " + " ".join(sorted(_SUFFIX)))
    return _SUFFIX[suffix]


@main.command()
@spec_or_run_argument
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write here (missing folders are made); the suffix picks the format "
              "(.svg .png .pdf .dot .mmd .json).")
@click.option("--view", type=RegistryChoice(VIEWS),
              default="architecture", show_default=True)
@click.option("--format", "fmt", type=RegistryChoice(FORMATS),
              help="Output format (default: from -o, else dot text on stdout).")
@click.option("--items", type=click.IntRange(1, 9), default=2, show_default=True,
              help="Unrolled view: items drawn before the ellipsis.")
@click.option("--query", type=click.IntRange(1, 99), default=1, show_default=True,
              help="Unrolled view: the query i drawn for all-pairs weights p_{i,j}.")
@click.option("--expand-repeats", is_flag=True,
              help="Architecture view: draw every round of a repeat.")
@click.option("--allow-large", is_flag=True, help="Accept specs over the size limits.")
@run_stage
def render(spec: str, output: str | None, view: str, fmt: str | None, items: int,
           query: int, expand_repeats: bool, allow_large: bool) -> None:
    """Draw SPEC as a diagram (architecture view, or the per-item unrolled view);
    SPEC is a spec file, or a run directory (the spec it was trained or imported with).

    \b
    attngraph render spec.yaml -o spec.svg
    attngraph render spec.yaml --view unrolled -o spec.png
    attngraph render spec.yaml --view unrolled --format mermaid
    """
    import sys

    from renderers import render as draw

    fmt = infer_format(output, fmt)
    graph = load_spec_or_run(spec, allow_large=allow_large)
    out = draw(graph, view, fmt, items=items, query=query, expand_repeats=expand_repeats)
    if output:
        from attngraph.errors import RenderError

        write_output(output, out, error=RenderError)
    elif isinstance(out, bytes):
        if sys.stdout.isatty():
            from attngraph.errors import RenderError

            msg = f"{fmt} is binary; refusing to write it to a terminal"
            raise RenderError(msg, hint=f"add -o FILE.{fmt}")
        sys.stdout.buffer.write(out)
    else:
        click.echo(out, nl=not out.endswith("\n"))
