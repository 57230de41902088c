"""``attngraph docs``: both views of every spec as svg, and a catalog page linking them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIGURES = Path(__file__).resolve().parent.parent / "examples" / "figures"


@pytest.mark.dot
def test_docs_writes_images_and_catalog(tmp_path: Path, cli) -> None:
    """Each spec gets two svg files; catalog.md has its title and links both images."""
    specs = tmp_path / "specs"
    specs.mkdir()
    for name in ("simple-attention.yaml", "intra-attention.yaml"):
        shutil.copy(FIGURES / name, specs / name)
    out = tmp_path / "docs"
    cli("docs", "--specs", specs, "--out", out, code=0)
    svgs = sorted(p.name for p in (out / "catalog").glob("*.svg"))
    assert svgs == [f"{s}.{v}.svg" for s in ("intra-attention", "simple-attention")
                    for v in ("architecture", "unrolled")]
    page = (out / "catalog.md").read_text()
    assert "## Intra-attention (all pairs)" in page
    assert "(catalog/simple-attention.unrolled.svg)" in page


@pytest.mark.dot
def test_catalog_page_has_the_axes_table(tmp_path: Path, cli) -> None:
    """catalog.md carries the describe table: a row per attention site with every axis."""
    from attngraph.analysis.axes import AXES

    specs = tmp_path / "specs"
    specs.mkdir()
    catalog = FIGURES.parent.parent / "specs"
    shutil.copy(catalog / "intra_attention.yaml", specs / "intra_attention.yaml")
    out = tmp_path / "docs"
    cli("docs", "--specs", specs, "--out", out, code=0)
    page = (out / "catalog.md").read_text()
    header = next(line for line in page.splitlines() if line.startswith("| spec | site"))
    assert all(axis in header for axis in AXES)
    rows = [line for line in page.splitlines() if line.startswith("| `intra_attention` | `y`")]
    # the intra-attention site: queries and keys both come from the same items
    assert rows and "| self |" in rows[0]


def test_docs_refuses_a_folder_without_specs(tmp_path: Path, cli) -> None:
    """An empty --specs folder is one error and leaves the catalog page alone (it once
    wrote an empty page over it); a missing one is a usage error (exit 2)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "docs"
    out.mkdir()
    (out / "catalog.md").write_text("keep me")
    r = cli("docs", "--specs", empty, "--out", out, code=1)
    assert r.output.startswith(f"{empty}: error: no specs (*.yaml) in {empty}")
    assert (out / "catalog.md").read_text() == "keep me"
    r = cli("docs", "--specs", tmp_path / "nope")
    assert r.exit_code == 2 and "does not exist" in r.output


@pytest.mark.dot
def test_docs_into_an_unwritable_place_is_one_error(tmp_path: Path, cli) -> None:
    """--out below a file stops at the first image with one located error, exit 1."""
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(FIGURES / "simple-attention.yaml", specs / "simple-attention.yaml")
    (tmp_path / "f").write_text("x")
    r = cli("docs", "--specs", specs,
            "--out", tmp_path / "f" / "docs", code=1)
    assert "is a file, not a folder" in r.output and "Traceback" not in r.output
