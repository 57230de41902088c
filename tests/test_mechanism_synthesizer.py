"""Synthesizer, dense and random (Tay et al. 2021), against a reference written from the
paper's equations with copied weights, padding in the batch; the random one does not
look at its input."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

D, HIDDEN, ELL = 16, 16, 16


def _weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "nodes.g.proj.weight": torch.randn(D, D, generator=g) * D ** -0.5,
        "nodes.g.proj.bias": torch.randn(D, generator=g) * 0.1,
        "nodes.h.weight": torch.randn(HIDDEN, D, generator=g) * D ** -0.5,
        "nodes.h.bias": torch.randn(HIDDEN, generator=g) * 0.1,
        "nodes.w2.value": torch.randn(1, ELL, HIDDEN, generator=g) * HIDDEN ** -0.5,
        "nodes.b2.value": torch.randn(1, ELL, generator=g) * 0.5,
        "nodes.r.value": torch.randn(1, ELL, ELL, generator=g),
    }


def _reference(x: torch.Tensor, mask: torch.Tensor, w: dict[str, torch.Tensor]
               ) -> dict[str, torch.Tensor]:
    """Dense: B_i = W_2 ReLU(W_1 X_i + b_1) + b_2 (ℓ entries), its first N; random: the
    first N rows and columns of R; each softmax-ed over the real items, times
    G(X) = X W_v + b_v."""
    n = x.shape[1]
    values = x @ w["nodes.g.proj.weight"].T + w["nodes.g.proj.bias"]
    hidden = torch.relu(x @ w["nodes.h.weight"].T + w["nodes.h.bias"])
    dense = hidden @ w["nodes.w2.value"][0].T + w["nodes.b2.value"][0]  # (B, N, ℓ)
    random = w["nodes.r.value"][0].expand(x.shape[0], ELL, ELL)
    out = {}
    for name, b in (("dense", dense), ("random", random)):
        scores = b[:, :n, :n].masked_fill(~mask[:, None, :], float("-inf"))
        p = scores.softmax(-1)
        out[name], out[f"{name}_attention"] = p @ values, p
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_synthesizer_matches_the_paper_with_padding(seed: int) -> None:
    """Both outputs and both attention matrices equal the reference on real positions."""
    model = compile_mechanism("synthesizer")
    w = _weights(seed)
    load_weights(model, w)
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(20 + seed))
    mask = lengths_mask([7, 4, 1], 7)
    got, want = model(x=x, x_mask=mask), _reference(x, mask, w)
    keep = mask[:, :, None] & mask[:, None, :]
    for name in ("dense", "random"):
        torch.testing.assert_close(got[name][mask], want[name][mask], **TOL)
        att = f"{name}_attention"
        torch.testing.assert_close(got[att][keep], want[att][keep], **TOL)


def test_random_synthesizer_weights_ignore_the_input_and_use_the_first_n() -> None:
    """softmax(R) is the same for any input of one length; at N = ℓ all of R is used."""
    model = compile_mechanism("synthesizer")
    w = _weights(2)
    load_weights(model, w)
    gen = torch.Generator().manual_seed(3)
    a, b = (model(x=torch.randn(1, ELL, D, generator=gen))["random_attention"]
            for _ in range(2))
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(a[0], w["nodes.r.value"][0].softmax(-1), **TOL)
