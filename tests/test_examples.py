"""The scripts in examples/ run and do what their docstrings say."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _restore_threads() -> Any:
    """The examples set one torch thread; give the next tests torch's setting back."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _main(name: str) -> Any:
    return runpy.run_path(str(ROOT / "examples" / name), run_name="example")["main"]


def test_01_compile_runs_the_spec() -> None:
    """01 compiles global attention and returns logits [B, classes] and weights [B, N]."""
    out = _main("01_compile.py")()
    assert tuple(out["logits"].shape) == (4, 4)
    assert tuple(out["attention"].shape) == (4, 12)
    assert out["attention"].sum(-1).sub(1).abs().max() < 1e-5


def test_02_own_loop_trains_soft_and_hard_attention() -> None:
    """02 trains a soft and a hard (REINFORCE) spec; losses are finite, soft goes down."""
    import math

    res = _main("02_own_loop.py")(steps=6)
    assert set(res) == {"global_attention", "glimpse_hard"}
    assert all(math.isfinite(x) for losses in res.values() for x in losses)
    assert res["global_attention"][-1] < res["global_attention"][0]


def test_02_reinforce_term_is_present_for_the_hard_spec() -> None:
    """The hard spec's REINFORCE term is non-zero after a training-mode forward."""
    import torch

    import attngraph
    from attngraph.frontend import load_spec
    from attngraph.lower.rules.hard import model_reinforce_loss

    g = load_spec(ROOT / "specs" / "glimpse_hard.yaml")
    model = attngraph.compile(g, seed=0).train()
    model(image=torch.rand(2, 1, 32, 32))
    assert float(model_reinforce_loss(model, torch.tensor([1.0, 0.0])).detach().abs()) > 0


def test_03_plot_attention_writes_a_png(tmp_path: Path) -> None:
    """03 trains briefly and writes a PNG of the words' weights."""
    path = _main("03_plot_attention.py")(out=str(tmp_path / "att.png"), steps=10)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_04_export_diagram_writes_both_views(tmp_path: Path) -> None:
    """04 writes Mermaid and DOT text for both views (and SVG when dot exists)."""
    paths = _main("04_export_diagram.py")(out_dir=str(tmp_path))
    names = {p.name for p in paths}
    for view in ("architecture", "unrolled"):
        assert f"global_attention.{view}.mmd" in names
        assert f"global_attention.{view}.dot" in names
    assert all(p.stat().st_size > 100 for p in paths)
    dot = (tmp_path / "global_attention.architecture.dot").read_text()
    assert dot.lstrip().startswith(("digraph", "strict digraph"))


@pytest.mark.parametrize("name", ["01_compile.py", "02_own_loop.py",
                                  "03_plot_attention.py", "04_export_diagram.py"])
def test_examples_have_a_docstring_and_main(name: str) -> None:
    """Every example explains itself and runs as a script (a __main__ guard)."""
    text = (ROOT / "examples" / name).read_text()
    assert text.startswith('"""') and 'if __name__ == "__main__":' in text
