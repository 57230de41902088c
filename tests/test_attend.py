"""Attention pictures: the view follows the spec's inputs and attention output shape."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from attngraph.errors import TrainingError
from attngraph.pipeline import load_spec
from attngraph.train.attend import draw, pick_view
from attngraph.train.tasks import task_for

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
    from attngraph.train.tasks import bind_inputs

    torch.set_num_threads(1)
    graph = load_spec(ROOT / "specs" / f"{name}.yaml")
    task = task_for(graph, None, 0)
    model = attngraph.compile(graph, seed=0).eval()
    batch = task.batch(size, split="test")
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
