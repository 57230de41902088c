"""The catalog page shows each trained catalog spec's attention picture: every spec
with a ``train:`` section and an attention output has ``docs/catalog/NAME.attention.png``
(drawn by ``python -m attngraph.train.report.results``), small, and referenced under its
section of docs/catalog.md by ``attngraph docs``."""

from __future__ import annotations

from pathlib import Path

import pytest

from attngraph.frontend import load_spec
from attngraph.train.pictures.attend import _PREFERRED
from attngraph.train.report.results import PICTURES, picture_path

ROOT = Path(__file__).resolve().parents[1]
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
PAGE = ROOT / "docs" / "catalog.md"
#: a picture on the catalog page stays small
MOST_BYTES = 100_000


def _drawable(path: Path) -> bool:
    """The spec trains and declares an output that ``attngraph attend`` draws."""
    g = load_spec(path)
    return g.train is not None and any(k in dict(g.outputs) for k in _PREFERRED)


@pytest.mark.parametrize("path", [p for p in SPECS if _drawable(p)], ids=lambda p: p.stem)
def test_every_trained_catalog_spec_shows_its_attention_picture(path: Path) -> None:
    """The spec's picture exists, is a PNG under MOST_BYTES, and its section of the
    catalog page shows it after the heading the docs writer gives it."""
    pic = picture_path(path.stem)
    assert pic.is_file(), (f"no {pic.relative_to(ROOT)}: run `python -m attngraph.train."
                           f"report.results specs/{path.name}` then `attngraph docs`")
    assert pic.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert pic.stat().st_size < MOST_BYTES
    page = PAGE.read_text(encoding="utf-8")
    start = page.index(f"`specs/{path.name}`")
    end = page.find("\n## ", start)
    section = page[start:end if end >= 0 else None]
    assert "**attention after training** (`attngraph attend RUN`)" in section
    assert f"](catalog/{pic.name})" in section


def test_no_picture_is_left_of_a_spec_that_is_gone() -> None:
    """Every attention picture in docs/catalog/ belongs to a catalog spec."""
    names = {p.stem for p in SPECS}
    for pic in PICTURES.glob("*.attention.png"):
        assert pic.name.removesuffix(".attention.png") in names, pic


def test_catalog_entry_shows_the_picture_only_when_given() -> None:
    """The docs writer's section of a spec has the picture's heading and image when
    it is given one, and neither when not."""
    from attngraph.commands.docs import catalog_entry

    g = load_spec(SPECS[0])
    views = {"architecture": "catalog/x.architecture.svg"}
    with_pic = catalog_entry(g, SPECS[0], views, "catalog/x.attention.png")
    without = catalog_entry(g, SPECS[0], views)
    assert "![" + g.name + " attention after training](catalog/x.attention.png)" in with_pic
    assert "attention after training" not in without
