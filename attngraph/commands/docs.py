"""``attngraph docs``: render every catalog spec into docs/catalog/ and write docs/catalog.md.

Two tables are generated elsewhere and slot in through :func:`axes_table` and
:func:`results_table` (each returns markdown, or "" while not yet provided).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from attngraph.cli import main, run_stage

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph


def axes_table(graph: Graph) -> str:
    """INSERTION POINT (describe engineer): the describe-axes table of ``graph`` as
    markdown. Returns "" until ``attngraph.analysis`` provides it."""
    return ""


def results_table(graph: Graph, spec: Path) -> str:
    """INSERTION POINT (training engineer): the training-results table of ``spec``
    as markdown. Returns "" until recorded results exist."""
    return ""


def catalog_entry(graph: Graph, spec: Path, images: dict[str, str]) -> str:
    """The markdown section of one spec: title, summary, both diagrams, tables."""
    lines = [f"## {graph.title or graph.name}", "",
             f"`{spec.as_posix()}` — name `{graph.name}`", ""]
    if graph.summary:
        lines += [graph.summary.strip(), ""]
    for view, rel in images.items():
        lines += [f"**{view}**", "", f"![{graph.name} {view} view]({rel})", ""]
    for table in (axes_table(graph), results_table(graph, spec)):
        if table:
            lines += [table.rstrip(), ""]
    return "\n".join(lines)


@main.command()
@click.option("--specs", "spec_dir", type=click.Path(file_okay=False), default="specs",
              show_default=True, help="Folder of catalog specs.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="docs",
              show_default=True, help="Writes OUT/catalog.md and OUT/catalog/*.svg.")
@run_stage
def docs(spec_dir: str, out_dir: str) -> None:
    """Render every spec in SPECS (both views, svg) and write the catalog page."""
    import sys

    from attngraph.cli import echo_error
    from attngraph.errors import AttnGraphError
    from attngraph.pipeline import load_spec
    from renderers import render

    out = Path(out_dir)
    img_dir = out / "catalog"
    img_dir.mkdir(parents=True, exist_ok=True)
    sections, bad = [], 0
    for spec in sorted(Path(spec_dir).glob("*.yaml")):
        try:
            graph = load_spec(spec)
            images = {}
            for view in ("architecture", "unrolled"):
                svg = render(graph, view, "svg")
                name = f"{spec.stem}.{view}.svg"
                (img_dir / name).write_text(str(svg), encoding="utf-8")
                images[view] = f"catalog/{name}"
        except AttnGraphError as exc:
            echo_error(exc)
            bad += 1
            continue
        sections.append(catalog_entry(graph, spec, images))
        click.echo(f"rendered {spec}")
    head = ["# Catalog", "",
            "Every spec in `specs/`, drawn by `attngraph render` (architecture view, then",
            "the per-item unrolled view). Regenerate with `attngraph docs`.", ""]
    (out / "catalog.md").write_text("\n".join([*head, *sections]), encoding="utf-8")
    click.echo(f"wrote {out / 'catalog.md'} ({len(sections)} specs)")
    if bad:
        sys.exit(1)
