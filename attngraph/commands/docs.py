"""``attngraph docs``: render every catalog spec into docs/catalog/ and write docs/catalog.md.

The page opens with two generated tables: every spec on every axis of
``attngraph describe`` and the training targets with the figures reached
(recorded in docs/training-results.json by the slow catalog training); then one
section per spec with both diagrams, the trained model's attention picture
(``docs/catalog/NAME.attention.png``, drawn by ``python -m
attngraph.train.report.results``) when there is one, and its own axes.

It also rewrites the field reference of docs/spec-language.md (the part between
its marker comments), from the JSON Schema the field docstrings describe
(:mod:`attngraph.kinds.reference`), and the page's tables of the registries
(:mod:`attngraph.kinds.tables`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from attngraph.cli import main, run_stage, write_output
from attngraph.fileio import Role, read_text

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph


def axes_table(graphs: list[Graph]) -> str:
    """Markdown table of the attention sites of ``graphs`` on every describe axis."""
    from attngraph.analysis.formats import axes_table as table

    return table(graphs)


def results_table() -> str:
    """Markdown table of training targets and reached figures, or "" if none recorded."""
    try:
        from attngraph.train.report.results import results_table as table
    except ImportError:
        return ""
    return table()


def reference_page(text: str, page: str) -> str:
    """The spec-language page ``text`` with its field reference as the models say now,
    and its tables of formula functions, scorer functions, normalisers, feature maps
    and activations as their registries say (where it has a table's markers); a
    :class:`~attngraph.errors.RenderError` at ``page`` if it has no field reference
    markers."""
    from attngraph.algebra import functions as fns
    from attngraph.errors import RenderError, SourceLoc
    from attngraph.kinds.reference import END, START, field_reference, with_reference
    from attngraph.kinds.schema import json_schema
    from attngraph.kinds.tables import with_tables
    from attngraph.train.tasks.lookup import task_lines

    try:
        text = with_reference(text, field_reference(json_schema(task_lines())))
    except ValueError:
        msg = f"{page} has no field reference markers"
        raise RenderError(msg, SourceLoc(page), f"put the lines {START} and {END} where "
                          "the generated tables go") from None
    if fns.START in text:  # the table of formula functions, where the page has one
        text = with_reference(text, fns.function_table(), fns.START, fns.END)
    return with_tables(text)  # scorers, normalisers, feature maps, activations


def catalog_entry(graph: Graph, spec: Path, images: dict[str, str],
                  attention: str | None = None) -> str:
    """The markdown section of one spec: title, summary, both diagrams, the trained
    model's attention picture (``attention``, a path relative to the page) when
    there is one, tables."""
    lines = [f"## {graph.title or graph.name}", "",
             f"`{spec.as_posix()}` — name `{graph.name}`", ""]
    if graph.summary:
        lines += [graph.summary.strip(), ""]
    for view, rel in images.items():
        lines += [f"**{view}**", "", f"![{graph.name} {view} view]({rel})", ""]
    if attention is not None:
        lines += ["**attention after training** (`attngraph attend RUN`)", "",
                  f"![{graph.name} attention after training]({attention})", ""]
    lines += ["Attention sites (from `attngraph describe`):", "",
              axes_table([graph]).rstrip(), ""]
    return "\n".join(lines)


@main.command(help="""Render every spec in SPECS (both views, svg) and write the catalog page.

\b
Each spec's section also shows OUT/catalog/NAME.attention.png when it
exists: the trained model's attention picture, which `python -m
attngraph.train.report.results [SPEC...]` draws when it trains the catalog.

\b
Also rewrites the field reference of OUT/spec-language.md, when that page
exists, from the field docstrings of the models (the text between its
field-reference marker comments).""")
@click.option("--specs", "spec_dir", type=click.Path(file_okay=False, exists=True),
              default="specs",
              show_default=True, help="Folder of catalog specs.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default="docs",
              show_default=True,
              help="Writes OUT/catalog.md and OUT/catalog/*.svg (missing folders are made).")
@run_stage
def docs(spec_dir: str, out_dir: str) -> None:
    """Render the catalog; rewrite the field reference (see the help)."""
    import sys

    from attngraph.errors import RenderError, SourceLoc

    out = Path(out_dir)
    specs = sorted(Path(spec_dir).glob("*.yaml"))
    if not specs:
        # an empty page would replace the catalog page: refuse instead
        msg = f"no specs (*.yaml) in {spec_dir}"
        raise RenderError(msg, SourceLoc(spec_dir), "give the folder of the catalog specs "
                          "with --specs")
    sections, graphs, bad = [], [], 0
    for spec in specs:
        rendered = _render_entry(spec, out / "catalog")
        if rendered is None:
            bad += 1
            continue
        graph, section = rendered
        sections.append(section)
        graphs.append(graph)
        click.echo(f"rendered {spec}")
    write_output(out / "catalog.md", "\n".join([*_catalog_head(graphs), *sections]),
                 error=RenderError)
    click.echo(f"wrote {out / 'catalog.md'} ({len(sections)} specs)")
    _refresh_reference(out / "spec-language.md")
    if bad:
        sys.exit(1)


def _render_entry(spec: Path, img_dir: Path) -> tuple[Graph, str] | None:
    """Draw ``spec``'s two views into ``img_dir`` and return its graph and catalog
    section; None (the error echoed) when the spec does not load or draw."""
    from attngraph.cli import echo_error
    from attngraph.errors import AttnGraphError, RenderError
    from attngraph.frontend import load_spec
    from renderers import render

    try:
        graph = load_spec(spec)
        svgs = {view: str(render(graph, view, "svg")) for view in ("architecture",
                                                                   "unrolled")}
    except AttnGraphError as exc:
        echo_error(exc)
        return None
    images = {}
    for view, svg in svgs.items():
        # a file that cannot be written stops the command (the next would fail too)
        name = f"{spec.stem}.{view}.svg"
        write_output(img_dir / name, svg, error=RenderError)
        images[view] = f"catalog/{name}"
    # drawn by `python -m attngraph.train.report.results` from the model it trained
    picture = img_dir / f"{spec.stem}.attention.png"
    return graph, catalog_entry(graph, spec, images, f"catalog/{picture.name}"
                                if picture.is_file() else None)


def _catalog_head(graphs: list[Graph]) -> list[str]:
    """The catalog page's opening lines: the axes table, then the training results."""
    head = ["# Catalog", "",
            "Every spec in `specs/`, drawn by `attngraph render` (architecture view, then",
            "the per-item unrolled view). Regenerate with `attngraph docs` (or `make docs`).",
            "", "## Every mechanism on every axis", "",
            "Generated by `attngraph describe` from each spec's graph (never from its name",
            "or comments): one row per attention site.", "", axes_table(graphs).rstrip(), ""]
    results = results_table()
    if results:
        head += ["## Training: targets and figures reached", "",
                 "Each spec trained with its own `train:` section; the slow tests assert "
                 "every target. `glimpse_hard_baseline` is glimpse_hard's same-size model "
                 "without attention (its glimpse stays at the centre of the canvas), which "
                 "the hard attention model must beat by 0.1; "
                 "docs/training-results.md tells how it got there.",
                 "", results.rstrip(), ""]
    return head


def _refresh_reference(page: Path) -> None:
    """Rewrite the field reference and tables of ``page`` when it exists."""
    from attngraph.errors import RenderError

    if not page.is_file():
        return
    old = read_text(page, Role("page", 16 * 2**20, RenderError))
    new = reference_page(old, str(page))
    if new != old:
        write_output(page, new, error=RenderError)
    click.echo(f"field reference in {page}: {'rewritten' if new != old else 'up to date'}")
