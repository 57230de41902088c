"""The playground in a real browser (issue 28): headless Chromium from the system's
packages, driven by playwright (never playwright's own browser download).

Open a catalog spec, break it, see the error marked at its line and column in the
editor, fix it, see both diagrams redrawn, click a drawn node and see its lines
selected (and the reverse), with no console error. Set ``ATTNGRAPH_SCREENSHOT`` to a
path (``docs/images/playground.png``) to keep a screenshot of the page; without it
nothing is written into the tree.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
GLOBAL = (ROOT / "specs" / "global_attention.yaml").read_text(encoding="utf-8")
#: The browsers looked for, in order (ATTNGRAPH_CHROMIUM names another).
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

pytestmark = [pytest.mark.dot, pytest.mark.browser]


def _chromium() -> str | None:
    named = os.environ.get("ATTNGRAPH_CHROMIUM")
    if named:
        return named if Path(named).exists() else shutil.which(named)
    return next((p for p in map(shutil.which, _BROWSERS) if p), None)


@pytest.fixture(scope="module")
def page() -> Iterator[Any]:
    """A page of a playground served from a temporary folder, with its console kept."""
    sync_api = pytest.importorskip(
        "playwright.sync_api",
        reason="the browser tests need playwright (pip install -e '.[dev]', or make venv)")
    exe = _chromium()
    if exe is None:
        pytest.skip("Chromium is not installed: `make chromium` (or `make test`) installs "
                    "it as root with apt-get (apt-get install chromium); or set "
                    "ATTNGRAPH_CHROMIUM to a Chrome or Chromium")
    import tempfile

    from attngraph.playground import make_server

    with tempfile.TemporaryDirectory() as tmp:
        srv = make_server(tmp, port=0)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=exe, headless=True,
                                         args=["--no-sandbox", "--disable-gpu"])
            pg = browser.new_page(viewport={"width": 1400, "height": 860})
            pg.problems = []  # type: ignore[attr-defined]
            pg.on("console", lambda m: m.type == "error" and pg.problems.append(m.text))
            pg.on("pageerror", lambda e: pg.problems.append(str(e)))
            pg.goto(srv.url + "#catalog%3Aglobal_attention")
            pg.wait_for_selector("body[data-checked] #svg-architecture svg", timeout=15_000)
            yield pg
            browser.close()
        srv.shutdown()
        srv.server_close()


def _where(text: str, needle: str) -> tuple[int, int, int]:
    """(offset, 1-based line, 1-based col) of ``needle`` in ``text``."""
    at = text.index(needle)
    return at, text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


def _replace(page: Any, start: int, end: int, typed: str) -> None:
    """Select ``start:end`` in the editor and type over it, as a person would."""
    page.focus("#source")
    page.evaluate("([a, b]) => document.getElementById('source').setSelectionRange(a, b)",
                  [start, end])
    page.keyboard.type(typed)


def _versions(page: Any) -> list[str]:
    return page.eval_on_selector_all(".svg", "els => els.map(e => e.dataset.version || '')")


def test_break_fix_click_in_chromium(page: Any) -> None:
    """The whole flow: the located error, both diagrams following the fix, a node click
    selecting its lines, the cursor marking its node, no console error."""
    text = page.input_value("#source")
    assert text == GLOBAL
    before = _versions(page)

    # break it: a new layer h before the classifier, reading a node that does not exist
    old = "  logits: {kind: linear, from: z, out: classes}"
    at, _, _ = _where(text, old)
    _replace(page, at, at + len(old), "  h:      {kind: linear, from: zz, out: d}\n"
             "  logits: {kind: linear, from: h, out: classes}")
    broken = page.input_value("#source")
    _, line, col = _where(broken, "zz")
    page.wait_for_selector("#errors li", timeout=10_000)
    where = page.inner_text("#errors li .at")
    assert where == f"{line}:{col}", (where, line, col)
    assert page.is_visible(f"#gutter-lines .g.err[data-line='{line}']")
    mark = page.locator(f"#backdrop-lines .mark[data-line='{line}']")
    assert mark.inner_text() == "zz"
    page.click("#errors li")  # the cursor goes to the error, its message beside it
    assert page.evaluate("() => document.getElementById('source').selectionStart") == (
        broken.index("zz"))
    bubble = page.inner_text("#bubble")
    assert bubble.startswith(f"{line}:{col}") and "zz" in bubble and "hint" in bubble
    assert page.get_attribute("#svg-architecture", "class").split().count("stale") == 1

    # fix it: both diagrams are redrawn, and now draw h
    fix_at = broken.index("zz")
    _replace(page, fix_at, fix_at + 2, "z")
    page.wait_for_function("() => !document.querySelector('#errors li') && "
                           "!document.querySelector('.svg.stale')", timeout=10_000)
    after = _versions(page)
    assert all(a and a != b for a, b in zip(after, before, strict=True)), (before, after)
    assert page.locator("#svg-architecture g.node[data-node='h']").count() == 1
    assert page.locator("#svg-unrolled g.node[data-node='h']").count() >= 1
    assert "ok" in page.inner_text("#status")

    # click a node in the diagram: its lines are selected in the editor
    fixed = page.input_value("#source")
    _, score_line, _ = _where(fixed, "score:")
    page.click("#svg-architecture g.node[data-node='score']")
    selected = page.evaluate("() => { const t = document.getElementById('source');"
                             " return t.value.slice(t.selectionStart, t.selectionEnd); }")
    assert selected == fixed.splitlines()[score_line - 1]
    assert page.is_visible(f"#gutter-lines .g.sel[data-line='{score_line}']")
    assert "picked" in page.get_attribute("#svg-architecture g.node[data-node='score']", "class")

    # the reverse: the cursor on p's line marks p in both diagrams
    p_at, _, _ = _where(fixed, "p:      {kind: softmax")
    page.evaluate("(a) => { const t = document.getElementById('source'); t.focus();"
                  " t.setSelectionRange(a, a); }", p_at + 3)
    page.wait_for_selector("#svg-architecture g.node.picked[data-node='p']", timeout=5_000)
    assert page.locator("#svg-unrolled g.node.picked[data-node='p']").count() >= 1

    shot = os.environ.get("ATTNGRAPH_SCREENSHOT")
    if shot:
        page.click("#svg-architecture g.node[data-node='score']")
        Path(shot).parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=shot)
    assert page.problems == []
