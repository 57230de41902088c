"""``attngraph.compile(spec, block=...)``: one block of a spec as a layer. It computes
what the block computes inside the whole model, composes inside a user's module
(gradients, torch.export with a dynamic length), and checks its inputs by name."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.errors import LoweringError  # noqa: E402
from attngraph.lower.runtime.module import Runtime  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ENCODER = ROOT / "specs" / "transformer_encoder.yaml"


def test_a_block_layer_equals_the_block_inside_the_model() -> None:
    """With the weights of the model's first encoder round, the layer gives that round's
    output to 1e-6, and a padding mask changes only what the model's mask changes."""
    model = attngraph.compile(ENCODER, seed=0).eval()
    layer = attngraph.compile(ENCODER, block="layer", seed=1).eval()
    first = model.nodes["enc"].rounds[0]
    layer.body.load_state_dict(first.state_dict())
    h = torch.randn(3, 6, 32, generator=torch.Generator().manual_seed(0))
    mask = torch.arange(6)[None, :] < torch.tensor([6, 4, 2])[:, None]
    with torch.no_grad():
        want = first.run({"h": h}, Runtime(batch=3))[""]
        masked = first.run({"h": h}, Runtime(batch=3, masks={"N": mask}))[""]
        torch.testing.assert_close(layer(h), want, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(layer(h=h, h_mask=mask), masked, atol=1e-6, rtol=1e-6)


class Classifier(torch.nn.Module):
    """A user's model with an attngraph block in the middle."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(20, 32)
        self.encoder = attngraph.compile(ENCODER, block="layer", seed=0)
        self.head = torch.nn.Linear(32, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(ids)).mean(1))


def test_a_block_layer_composes_trains_and_exports() -> None:
    """Inside a user's module: every parameter of the block gets a gradient, and
    torch.export with a dynamic batch and length runs at a new shape equal to eager."""
    from torch.export import Dim, export

    net = Classifier()
    ids = torch.randint(0, 20, (4, 7), generator=torch.Generator().manual_seed(0))
    torch.nn.functional.cross_entropy(net(ids), torch.tensor([0, 1, 2, 0])).backward()
    grads = [p.grad for p in net.encoder.parameters()]
    assert grads and all(g is not None and bool(g.abs().sum() > 0) for g in grads)
    net.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = export(net, (ids,), dynamic_shapes={"ids": {0: Dim("B"), 1: Dim("N")}})
    new = torch.randint(0, 20, (6, 11), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(program.module()(new), net(new), atol=1e-6, rtol=1e-6)


def test_a_loop_block_is_a_recurrent_cell() -> None:
    """bahdanau_translation's ``decode`` block is one decoder step: (enc, state, y) in,
    a dict of logits, attention and the next state out."""
    cell = attngraph.compile(ROOT / "specs" / "bahdanau_translation.yaml", block="decode",
                             seed=0)
    assert list(cell.inputs) == ["enc", "state", "y"]
    out = cell(torch.randn(2, 5, 64), torch.zeros(2, 32), torch.tensor([0, 3]))
    assert {k: tuple(v.shape) for k, v in out.items()} == \
        {"logits": (2, 12), "attention": (2, 5), "state": (2, 32)}


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((torch.randn(3, 32),), {}, r"input 'h' has shape \(3, 32\), expected \(B, N, 32\)"),
    ((torch.randn(3, 6, 16),), {}, r"input 'h' has shape \(3, 6, 16\), expected \(B, N, 32\)"),
    ((torch.zeros(3, 6, 32, dtype=torch.long),), {}, "input 'h' is torch.int64, expected a float"),
    ((), {}, "missing input 'h'"),
    ((torch.randn(3, 6, 32),), {"x": torch.randn(1)}, "unknown input 'x'"),
    ((torch.randn(3, 6, 32),), {"h_mask": torch.ones(3, 6)},
     r"h_mask is torch.float32 \(3, 6\), expected a bool tensor \(3, 6\)"),
])
def test_a_block_layer_checks_its_inputs_by_name(args: tuple, kwargs: dict, match: str) -> None:
    """A wrong input is one LoweringError naming the block, the input and the expected
    shape or dtype, located at the node that uses the block."""
    layer = attngraph.compile(ENCODER, block="layer", seed=0)
    with pytest.raises(LoweringError, match=match) as info:
        layer(*args, **kwargs)
    assert "block 'layer'" in str(info.value)
    assert "transformer_encoder.yaml:47:" in str(info.value)


def test_an_unknown_block_names_the_blocks_of_the_spec() -> None:
    """A block name no node uses fails with the names that are used."""
    with pytest.raises(LoweringError, match="no node uses a block named 'layers'") as info:
        attngraph.compile(ENCODER, block="layers")
    assert info.value.hint == "blocks used in this spec: layer"
