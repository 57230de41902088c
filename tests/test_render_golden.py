"""Golden DOT and Mermaid text of a few specs (figures and catalog).

Regenerate after an intended change with ``ATTNGRAPH_UPDATE_GOLDEN=1 pytest
tests/test_render_golden.py`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from attngraph.frontend import load_spec
from renderers import render

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
CASES = [
    ("examples/figures/simple-attention-kvq-2.yaml", "unrolled"),
    ("examples/figures/intra-attention.yaml", "unrolled"),
    ("examples/figures/simple-attention-full.yaml", "architecture"),
    ("specs/global_attention.yaml", "architecture"),
    ("specs/global_attention.yaml", "unrolled"),
    ("specs/kvq_attention.yaml", "unrolled"),
]
SUFFIX = {"dot": "dot", "mermaid": "mmd"}


@pytest.mark.parametrize("fmt", ["dot", "mermaid"])
@pytest.mark.parametrize(("spec", "view"), CASES)
def test_golden_text(spec: str, view: str, fmt: str) -> None:
    """The serialised diagram equals the reviewed golden text, byte for byte."""
    path = ROOT / spec
    if not path.exists():
        pytest.skip(f"{spec} is not in this checkout")
    text = render(load_spec(path), view, fmt)
    assert isinstance(text, str)
    golden = GOLDEN / f"{path.stem}.{view}.{SUFFIX[fmt]}"
    if os.environ.get("ATTNGRAPH_UPDATE_GOLDEN"):
        golden.write_text(text, encoding="utf-8")
    assert golden.exists(), f"no golden file {golden.name}; set ATTNGRAPH_UPDATE_GOLDEN=1"
    assert text == golden.read_text(encoding="utf-8")


def test_render_is_deterministic() -> None:
    """Rendering the same spec twice gives the same text (golden tests rely on it)."""
    g = load_spec(ROOT / "examples/figures/intra-attention.yaml")
    assert render(g, "unrolled", "dot") == render(g, "unrolled", "dot")
    assert render(g, "architecture", "mermaid") == render(g, "architecture", "mermaid")
