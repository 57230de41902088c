"""Attention pictures: the view follows the spec's inputs and attention output shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from attngraph.errors import TrainingError
from attngraph.frontend import load_spec
from attngraph.train.pictures.attend import draw, pick_view
from attngraph.train.tasks.lookup import task_for

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _restore_threads() -> Any:
    """The examples set one torch thread; give the next tests torch's setting back."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _forward(name: str, size: int = 3) -> tuple[object, object, dict, dict]:
    import torch

    import attngraph
    from attngraph.train.tasks.lookup import bind_inputs

    torch.set_num_threads(1)
    graph = load_spec(ROOT / "specs" / f"{name}.yaml")
    task = task_for(graph, None, 0)
    model = attngraph.compile(graph, seed=0).eval()
    batch = task.batch(size, split="valid")
    with torch.no_grad():
        out = model(**bind_inputs(graph, task, batch))
    return graph, task, out, batch


@pytest.mark.parametrize(("spec", "view", "output"), [
    ("global_attention", "words", "attention"),
    ("intra_attention", "words", "pooling"),
    ("multihead_attention", "words", "attention"),
    ("bahdanau_translation", "alignment", "attention"),
    ("glimpse_hard", "glimpses", "locations"),
    ("glimpse_soft", "tiles", "attention"),
    ("image_self_attention", "tiles", "pooling"),
    ("graph_attention", "graph", "attention"),
    ("memory_network", "matrix", "weights"),
    ("ntm_copy", "heads", "weights"),
    ("caption_generation", "steps", "attention"),
    ("object_recognition", "steps", "attention"),
    ("image_generation", "drawing", "canvases"),
    ("handwriting_generation", "window", "attention"),
])
def test_view_follows_inputs_and_output_shape(spec: str, view: str, output: str,
                                              tmp_path: Path) -> None:
    """Each kind of catalog spec gets its picture, written as a PNG."""
    graph, task, out, batch = _forward(spec)
    one = {k: v[0] for k, v in out.items()}
    assert pick_view(graph, one) == (view, output)
    path, got = draw(graph, task, out, batch, tmp_path / f"{spec}.png", example=1)
    assert got == view
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 2000


def test_svg_by_suffix(tmp_path: Path) -> None:
    """The picture's format follows the file suffix."""
    graph, task, out, batch = _forward("global_attention")
    path, _ = draw(graph, task, out, batch, tmp_path / "a.svg")
    assert path.read_text().lstrip().startswith("<?xml")


def test_example_outside_the_batch_is_refused(tmp_path: Path) -> None:
    """An example index past the test batch is a TrainingError naming the valid range."""
    graph, task, out, batch = _forward("global_attention", size=3)
    with pytest.raises(TrainingError, match="outside the test batch of 3") as err:
        draw(graph, task, out, batch, tmp_path / "a.png", example=3)
    assert err.value.hint and "0 and 2" in err.value.hint


def test_spec_without_attention_output_is_refused() -> None:
    """A spec declaring no attention output says which outputs it has and what to add."""
    graph, _, out, _ = _forward("transformer_encoder")
    with pytest.raises(TrainingError, match="no attention output") as err:
        pick_view(graph, {k: v[0] for k, v in out.items()})
    assert err.value.hint and "logits" in err.value.hint


def test_a_query_outside_the_graph_is_refused(tmp_path: Path) -> None:
    """`--query` past the graph's nodes is refused with the range (it used to wrap
    around silently to another node)."""
    graph, task, out, batch = _forward("graph_attention")
    with pytest.raises(TrainingError, match="not a node of this graph") as err:
        draw(graph, task, out, batch, tmp_path / "g.png", query=10_000)
    assert err.value.hint and "from 0 to" in err.value.hint
    path, _ = draw(graph, task, out, batch, tmp_path / "g.png", query=1)
    assert path.exists()


@pytest.mark.parametrize("spec", ["caption_generation", "object_recognition"])
def test_steps_view_draws_each_step_over_the_canvas_titled_by_its_token(spec: str) -> None:
    """Weights [T, P] over an image's tiles get one panel per step: the canvas with
    that step's weights laid over it as the canvas's grid of tiles (rows × cols
    from its shape), titled by the token the model emitted at the step, with a box
    on the tile of the digit that step names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from attngraph.train.pictures.steps import canvas_grid, steps_figure

    graph, task, out, batch = _forward(spec)
    w, logits = out["attention"][0], out["logits"][0]
    ex = {k: v[0] for k, v in batch.items()}
    rows, cols = canvas_grid(graph, w.shape[-1])
    h, wd = ex["image"].shape[-2:]
    assert rows * cols == w.shape[-1] and h * cols == wd * rows
    fig, what = steps_figure(plt, w, ex, {"logits": logits}, task, graph)
    try:
        assert len(fig.axes) == w.shape[0]
        names = task.token_names("target", logits.argmax(-1).tolist())
        for t, ax in enumerate(fig.axes):
            assert ax.get_title().startswith(f"step {t + 1}: {names[t]}")
            overlay = ax.get_images()[1].get_array()
            assert torch.allclose(torch.as_tensor(overlay.data), w[t].reshape(rows, cols))
            boxes = ax.patches
            assert len(boxes) == (1 if int(ex["digit_tile"][t]) >= 0 else 0)
        assert f"{rows}×{cols} tiles" in what
    finally:
        plt.close(fig)


def test_draw_model_draws_the_test_batch_through_a_model(tmp_path: Path) -> None:
    """draw_model draws what `attngraph attend` draws of a run: the model's outputs
    on the task's test batch, at the dpi asked (a smaller dpi, a smaller file), and
    leaves the model in the mode it was in."""
    import attngraph
    from attngraph.train.pictures.attend import draw_model

    graph = load_spec(ROOT / "specs" / "global_attention.yaml")
    task = task_for(graph, None, 0)
    model = attngraph.compile(graph, seed=0).train()
    small, view = draw_model(graph, task, model, tmp_path / "a.png", size=8, dpi=60)
    big, _ = draw_model(graph, task, model, tmp_path / "b.png", size=8, dpi=120)
    assert view == "words" and model.training
    assert small.read_bytes()[:8] == PNG and small.stat().st_size < big.stat().st_size
