"""The modern Hopfield layer (Ramsauer et al. 2021) against a reference written from
the update rule ξ_new = X softmax(β Xᵀ ξ), three steps, with copied weights and padding
in both the state and the stored patterns."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

D = 16


def _weights(beta: float) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    w = {name: torch.randn(D, D, generator=g) * 0.4
         for name in ("nodes.xi0.proj.weight", "nodes.k.proj.weight", "nodes.z.weight")}
    w["nodes.beta.value"] = torch.tensor([beta])
    return w


def _update(xi: torch.Tensor, stored: torch.Tensor, keep: torch.Tensor,
            beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of ξ_new = X softmax(β Xᵀ ξ) for every state pattern (a row of ξ), the
    stored patterns X the rows of ``stored``, over the real ones (``keep``)."""
    logits = beta * xi @ stored.transpose(-1, -2)  # (B, M, N): β x_j·ξ_i
    p = logits.masked_fill(~keep[:, None, :], float("-inf")).softmax(-1)
    return p @ stored, p


def _reference(r: torch.Tensor, y: torch.Tensor, r_mask: torch.Tensor, y_mask: torch.Tensor,
               w: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """ξ⁰ = R W_Q, K = Y W_K, three updates over K, then Z = ξ³ W_V."""
    beta = float(w["nodes.beta.value"])
    xi = r @ w["nodes.xi0.proj.weight"].T
    k = y @ w["nodes.k.proj.weight"].T
    for _ in range(3):
        xi, p = _update(xi, k, y_mask, beta)
    return xi @ w["nodes.z.weight"].T, xi, p


@pytest.mark.parametrize("beta", [0.25, 2.0])
def test_hopfield_matches_the_update_rule_with_padding(beta: float) -> None:
    """Z, ξ³ and the last weights at real positions equal the reference."""
    model = compile_mechanism("hopfield")
    w = _weights(beta)
    load_weights(model, w)
    gen = torch.Generator().manual_seed(7)
    r, y = torch.randn(3, 5, D, generator=gen), torch.randn(3, 8, D, generator=gen)
    r_mask, y_mask = lengths_mask([5, 3, 1], 5), lengths_mask([8, 6, 2], 8)
    out = model(r=r, y=y, r_mask=r_mask, y_mask=y_mask)
    z, xi, p = _reference(r, y, r_mask, y_mask, w)
    torch.testing.assert_close(out["z"][r_mask], z[r_mask], **TOL)
    torch.testing.assert_close(out["retrieved"][r_mask], xi[r_mask], **TOL)
    keep = r_mask[:, :, None] & y_mask[:, None, :]
    torch.testing.assert_close(out["attention"][keep], p[keep], **TOL)


def test_a_stored_pattern_is_a_fixed_point_at_large_beta() -> None:
    """The paper's retrieval property: with well-separated stored patterns and a large β,
    a state started at a stored pattern stays there (identity projections)."""
    model = compile_mechanism("hopfield")
    eye = torch.eye(D)
    load_weights(model, {"nodes.xi0.proj.weight": eye, "nodes.k.proj.weight": eye,
                         "nodes.z.weight": eye, "nodes.beta.value": torch.tensor([8.0])})
    y = torch.eye(D)[None, :6] * 3.0  # six orthogonal patterns
    out = model(r=y[:, [4, 1]], y=y)
    torch.testing.assert_close(out["retrieved"], y[:, [4, 1]], atol=1e-4, rtol=1e-4)
