"""Forward's arguments are checked against the declared inputs: each wrong one is a
LoweringError naming the argument, located at its input, with a hint; right ones
(including ragged trailing masks) pass unchanged."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.errors import LoweringError  # noqa: E402

SPEC = """\
attngraph: 1
name: inputs
dims: {vocab: 20, d: 8}
inputs:
  tokens: {type: tokens, vocab: vocab}
  mem: {type: vectors, dim: d, length: N}
  img: {type: image, channels: 1, height: 32, width: 32}
  y: {type: labels, classes: 3}
nodes:
  x: {kind: items, from: tokens, embed: d}
  a: {kind: add, from: [x, mem]}
  s: {kind: scorer, fn: mlp, key: a}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: a}
  pi: {kind: items, from: img, patches: [8, 8], dim: d}
  ye: {kind: embedding, from: y, dim: d}
outputs: {z: z, p: p, pi: pi, ye: ye}
"""

GRAPH = """\
attngraph: 1
name: graph_inputs
inputs:
  g: {type: graph, dim: 4}
nodes:
  h: {kind: items, from: g}
  s: {kind: scorer, fn: dot, query: h, key: h}
  p: {kind: softmax, scores: s, mask: {adjacency: g}}
  z: {kind: readout, weights: p, values: h}
outputs: {z: z}
"""


def _line(text: str, name: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith(f"  {name}:"))


@pytest.fixture(scope="module")
def model() -> Any:
    return attngraph.compile(SPEC, seed=0)


def _kw(**over: Any) -> dict[str, Any]:
    g = torch.Generator().manual_seed(0)
    kw: dict[str, Any] = {
        "tokens": torch.randint(0, 20, (2, 5), generator=g),
        "mem": torch.randn(2, 5, 8, generator=g),
        "img": torch.randn(2, 1, 32, 32, generator=g),
        "y": torch.randint(0, 3, (2,), generator=g),
    }
    kw.update(over)
    return {k: v for k, v in kw.items() if v is not None}


def _refused(model: Any, arg: str, text: str = SPEC, **over: Any) -> LoweringError:
    """The error of a call with ``over``, checked to name ``arg`` at its input's line."""
    with pytest.raises(LoweringError) as exc:
        model(**_kw(**over))
    err = exc.value
    assert err.message.startswith(f"input '{arg}': "), err.message
    assert err.loc.line == _line(text, arg.split("_")[0]), err.format()
    assert err.hint
    return err


def test_right_inputs_pass(model: Any) -> None:
    """Declared shapes, dtypes and ranges run (int32 ids too)."""
    out = model(**_kw())
    assert out["z"].shape == (2, 8) and out["pi"].shape == (2, 16, 8)
    again = model(**_kw(tokens=_kw()["tokens"].int(), y=_kw()["y"].int()))
    torch.testing.assert_close(again["z"], out["z"])


def test_a_missing_batch_axis_is_named(model: Any) -> None:
    """A (N, d) tensor for vectors [N, d] asks for the batch axis."""
    err = _refused(model, "mem", mem=torch.randn(5, 8))
    assert "expected a 3-D tensor (B, N, 8)" in err.message and "(5, 8)" in err.message
    assert "mem.unsqueeze(0)" in (err.hint or "")


def test_a_wrong_image_size_is_named(model: Any) -> None:
    """A 28x28 image for a 32x32 input names the axis and the spec field."""
    err = _refused(model, "img", img=torch.randn(2, 1, 28, 28))
    assert "axis 2 (height) is 28, not 32" in err.message
    assert "height to 28" in (err.hint or "")


def test_a_wrong_feature_size_is_named(model: Any) -> None:
    """Vectors of 7 features for dim 8."""
    err = _refused(model, "mem", mem=torch.randn(2, 5, 7))
    assert "axis 2 (dim) is 7, not 8" in err.message


def test_float_tokens_are_refused(model: Any) -> None:
    """Ids must be integers, never silently cast."""
    err = _refused(model, "tokens", tokens=torch.rand(2, 5) * 10)
    assert "integer ids" in err.message and "tokens.long()" in (err.hint or "")


@pytest.mark.parametrize("bad", [20, -1])
def test_ids_out_of_the_vocab_are_refused(model: Any, bad: int) -> None:
    """An id at or above vocab, or negative, is an error naming the range."""
    tokens = torch.randint(0, 20, (2, 5))
    tokens[1, 3] = bad
    err = _refused(model, "tokens", tokens=tokens)
    assert "ids must lie in 0..19 (vocab = 20)" in err.message
    assert str(bad) in err.message


