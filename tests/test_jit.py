"""``torch.jit.trace`` of a compiled model is right at a new shape, or refuses clearly:
a loop over a steps input (its number of steps read off an input) would record the
traced number of steps, so tracing it raises a located error that names the loop and
suggests torch.export; everything else traces into a length-generic program."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from export_support import new_inputs, positional  # noqa: E402

import attngraph  # noqa: E402
from attngraph.errors import LoweringError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))

RNN = """\
attngraph: 1
name: rnn_items
dims: {vocab: 10, e: 8, h: 6}
inputs:
  tokens: {type: tokens, vocab: vocab}
nodes:
  x: {kind: items, from: tokens, embed: e}
  enc: {kind: rnn, cell: lstm, from: x, hidden: h, bidirectional: true, layers: 2}
outputs: {out: enc.out, state: enc.state}
"""


def _trace(model: Any, args: list[Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes on Python values
        return torch.jit.trace(model, tuple(args), strict=False)


def _loops_over_an_input(graph: Any) -> list[str]:
    """The loops whose number of steps is read off an input (not a fixed ``steps``)."""
    return [n.id for _, n in graph.walk() if n.kind == "loop"
            and not isinstance(n.spec.steps, int)]


def test_tracing_a_loop_over_a_steps_input_is_refused_at_the_loop() -> None:
    """bahdanau_translation's decoder loop runs one step per target item: tracing it
    raises one LoweringError at the loop's ``steps`` line naming torch.export."""
    path = ROOT / "specs" / "bahdanau_translation.yaml"
    graph = attngraph.load_spec(path)
    model = attngraph.compile(graph, seed=0).eval()
    ex = new_inputs(graph, batch=3, lengths=(7, 5), seed=0)
    with pytest.raises(LoweringError) as info:
        _trace(model, positional(model, ex))
    text = info.value.format()  # location, message, source line, hint
    assert "loop 'dec'" in text and "torch.jit.trace" in text
    assert "torch.export" in text and "attngraph export" in text
    assert f"{path.name}:57:" in text  # the loop's `steps: target` line
    with torch.no_grad():  # the eager model is untouched by the refusal
        assert model(**ex)["logits"].shape == (3, 5, 12)


def test_a_traced_masked_rnn_is_right_at_a_new_shape_with_an_empty_row(
        spec_file: Any) -> None:
    """A two-layer bidirectional LSTM over padded items, traced on rows with some
    padding, equals the eager model to 1e-6 at a new batch and length where one row
    has no real item (the empty-row fix is recorded, not skipped, by the tracer)."""
    model = attngraph.compile(spec_file(RNN), seed=0).eval()
    x = torch.randint(0, 10, (3, 7), generator=torch.Generator().manual_seed(0))
    mask = torch.arange(7)[None, :] < torch.tensor([7, 5, 3])[:, None]  # True = real
    traced = _trace(model, [x, mask])
    x2 = torch.randint(0, 10, (4, 9), generator=torch.Generator().manual_seed(1))
    mask2 = torch.arange(9)[None, :] < torch.tensor([9, 4, 0, 1])[:, None]
    got, want = traced(x2, mask2), model(x2, mask2)
    assert got["out"].shape == (4, 9, 12)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6, msg=k)


@pytest.mark.slow
@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_every_catalog_spec_traces_right_or_refuses(path: Path) -> None:
    """Traced at batch 3 and lengths 7 and 5, each catalog spec equals eager to 1e-6 at
    batch 5 and lengths 11 and 6, or, exactly when it has a loop over a steps input,
    refuses with the loop's name."""
    graph = attngraph.load_spec(path)
    model = attngraph.compile(graph, seed=0).eval()
    ex = new_inputs(graph, batch=3, lengths=(7, 5), seed=0)
    loops = _loops_over_an_input(graph)
    if loops:
        with pytest.raises(LoweringError, match=f"loop '{loops[0]}'.*torch.jit.trace"):
            _trace(model, positional(model, ex))
        return
    traced = _trace(model, positional(model, ex))
    new = new_inputs(graph, batch=5, lengths=(11, 6), seed=1)
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # a latent samples in eval: the same draws in both
        got = traced(*positional(model, new))
        torch.manual_seed(0)
        want = model(**new)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=1e-6, msg=k)
