"""``attngraph docs``: both views of every spec as svg, and a catalog page linking them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from attngraph.cli import main

FIGURES = Path(__file__).resolve().parent.parent / "examples" / "figures"


@pytest.mark.dot
def test_docs_writes_images_and_catalog(tmp_path: Path) -> None:
    """Each spec gets two svg files; catalog.md has its title and links both images."""
    specs = tmp_path / "specs"
    specs.mkdir()
    for name in ("simple-attention.yaml", "intra-attention.yaml"):
        shutil.copy(FIGURES / name, specs / name)
    out = tmp_path / "docs"
    r = CliRunner().invoke(main, ["docs", "--specs", str(specs), "--out", str(out)])
    assert r.exit_code == 0, r.output
    svgs = sorted(p.name for p in (out / "catalog").glob("*.svg"))
    assert svgs == [f"{s}.{v}.svg" for s in ("intra-attention", "simple-attention")
                    for v in ("architecture", "unrolled")]
    page = (out / "catalog.md").read_text()
    assert "## Intra-attention (all pairs)" in page
    assert "(catalog/simple-attention.unrolled.svg)" in page