def test_labels_out_of_their_classes_are_refused(model: Any) -> None:
    """Labels are checked against ``classes``."""
    err = _refused(model, "y", y=torch.tensor([0, 3]))
    assert "0..2 (classes = 3)" in err.message


def test_features_must_be_float(model: Any) -> None:
    """Integer features are refused with the cast to make."""
    err = _refused(model, "mem", mem=torch.ones(2, 5, 8, dtype=torch.long))
    assert "float features" in err.message and "mem.float()" in (err.hint or "")


def test_a_non_tensor_is_refused(model: Any) -> None:
    """A list or array is not silently converted."""
    err = _refused(model, "mem", mem=[[0.0] * 8] * 5)
    assert "got list" in err.message and "torch.as_tensor(mem)" in (err.hint or "")


def test_a_sequence_first_tensor_is_refused(model: Any) -> None:
    """(N, B, d) next to batch-first inputs: the batch sizes disagree."""
    err = _refused(model, "mem", mem=torch.randn(5, 2, 8))
    assert "batch size 5" in err.message and "'tokens' has batch size 2" in err.message
    assert "mem.transpose(0, 1)" in (err.hint or "")


def test_inputs_sharing_a_length_must_agree(model: Any) -> None:
    """tokens and mem both have length N: 5 and 6 items is an error."""
    err = _refused(model, "mem", mem=torch.randn(2, 6, 8))
    assert "6 items" in err.message and "5" in err.message and "length N" in err.message


@pytest.mark.parametrize("mask", [
    torch.zeros(2, 5),
    torch.tensor([[0.0] * 5, [0.0, 0.0, 0.0, float("-inf"), float("-inf")]]),
    torch.ones(2, 5, dtype=torch.long),
], ids=["float", "additive", "long"])
def test_non_bool_masks_are_refused(model: Any, mask: Any) -> None:
    """A float (additive) or integer mask is never cast to bool: the hint says how
    to make the bool mask from each convention."""
    err = _refused(model, "tokens_mask", tokens_mask=mask)
    assert "expected a bool mask (True = a real item)" in err.message
    hint = err.hint or ""
    assert "tokens_mask == 0" in hint and "~tokens_mask" in hint and ".bool()" in hint


@pytest.mark.parametrize("shape", [(2, 6), (3, 5), (2, 5, 1)])
def test_mask_shape_must_be_that_of_its_input(model: Any, shape: tuple[int, ...]) -> None:
    """A mask is (B, N) of its input."""
    _refused(model, "tokens_mask", tokens_mask=torch.ones(shape, dtype=torch.bool))


@pytest.mark.parametrize("rows", [
    [[False, False, False, True, True], [False] * 5],  # key_padding_mask, right padding
    [[True, False, True, True, True], [True] * 5],  # a hole
], ids=["inverted", "hole"])
def test_masks_with_a_real_item_after_padding_are_refused(model: Any, rows: list) -> None:
    """A PyTorch key_padding_mask (True = pad) or left padding has a real item after a
    padded one: refused, the hint naming ``~mask`` and trailing padding."""
    err = _refused(model, "tokens_mask", tokens_mask=torch.tensor(rows))
    assert "has a real item after padding" in err.message
    assert "~tokens_mask" in (err.hint or "") and "pad at the end" in (err.hint or "")


def test_trailing_masks_pass_and_mask(model: Any) -> None:
    """Ragged trailing masks, an empty row, and an all-False mask are accepted;
    padded items get no weight."""
    mask = torch.tensor([[True, True, True, False, False], [False] * 5])
    out = model(**_kw(tokens_mask=mask, mem_mask=mask))
    assert (out["p"][~mask] == 0).all() and (out["p"][1] == 0).all()
    none = torch.zeros(2, 5, dtype=torch.bool)
    assert (model(**_kw(tokens_mask=none))["p"] == 0).all()


def test_masks_of_one_length_must_be_equal(model: Any) -> None:
    """tokens and mem share N, so they share its padding: different masks are refused."""
    a = torch.tensor([[True] * 5, [True, True, False, False, False]])
    b = torch.tensor([[True] * 5, [True, True, True, False, False]])
    err = _refused(model, "mem_mask", tokens_mask=a, mem_mask=b)
    assert "differs from 'tokens_mask'" in err.message


def test_float64_input_into_a_float32_model(model: Any) -> None:
    """A float input of another dtype than the parameters is named (outside autocast)."""
    err = _refused(model, "mem", mem=torch.randn(2, 5, 8, dtype=torch.float64))
    assert "torch.float64" in err.message and "torch.float32" in err.message
    assert "mem.to(torch.float32)" in (err.hint or "")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**_kw(mem=torch.randn(2, 5, 8, dtype=torch.bfloat16)))
    assert torch.isfinite(out["z"].float()).all()


