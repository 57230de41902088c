"""``attngraph validate`` and ``attngraph schema``: the front end, no torch."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from attngraph.cli import main, run_stage, write_output

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph


def _fmt_params(n: int) -> str:
    return f"{n:,}"


def summary(g: Graph) -> str:
    """A short text summary of an inferred graph: inputs, nodes with shapes, outputs."""
    lines = [f"{g.file}: ok — {g.name}" + (f" ({g.title})" if g.title else "")]
    ins = ", ".join(f"{n.id}: {n.spec.type} {n.types['']}" for n in g.inputs)
    lines.append(f"inputs:  {ins}")
    lines.append(f"nodes:   {sum(1 for n in g.nodes if not n.is_input)}")
    width = max((len(n.id) for n in g.nodes if not n.is_input), default=4)
    kw = max((len(n.kind) for n in g.nodes if not n.is_input), default=4)
    for n in g.nodes:
        if n.is_input:
            continue
        ports = "  ".join(
            (f"{p}: " if p else "") + str(t) for p, t in n.types.items() if p not in ("out",)
            and not (p and p in ("sample",))
        )
        params = f"{_fmt_params(n.params)} params" if n.params else ""
        lines.append(f"  {n.id:<{width}}  {n.kind:<{kw}}  {ports:<24} {params}".rstrip())
    outs = ", ".join(f"{k}: {g.node(e.src).types[e.port]}" for k, e in g.outputs)
    lines.append(f"outputs: {outs}")
    lines.append(f"parameters: {_fmt_params(g.params)}")
    return "\n".join(lines)


@main.command()
@click.argument("specs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--allow-large", is_flag=True, help="Accept specs over the size limits.")
@click.option("--ir", "show_ir", is_flag=True, help="Also print the IR dump.")
@click.option("-q", "--quiet", is_flag=True, help="Print only errors.")
def validate(specs: tuple[str, ...], allow_large: bool, show_ir: bool, quiet: bool) -> None:
    """Check SPECS: schema, wiring, shapes; print each one's summary or every error.

    Exits 1 if any spec has errors. No tensor is made and torch is not imported.
    """
    import sys

    from attngraph.cli import echo_error
    from attngraph.errors import AttnGraphError
    from attngraph.frontend import load_spec

    bad = 0
    for path in specs:
        try:
            g = load_spec(path, allow_large=allow_large)
        except AttnGraphError as exc:
            echo_error(exc)
            bad += 1
            continue
        if not quiet:
            click.echo(summary(g))
            if show_ir:
                click.echo(str(g))
            if len(specs) > 1:
                click.echo()
    if bad:
        if len(specs) > 1:
            click.echo(f"{bad} of {len(specs)} specs have errors", err=True)
        sys.exit(1)


@main.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write to a file (missing folders are made).")
@run_stage
def schema(output: str | None) -> None:
    """Print the JSON Schema of the spec language (for YAML language servers)."""
    from attngraph.kinds.schema import json_schema
    from attngraph.train.tasks.lookup import task_lines

    text = json.dumps(json_schema(task_lines()), indent=2)
    if output:
        write_output(output, text + "\n")
    else:
        click.echo(text)
