"""A loaded spec shows its diagram inline in a notebook."""

from __future__ import annotations

import pytest

from attngraph import load_spec


@pytest.mark.dot
def test_loaded_spec_displays_as_svg() -> None:
    """Graph._repr_mimebundle_ gives an SVG of the architecture view plus the IR as text."""
    g = load_spec("specs/global_attention.yaml")
    bundle = g._repr_mimebundle_()
    assert bundle["image/svg+xml"].lstrip().startswith(("<?xml", "<svg"))
    assert "softmax" in bundle["image/svg+xml"]
    assert bundle["text/plain"] == str(g)
