"""Values of the positions alone are made once per forward and read by every round of a
repeat (attngraph/lower/runtime/memo.py): the rotary tables, the causal mask, ALiBi's bias and
T5's buckets. With the sharing, the outputs and gradients are those of making each one
where it is used, bit for bit; each is made once a forward, never served to another
forward or to other positions, lengths or padding."""

from __future__ import annotations

import contextlib
import functools
import re
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import attngraph
from attngraph.lower import masks, memo
from attngraph.lower.rules.relative import PositionBias, Rotary
from attngraph.lower.runtime.module import Runtime

REAL = Path(__file__).resolve().parents[1] / "specs" / "real"

#: tiny sizes of the real-model specs (their dims line replaced)
TINY = {
    "llama": "dims: {vocab: 37, d: 32, heads: 4, kv: 2, kvd: 16, ff: 48, layers: 3}",
    "t5": "dims: {vocab: 37, d: 32, heads: 4, inner: 32, ff: 48, layers: 2, dlayers: 3, "
          "buckets: 8, distance: 16}",
}

#: three layers of causal attention with ALiBi's bias on the scores
ALIBI = """\
attngraph: 1
name: alibi_stack
dims: {vocab: 37, d: 32, heads: 4, layers: 3}
inputs:
  tokens: {type: tokens, vocab: vocab}
blocks:
  layer:
    inputs: [h]
    nodes:
      q: {kind: queries, from: h, heads: heads}
      k: {kind: keys, from: h, heads: heads}
      v: {kind: values, from: h, heads: heads}
      s: {kind: scorer, fn: scaled_dot, query: q, key: k}
      b: {kind: position_bias, scores: s, fn: alibi}
      p: {kind: softmax, scores: b, mask: {causal: true}}
      a: {kind: readout, weights: p, values: v, out: d}
      r: {kind: add, from: [h, a]}
    outputs: {h: r, attention: p}
nodes:
  x: {kind: items, from: tokens, embed: d}
  stack: {kind: repeat, block: layer, times: layers, from: x}
  logits: {kind: linear, from: stack, out: vocab}
outputs: {logits: logits, heads: stack.attention}
"""


def _spec(name: str, *, weights: bool = True) -> str:
    """The spec's text at a tiny size; ``weights=False``: no weights asked for (the
    llama's attention is then one fused call, which reads the mask with padding)."""
    if name == "alibi":
        return ALIBI
    text = re.sub(r"^dims: \{.*\}$", TINY[name], (REAL / f"{name}.yaml").read_text(),
                  count=1, flags=re.M)
    if not weights:  # the outputs besides the logits, and the blocks' besides the first
        text, n = re.subn(r"^outputs: \{logits: logits(, \w+: [\w.]+)+\}$",
                          "outputs: {logits: logits}", text, flags=re.M)
        text, m = re.subn(r"^(    outputs: \{\w+: \w+)(, \w+: \w+)+\}$", r"\1}", text,
                          flags=re.M)
        assert n == 1 and m >= 1
    return text


