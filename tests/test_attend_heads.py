"""The ``heads`` picture of ``attngraph attend``: a memory's write and read weights
side by side, one row per step labelled by its input."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("matplotlib")

from attngraph.frontend import load_spec  # noqa: E402
from attngraph.train.pictures.attend import pick_view  # noqa: E402
from attngraph.train.pictures.heads import draw_heads, has_heads  # noqa: E402
from attngraph.train.tasks.lookup import get_task  # noqa: E402


def test_the_picture_is_write_then_read_weights_with_the_inputs_as_rows() -> None:
    """The heatmap holds the write weights in the first S columns, a gap, then the read
    weights; its rows are labelled with the step's input (bits, 'end', '·')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    task = get_task("copy_bits", bits=2, min_length=2, max_length=2)
    seq = torch.tensor([2, 4, 5, 0, 0])  # 01 11 end · ·
    gen = torch.Generator().manual_seed(0)
    write = torch.softmax(torch.randn(5, 3, generator=gen), -1)
    read = torch.softmax(torch.randn(5, 3, generator=gen), -1)
    fig, ax = plt.subplots()
    try:
        what = draw_heads(ax, {"write": write, "weights": read}, {"seq": seq}, task)
        shown = torch.from_numpy(ax.images[0].get_array().filled(float("nan")))
        labels = [t.get_text() for t in ax.get_yticklabels()]
    finally:
        plt.close(fig)
    torch.testing.assert_close(shown[:, :3].float(), write)
    torch.testing.assert_close(shown[:, 4:].float(), read)
    assert shown[:, 3].isnan().all()
    assert labels == ["01", "11", "end", "·", "·"]
    assert "write and read" in what


def test_heads_need_write_and_read_weights_of_one_shape() -> None:
    """Only outputs with both ``write`` and ``weights`` of the same [T, S] are heads."""
    assert has_heads({"write": torch.ones(4, 3), "weights": torch.ones(4, 3)})
    assert not has_heads({"write": torch.ones(4, 3), "weights": torch.ones(4, 5)})
    assert not has_heads({"weights": torch.ones(4, 3)})


def test_a_spec_with_write_and_read_weights_gets_the_heads_view() -> None:
    """ntm_copy declares ``write`` and ``weights``: the heads view; memory_network,
    with one head, keeps the matrix view."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "specs"
    one = {"write": torch.ones(7, 8) / 8, "weights": torch.ones(7, 8) / 8,
           "logits": torch.zeros(7, 18)}
    assert pick_view(load_spec(root / "ntm_copy.yaml"), one) == ("heads", "weights")
    del one["write"]
    assert pick_view(load_spec(root / "memory_network.yaml"), one) == ("matrix", "weights")
