"""Multi-query attention: its reference test is shared with grouped-query attention
(test_mechanism_grouped_query_attention.py); here, what sets it apart."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import compile_mechanism  # noqa: E402


def test_one_key_value_head_serves_all_query_heads() -> None:
    """Keys and values are one head of d/h, so their projections are h times smaller,
    and every query head reads the same values: equal queries give equal heads."""
    model = compile_mechanism("multi_query_attention")
    sd = model.state_dict()
    assert sd["nodes.k.proj.weight"].shape == (4, 32) == sd["nodes.v.proj.weight"].shape
    assert sd["nodes.q.proj.weight"].shape == (32, 32)
    with torch.no_grad():  # make all query heads equal: then all weights are equal
        sd["nodes.q.proj.weight"].copy_(sd["nodes.q.proj.weight"][:4].repeat(8, 1))
        sd["nodes.q.proj.bias"].copy_(sd["nodes.q.proj.bias"][:4].repeat(8))
    p = model(x=torch.randn(2, 5, 32))["attention"]
    torch.testing.assert_close(p, p[:, :1].expand_as(p))