def test_unknown_and_missing_arguments(model: Any) -> None:
    """Unknown keywords get a did-you-mean; a missing input names its type."""
    with pytest.raises(LoweringError, match="unknown input 'token_mask'") as exc:
        model(**_kw(token_mask=torch.ones(2, 5, dtype=torch.bool)))
    assert "tokens_mask" in (exc.value.hint or "")
    with pytest.raises(LoweringError, match="forward needs input 'img' \\(image\\)") as exc:
        model(**_kw(img=None))
    assert exc.value.loc.line == _line(SPEC, "img")


def test_adjacency_is_checked() -> None:
    """A graph's adjacency is required, bool, and (B, N, N)."""
    model = attngraph.compile(GRAPH, seed=0)
    g = torch.randn(2, 5, 4)
    adj = torch.rand(2, 5, 5) > 0.5
    assert model(g=g, g_adjacency=adj)["z"].shape == (2, 5, 4)
    with pytest.raises(LoweringError, match="forward needs 'g_adjacency'"):
        model(g=g)
    for bad, text in ((adj.float(), "expected a bool adjacency"),
                      (adj[:, :, :4], "axis 2 has 4 items"),
                      (adj[:1], "batch size 1")):
        with pytest.raises(LoweringError) as exc:
            model(g=g, g_adjacency=bad)
        assert exc.value.message.startswith("input 'g_adjacency': ")
        assert text in exc.value.message
        assert exc.value.loc.line == _line(GRAPH, "g")


def test_shape_checks_hold_in_compiled_modules(model: Any) -> None:
    """torch.compile (with graph breaks allowed) still reports a wrong shape by name;
    a right call traces and gives the eager numbers."""
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="eager")
    torch.testing.assert_close(compiled(**_kw())["z"], model(**_kw())["z"])
    with pytest.raises(LoweringError, match="input 'mem': expected a 3-D tensor"):
        compiled(**_kw(mem=torch.randn(5, 8)))


@pytest.mark.gpu
def test_inputs_on_another_device_are_named(model: Any) -> None:
    """An input on the CPU for a model on the GPU is named, with the move to make."""
    cuda = attngraph.compile(SPEC, seed=0).cuda()
    kw = {k: v.cuda() for k, v in _kw().items()}
    assert cuda(**kw)["z"].device.type == "cuda"
    with pytest.raises(LoweringError, match="input 'mem': is on cpu") as exc:
        cuda(**dict(kw, mem=torch.randn(2, 5, 8)))
    assert "mem.to('cuda:0')" in (exc.value.hint or "")
    mask = torch.tensor([[True, True, False, False, False], [True] * 5]).cuda()
    assert cuda(**kw, tokens_mask=mask)["p"][0, 2:].abs().sum() == 0
    with pytest.raises(LoweringError, match="real item after padding"):
        cuda(**kw, tokens_mask=~mask)


def test_nested_tokens_check_their_masks_and_padding_changes_nothing() -> None:
    """A nested mask with a word after padding, or a real sentence after a padded one, is
    refused naming the input; padded words and sentences change no output."""
    import attngraph
    from attngraph.errors import LoweringError

    spec = """attngraph: 1
name: nested
dims: {vocab: 20, d: 4}
inputs:
  doc: {type: tokens, vocab: vocab, nested: true}
blocks:
  b:
    inputs: [w]
    nodes:
      e: {kind: embedding, from: w, dim: d, vocab: vocab}
      s: {kind: scorer, fn: mlp, key: e}
      a: {kind: softmax, scores: s}
      v: {kind: readout, weights: a, values: e}
    output: v
nodes:
  m: {kind: map, block: b, from: doc}
  s: {kind: scorer, fn: mlp, key: m}
  a: {kind: softmax, scores: s}
  v: {kind: readout, weights: a, values: m}
outputs: {v: v}
"""
    model = attngraph.compile(spec, seed=0)
    doc = torch.randint(0, 20, (1, 3, 4))
    bad = torch.tensor([[[1, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0]]], dtype=torch.bool)
    with pytest.raises(LoweringError, match="sentence 0 of example 0 has a real word after"):
        model(doc=doc, doc_mask=bad)
    gap = torch.tensor([[[1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]]], dtype=torch.bool)
    with pytest.raises(LoweringError, match="a sentence with words after a sentence"):
        model(doc=doc, doc_mask=gap)
    ok = torch.tensor([[[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]], dtype=torch.bool)
    alone = model(doc=doc[:, :2, :2], doc_mask=ok[:, :2, :2])["v"]  # less padding
    torch.testing.assert_close(model(doc=doc, doc_mask=ok)["v"], alone, atol=1e-6, rtol=1e-6)
