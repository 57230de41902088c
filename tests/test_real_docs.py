"""docs/real-models.md stays true: its example (a configuration, random weights, an
import, the weights over a text, a few steps of fine-tuning) runs and prints what the
page shows, and the page is listed from the README."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "real-models.md"


def test_the_example_runs_and_prints_what_the_page_shows() -> None:
    """The page's python block runs without network; its printed lines start with the
    text block shown after it (training adds progress lines in between)."""
    pytest.importorskip("transformers", reason="the example needs transformers")
    text = PAGE.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S)
    shown = re.search(r"prints\n\n```text\n(.*?)```", text, re.S)
    assert code is not None and shown is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(PAGE), "exec"), {"__name__": "docs_example"})  # noqa: S102
    printed = [ln for ln in out.getvalue().splitlines() if not ln.startswith("step ")]
    assert printed == shown.group(1).splitlines()


def test_the_page_is_listed_and_names_every_real_spec() -> None:
    """README links the page; the page links every spec of specs/real/."""
    assert "docs/real-models.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    text = PAGE.read_text(encoding="utf-8")
    for spec in sorted((ROOT / "specs" / "real").glob("*.yaml")):
        if not spec.name.endswith(".names.yaml"):
            assert f"specs/real/{spec.name}" in text, spec.name
