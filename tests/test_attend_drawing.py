"""The ``drawing`` view of ``attngraph attend``: a spec that declares ``canvases``
over an image is drawn as a row of panels, the image then σ(c_t) per step, with the
read and write windows spanned by the first and last filters."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.frontend import load_spec  # noqa: E402
from attngraph.train.pictures.attend import draw  # noqa: E402
from attngraph.train.pictures.drawing import window  # noqa: E402
from attngraph.train.tasks.lookup import bind_inputs, task_for  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_window_spans_the_first_and_last_filter_centres() -> None:
    """A filter's centre is its mean pixel (from 0): Gaussians centred at 4 and 8 on
    the x axis and 4 and 6 on the y axis give the box (4, 4) to (8, 6)."""
    px = torch.arange(12.0)
    fx = torch.stack([torch.exp(-((px - c) ** 2) / 2) for c in (4.0, 6.0, 8.0)])
    fy = torch.stack([torch.exp(-((px - c) ** 2) / 2) for c in (4.0, 5.0, 6.0)])
    box = window(fx / fx.sum(-1, keepdim=True), fy / fy.sum(-1, keepdim=True))
    assert all(abs(a - b) < 1e-3 for a, b in zip(box, (4.0, 4.0, 8.0, 6.0), strict=True))


def test_image_generation_is_drawn_step_by_step(tmp_path: Path) -> None:
    """DRAW's outputs give the drawing view: one PNG with the image and the 6 canvases
    side by side (a picture much wider than tall)."""
    from matplotlib.image import imread

    graph = load_spec(ROOT / "specs" / "image_generation.yaml")
    task = task_for(graph, None, 0)
    batch = task.batch(2, split="valid")
    model = attngraph.compile(graph, seed=0).eval()
    with torch.no_grad():
        out = model(**bind_inputs(graph, task, batch))
    path, view = draw(graph, task, out, batch, tmp_path / "draw.png", example=1)
    assert view == "drawing"
    h, w = imread(path).shape[:2]
    assert w > 3 * h
