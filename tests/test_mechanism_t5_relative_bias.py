"""T5's relative position bias (Raffel et al. 2020) against a hand-written reference."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import (  # noqa: E402
    TOL,
    attend,
    compile_mechanism,
    heads_of,
    lengths_mask,
    load_weights,
    mha_weights,
)


def bucket(rel: int, buckets: int = 32, max_distance: int = 128) -> int:
    """T5's bucket of one relative position j − i (bidirectional), written out."""
    half = buckets // 2
    out = half if rel > 0 else 0
    n = abs(rel)
    exact = half // 2
    if n < exact:
        return out + n
    large = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (half - exact))
    return out + min(large, half - 1)


def test_buckets_are_exact_near_and_logarithmic_far() -> None:
    """Distances 0..7 have a bucket each per side; far ones share; 128+ the last."""
    assert [bucket(-r) for r in range(8)] == list(range(8))
    assert [bucket(r) for r in range(1, 8)] == list(range(17, 24))
    assert bucket(-200) == bucket(-1000) == 15 and bucket(500) == 31
    assert bucket(-20) == bucket(-21)


def test_t5_bias_matches_reference_with_padding() -> None:
    """softmax(q·k + b_h[bucket(j − i)]) over real items equals the module's, with the
    bias table copied; lengths past max_distance included."""
    d, h, n = 32, 4, 9
    w = mha_weights(("q", "k", "v"), d, seed=1, bias=False)
    table = torch.randn(32, h)
    w["nodes.b.table.weight"] = table
    model = compile_mechanism("t5_relative_bias")
    load_weights(model, w)
    x = torch.randn(2, n, d)
    mask = lengths_mask([9, 5], n)
    q, k, v = (heads_of(x, w, c, h) for c in "qkv")
    bias = torch.tensor([[[table[bucket(jj - ii), hh].item() for jj in range(n)]
                          for ii in range(n)] for hh in range(h)])
    want = attend(q @ k.transpose(-1, -2) + bias, mask[:, None, None, :].expand(2, h, n, n),
                  v, w)
    torch.testing.assert_close(model(x=x, x_mask=mask)["z"][mask], want[mask], **TOL)