def _ids(n: int, lengths: list[int], seed: int, *, start: bool = False
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids (B, n) padded last with 0, and their mask; ``start``: the id 0 first."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 37, (len(lengths), n), generator=g)
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    if start:
        ids[:, 0] = 0
    return ids.masked_fill(~mask, 0), mask


def _inputs(name: str, n: int, lengths: list[int], seed: int = 0) -> dict[str, torch.Tensor]:
    if name == "t5":
        src, sm = _ids(n, lengths, seed)
        tgt, tm = _ids(n - 1, [max(1, x - 1) for x in lengths], seed + 1, start=True)
        return {"source": src, "source_mask": sm, "target": tgt, "target_mask": tm}
    ids, mask = _ids(n, lengths, seed)
    return {"tokens": ids, "tokens_mask": mask}


@contextlib.contextmanager
def _unshared() -> Iterator[None]:
    """Every value made where it is used, as while tracing (nothing kept)."""
    saved = memo._tracing
    memo._tracing = lambda: True  # type: ignore[assignment]
    try:
        yield
    finally:
        memo._tracing = saved  # type: ignore[assignment]


@contextlib.contextmanager
def _counted(owner: Any, name: str) -> Iterator[list[int]]:
    """Count the calls of ``owner.name`` (a function or method) while inside."""
    calls = [0]
    original = getattr(owner, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return original(*args, **kwargs)

    setattr(owner, name, counting)
    try:
        yield calls
    finally:
        setattr(owner, name, original)


def _step(model: torch.nn.Module, inputs: dict[str, torch.Tensor]
          ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The outputs and every parameter's gradient of the sum of the float outputs."""
    model.zero_grad(set_to_none=True)
    out = model(**inputs)
    sum(v.sum() for v in out.values() if v.is_floating_point()).backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return {k: v.detach() for k, v in out.items()}, grads


def _assert_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert list(a) == list(b)
    for k in a:
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("name", ["llama", "t5", "alibi"])
@pytest.mark.parametrize("weights", [True, False])
def test_outputs_and_gradients_equal_making_each_value_where_it_is_used(
        name: str, weights: bool) -> None:
    """Forward and backward with the values shared give the outputs and gradients of
    making every value in every node, bit for bit, on padded batches."""
    model = attngraph.compile(_spec(name, weights=weights), seed=0)
    inputs = _inputs(name, 9, [9, 6, 3])
    with _unshared():
        want_out, want_grad = _step(model, inputs)
    out, grad = _step(model, inputs)
    _assert_equal(out, want_out)
    _assert_equal(grad, want_grad)
    assert len(grad) == len(list(model.parameters()))


def test_the_rotary_tables_and_the_causal_mask_are_made_once_per_forward() -> None:
    """Three layers rotate queries and keys (six rotary nodes) and mask their scores
    (three softmaxes): one table and one mask a forward, and a second forward makes
    its own."""
    model = attngraph.compile(_spec("llama"), seed=0)
    inputs = _inputs("llama", 7, [7, 4])
    with _counted(Rotary, "angles") as tables, _counted(masks, "_made_mask") as made, \
            torch.no_grad():
        model(**inputs)
        assert (tables[0], made[0]) == (1, 1)
        model(**inputs)
        assert (tables[0], made[0]) == (2, 2)
    with _counted(Rotary, "angles") as tables, _counted(masks, "_made_mask") as made, \
            torch.no_grad(), _unshared():
        model(**inputs)
        assert (tables[0], made[0]) == (6, 3)


def test_the_fused_attention_reads_one_mask_and_t5_and_alibi_one_bias_a_forward() -> None:
    """Without weights asked for, each fused attention of a padded batch reads the
    shared padding-and-causal mask; T5's decoder alternates between its causal mask and
    the source's padding (two values kept); ALiBi's bias is made once for three layers."""
    fused = attngraph.compile(_spec("llama", weights=False), seed=0)
    t5 = attngraph.compile(_spec("t5"), seed=0)
    alibi = attngraph.compile(_spec("alibi"), seed=0)
    with _counted(masks, "_made_mask") as made, _counted(PositionBias, "alibi") as bias, \
            torch.no_grad():
        fused(**_inputs("llama", 7, [7, 4]))
        assert made[0] == 1
        t5(**_inputs("t5", 7, [7, 4]))
        assert made[0] == 1 + 1  # the decoder's causal mask with its padding
        alibi(**_inputs("alibi", 7, [7, 4]))
        assert made[0] == 2 + 1 and bias[0] == 1


def test_forwards_of_other_lengths_and_padding_get_their_own_values() -> None:
    """Forwards one after the other over 7, 11, then 7 positions with other padding:
    each equals the model making every value where it is used."""
    model = attngraph.compile(_spec("llama"), seed=0)
    for n, lengths, seed in [(7, [7, 4], 0), (11, [11, 2, 9], 1), (7, [3, 7], 2)]:
        inputs = _inputs("llama", n, lengths, seed)
        with torch.no_grad():
            got = model(**inputs)
            with _unshared():
                want = model(**inputs)
        _assert_equal(got, want)


def test_training_steps_and_dtypes_keep_equal_to_unshared() -> None:
    """Two optimiser steps in a row (the second forward must not read the first's
    values), then the model in float64: shared and unshared stay equal."""
    runs = []
    for share in (True, False):
        model = attngraph.compile(_spec("llama"), seed=0)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        inputs = _inputs("llama", 8, [8, 5])
        outs = []
        with contextlib.nullcontext() if share else _unshared():
            for _ in range(2):
                out, _ = _step(model, inputs)
                opt.step()
                outs.append(out)
            model.double()
            outs.append(_step(model, inputs)[0])
        runs.append(outs)
    for a, b in zip(*runs, strict=True):
        _assert_equal(a, b)
    assert runs[0][-1]["logits"].dtype == torch.float64


def test_a_rotary_buffer_changed_in_place_gets_tables_of_its_own() -> None:
    """The tables of nodes of one size are shared while their buffers are as built; a
    buffer changed in place (its version moved) gives its node its own tables."""
    model = attngraph.compile(_spec("llama"), seed=0)
    rotary = [m for m in model.modules() if isinstance(m, Rotary)]
    with torch.no_grad():
        rotary[0].theta.mul_(2.0)
    inputs = _inputs("llama", 7, [7, 4])
    with _counted(Rotary, "angles") as tables, torch.no_grad():
        got = model(**inputs)
        assert tables[0] == 2
        with _unshared():
            want = model(**inputs)
    _assert_equal(got, want)


def _maker(value: Callable[[], torch.Tensor]) -> tuple[list[int], Callable[[], torch.Tensor]]:
    calls = [0]

    def make() -> torch.Tensor:
        calls[0] += 1
        return value()

    return calls, make


def test_shared_keys_tensors_by_identity_and_version() -> None:
    """A key's tensors are compared by identity and version: an equal tensor that is
    another object, or the same one changed in place, gives a new value."""
    rt = Runtime()
    pad = torch.ones(2, 5, dtype=torch.bool)
    calls, make = _maker(lambda: torch.zeros(3))
    first = memo.shared(rt, "v", lambda: (5, pad), make)
    assert memo.shared(rt, "v", lambda: (5, pad), make) is first and calls[0] == 1
    memo.shared(rt, "v", lambda: (5, pad.clone()), make)
    assert calls[0] == 2
    pad[0, 4] = False
    memo.shared(rt, "v", lambda: (5, pad), make)
    assert calls[0] == 3
    memo.shared(rt, "v", lambda: (6, pad), make)
    assert calls[0] == 4 and len(rt.memo["v"]) == 4


def test_a_runtime_that_lives_on_keeps_a_few_values() -> None:
    """A runtime kept across calls (a decoder stepping through lengths 1, 2, ...) keeps
    at most KEEP values of a name, each the one of its key."""
    rt = Runtime()
    for n in range(1, 30):
        v = memo.shared(rt, "ramp", lambda n=n: (n,),  # type: ignore[misc]
                        functools.partial(torch.arange, n))
        assert torch.equal(v, torch.arange(n))
    assert len(rt.memo["ramp"]) == memo.KEEP


def test_values_with_a_gradient_or_of_inference_mode_are_not_served_wrongly() -> None:
    """A value that requires a gradient is never kept; one made in inference mode is
    made again outside it (autograd could not save it)."""
    rt = Runtime()
    w = torch.ones(3, requires_grad=True)
    calls, make = _maker(lambda: w * 2)
    memo.shared(rt, "grad", lambda: (1,), make)
    memo.shared(rt, "grad", lambda: (1,), make)
    assert calls[0] == 2 and not rt.memo["grad"]
    calls, make = _maker(lambda: torch.arange(4.0))
    with torch.inference_mode():
        inside = memo.shared(rt, "inf", lambda: (1,), make)
        assert memo.shared(rt, "inf", lambda: (1,), make) is inside
    outside = memo.shared(rt, "inf", lambda: (1,), make)
    assert calls[0] == 2 and not outside.is_inference()
    x = torch.ones(4, requires_grad=True)
    (x * outside).sum().backward()


def test_nothing_is_kept_while_tracing() -> None:
    """Under torch.jit.trace every request makes its value (the traced program
    computes each where it is used)."""
    rt = Runtime()
    calls, make = _maker(lambda: torch.arange(3.0))

    def f(x: torch.Tensor) -> torch.Tensor:
        return x * memo.shared(rt, "t", lambda: (3,), make) \
            + memo.shared(rt, "t", lambda: (3,), make)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jit.trace's own notice
        torch.jit.trace(f, torch.ones(3), check_trace=False)
    assert calls[0] == 2 and "t" not in rt.memo


@pytest.mark.parametrize("name", ["llama", "alibi"])
def test_torch_compile_follows_the_forward_without_keeping_anything(name: str) -> None:
    """torch.compile (fullgraph) traces the shared values where they are used (a
    tensor's version is no number while tracing): the same outputs as eager."""
    model = attngraph.compile(_spec(name), seed=0).eval()
    inputs = _inputs(name, 9, [9, 6])
    with torch.no_grad():
        want = model(**inputs)
        got = torch.compile(model, fullgraph=True, backend="eager")(**inputs)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=0)
