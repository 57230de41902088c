"""ALiBi (Press et al. 2022) against a hand-written causal layer with linear biases."""

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

from attngraph.kinds.relative import alibi_slopes  # noqa: E402


@pytest.mark.parametrize(("h", "want"), [
    (4, [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8]),
    (8, [2 ** -k for k in range(1, 9)]),
    (6, [2 ** -2, 2 ** -4, 2 ** -6, 2 ** -8, 2 ** -1, 2 ** -3]),
])
def test_slopes_are_the_papers(h: int, want: list[float]) -> None:
    """2^(−8k/h) for powers of two; for 6 heads, 4's slopes then every other of 8's."""
    assert alibi_slopes(h) == pytest.approx(want)


def test_alibi_matches_reference_with_padding() -> None:
    """Outputs at real items equal softmax(q·k/√d − m_h (i − j)) over j <= i."""
    d, h, n = 32, 4, 6
    w = mha_weights(("q", "k", "v"), d, seed=0)
    model = compile_mechanism("alibi")
    load_weights(model, w)
    x = torch.randn(3, n, d)
    mask = lengths_mask([6, 3, 1], n)
    q, k, v = (heads_of(x, w, c, h) for c in "qkv")
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    m = torch.tensor([2 ** (-8 * (hh + 1) / h) for hh in range(h)])[:, None, None]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d // h) - m * (i - j)
    keep = (j <= i) & mask[:, None, None, :]
    want = attend(scores, keep, v, w)
    got = model(x=x, x_mask=mask)["z"]
    torch.testing.assert_close(got[mask], want[mask], **TOL)
