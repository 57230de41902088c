"""``attngraph describe`` and ``attngraph diff``: read the IR only, no torch."""

from __future__ import annotations

import click

from attngraph.cli import main, run_stage, spec_or_run_argument
from attngraph.commands import load_spec_or_run

_FORMAT = click.option(
    "--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
    show_default=True, help="Output format.",
)


@main.command()
@spec_or_run_argument
@_FORMAT
@click.option("--allow-large", is_flag=True, help="Accept specs over the size limits.")
@run_stage
def describe(spec: str, fmt: str, allow_large: bool) -> None:
    """Describe SPEC (a spec file, or a run directory: the spec it was trained or
    imported with): each attention site on every axis, with the reason.

    Axes: soft/hard, content/location, self/external, global/local, heads,
    recurrent or not, explicit/implicit; plus the scorer's formula, the cost of
    each site, parameters per node and the outputs. Derived from the graph only.
    """
    from attngraph.analysis.describe import describe as describe_graph
    from attngraph.analysis.formats import render

    g = load_spec_or_run(spec, allow_large=allow_large)
    click.echo(render(describe_graph(g), fmt).rstrip("\n"))


@main.command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@_FORMAT
@click.option("--allow-large", is_flag=True, help="Accept specs over the size limits.")
@run_stage
def diff(a: str, b: str, fmt: str, allow_large: bool) -> None:
    """Relate two specs A and B (spec files or run directories): what is the same
    and what differs.

    Nodes are aligned by role (graph edit distance with costs by kind); the
    report compares every axis per attention site, the scorers, where queries and
    keys come from, the fields of matched nodes, and nodes present in only one.
    """
    from attngraph.analysis.diff import diff as diff_graphs
    from attngraph.analysis.diff import render_diff

    ga = load_spec_or_run(a, allow_large=allow_large)
    gb = load_spec_or_run(b, allow_large=allow_large)
    click.echo(render_diff(diff_graphs(ga, gb), fmt).rstrip("\n"))
