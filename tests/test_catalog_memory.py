"""The catalog's memory_network addresses its slots for real: its read/write
weights over the slots are not uniform. With equal initial slots (``init:
constant``) every cosine is equal, the weights are exactly 1/S at every step
and the memory is one vector copied S times; the spec's learned, distinct M_0
is what makes the attention mean something."""

from __future__ import annotations

from pathlib import Path

import pytest

from attngraph.frontend import load_spec, loads_spec

torch = pytest.importorskip("torch")

SPEC = Path(__file__).resolve().parents[1] / "specs" / "memory_network.yaml"
#: the least max − min of one step's weights over the 16 slots (uniform: 0)
MARGIN = 0.02


def _weights(spec: str | Path, seed: int) -> torch.Tensor:
    """The weights [B, T, S] at init (seed ``seed``) on 64 examples of the task of a
    spec (a file, or a spec's text)."""
    import attngraph
    from attngraph.train.tasks.lookup import bind_inputs, task_for

    graph = load_spec(spec) if isinstance(spec, Path) else loads_spec(spec)
    task = task_for(graph, None, seed)
    model = attngraph.compile(graph, seed=seed).eval()
    batch = task.batch(64, split="valid")
    with torch.no_grad():
        return model(**bind_inputs(graph, task, batch))["weights"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_memory_network_weights_over_slots_are_not_uniform(seed: int) -> None:
    """At init, with the spec's own initialisation, every example's weights at every
    step sum to one and differ between slots by more than MARGIN (max − min)."""
    w = _weights(SPEC, seed)
    assert w.shape[1:] == (8, 16)
    assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5)
    spread = w.max(-1).values - w.min(-1).values  # (B, T)
    assert float(spread.min()) > MARGIN, float(spread.min())


def test_equal_initial_slots_give_exactly_uniform_weights() -> None:
    """The degenerate version the spec avoids: with ``init: constant`` (and β learned,
    starting at 1) the weights are 1/16 at every step of every example, so the test
    above fails on it."""
    text = SPEC.read_text(encoding="utf-8")
    text = text.replace("init: learned, label: M_0", "init: constant, label: M_0")
    text = text.replace("beta: 5}", "beta: learned}")
    assert "init: constant" in text and "beta: learned" in text
    w = _weights(text, 0)
    assert float((w.max(-1).values - w.min(-1).values).max()) < 1e-6
    assert torch.allclose(w, torch.full_like(w, 1 / 16), atol=1e-6)
