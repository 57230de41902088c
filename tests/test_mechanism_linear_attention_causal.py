"""The causal linear attention spec is checked in test_mechanism_linear_attention.py;
here, that it is causal: a later item never changes an earlier output."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism  # noqa: E402


def test_later_items_do_not_change_earlier_outputs() -> None:
    """Changing item 5 leaves outputs 0..4 as they were."""
    model = compile_mechanism("linear_attention_causal")
    x = torch.randn(2, 8, 16)
    y = x.clone()
    y[:, 5] = torch.randn(2, 16)
    a, b = model(x=x)["z"], model(x=y)["z"]
    torch.testing.assert_close(a[:, :5], b[:, :5], **TOL)
    assert (a[:, 5] - b[:, 5]).abs().max() > 1e-3
