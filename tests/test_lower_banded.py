"""The banded (local) attention path equals the dense masked path."""

from __future__ import annotations

import pytest
import torch

import attngraph
from attngraph.lower.rules.banded import banded_attention, use_banded

SPEC = """
attngraph: 1
name: local
dims: {{d: 16}}
inputs:
  x: {{type: vectors, dim: d}}
nodes:
  q: {{kind: queries, from: x, dim: d, heads: {heads}}}
  k: {{kind: keys, from: x, dim: d, heads: {heads}}}
  v: {{kind: values, from: x, dim: d, heads: {heads}}}
  s: {{kind: scorer, fn: scaled_dot, query: q, key: k}}
  p: {{kind: softmax, scores: s, mask: {{window: {w}{causal}}}, temperature: 1.5}}
  z: {{kind: readout, weights: p, values: v, out: d}}
outputs: {{z: z}}
"""


def _dense(q, k, v, w, scale, causal, key_mask):  # noqa: ANN001, ANN202
    """Reference: the full N×N scores with the band, causal and padding masks."""
    n = q.shape[-2]
    i = torch.arange(n)[:, None]
    j = torch.arange(n)[None, :]
    mask = (i - j).abs() <= w
    if causal:
        mask = mask & (j <= i)
    if key_mask is not None:
        km = key_mask[:, None, :] if q.dim() == 3 else key_mask[:, None, None, :]
        mask = mask & km
    s = (q @ k.transpose(-1, -2)) * scale
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)
    return p @ v


@pytest.mark.parametrize("heads", [True, False])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("n", "w", "block"), [(37, 3, 8), (64, 5, 16), (20, 1, 7), (9, 12, 4)])
def test_banded_equals_dense_reference(heads: bool, causal: bool, n: int, w: int,
                                       block: int) -> None:
    """Banded blocks give the dense masked numbers (1e-5), ragged tails and padding
    included, fully padded rows zero, and the same gradients."""
    g = torch.Generator().manual_seed(n * 31 + w)
    shape = (2, 3, n, 4) if heads else (2, n, 4)
    q, k, v = (torch.randn(shape, generator=g, requires_grad=True) for _ in range(3))
    key_mask = torch.ones(2, n, dtype=torch.bool)
    key_mask[0, n // 2:] = False  # padded tail
    key_mask[1, : n // 3] = False  # some rows see only padding within the window
    out = banded_attention(q, k, v, w, scale=0.3, causal=causal, key_mask=key_mask,
                           block=block)
    ref = _dense(q, k, v, w, 0.3, causal, key_mask)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    ref_grads = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for a, b in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_banded_only_when_it_pays() -> None:
    """The banded path is chosen for a narrow band over M = N items only."""
    assert use_banded(4096, 4096, 64)
    assert not use_banded(12, 12, 2)  # catalog size: dense is cheaper
    assert not use_banded(4096, 2048, 64)  # cross-attention keeps the dense path
    assert not use_banded(4096, 4096, None)


@pytest.mark.parametrize("heads", [2, None])
@pytest.mark.parametrize("causal", ["", ", causal: true"])
def test_compiled_local_spec_matches_unfused(heads: int | None, causal: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A lowered local-attention spec long enough for the banded path gives the
    numbers of the unfused dense softmax chain (1e-5), with a padding mask."""
    text = SPEC.format(heads=heads if heads else "null", w=4, causal=causal)
    if heads is None:
        text = text.replace(", heads: null", "")
    n = 120
    assert use_banded(n, n, 4)
    fused = attngraph.compile(text, seed=3)
    dense = attngraph.compile(text, seed=3, fuse=False)
    assert fused.state_dict().keys() == dense.state_dict().keys()
    x = torch.randn(3, n, 16, generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, n, dtype=torch.bool)
    mask[1, 70:] = False
    mask[2, 10:] = False  # queries past 14 see only padding within the window
    calls = []

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return banded_attention(*args, **kwargs)

    monkeypatch.setattr("attngraph.lower.rules.attention.banded_attention", spy)
    a = fused(x=x, x_mask=mask)["z"]
    assert calls, "the fused local attention did not take the banded path"
    b = dense(x=x, x_mask=mask)["z"]
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
