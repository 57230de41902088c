"""The gated attention unit (Hua et al. 2022) against a reference written from the
paper's equations (Code 1: relu²(qk/n + b), U ⊙ A V, W_o), with copied weights, the
relative bias b a Toeplitz matrix of learned per-offset scalars, padding in the batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

D, E, S = 16, 32, 8
#: the longest sequence whose offsets j − i each have a bucket of their own (64 buckets)
L = 16


def _weights(seed: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The module's weights, and the per-offset bias w[o + L − 1] for o = j − i in
    (−L, L), written into the T5 table at bucket 32·[o > 0] + |o|."""
    g = torch.Generator().manual_seed(seed)
    w: dict[str, torch.Tensor] = {}
    for name, out, inp in (("xu", E, D), ("xv", E, D), ("xz", S, D), ("o", D, E)):
        w[f"nodes.{name}.weight"] = torch.randn(out, inp, generator=g) * inp ** -0.5
        w[f"nodes.{name}.bias"] = torch.randn(out, generator=g) * 0.1
    for name in ("gamma_q", "gamma_k"):
        w[f"nodes.{name}.value"] = 1.0 + 0.5 * torch.randn(1, S, generator=g)
    for name in ("beta_q", "beta_k"):
        w[f"nodes.{name}.value"] = 0.3 * torch.randn(1, S, generator=g)
    offsets = torch.randn(2 * L - 1, generator=g)  # the Toeplitz bias b_{j−i}
    table = torch.randn(64, 1, generator=g)  # buckets no offset below L uses stay random
    for o in range(-(L - 1), L):
        table[32 * (o > 0) + abs(o), 0] = offsets[o + L - 1]
    w["nodes.b.table.weight"] = table
    return w, offsets


def _reference(x: torch.Tensor, mask: torch.Tensor, w: dict[str, torch.Tensor],
               offsets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """U, V, Z = SiLU of their dense maps; Q, K = Z ⊙ γ + β; A = relu²(QKᵀ/n + b) over
    the real items, n each example's length; O = (U ⊙ A V) W_o."""
    def dense(name: str, t: torch.Tensor) -> torch.Tensor:
        return t @ w[f"nodes.{name}.weight"].T + w[f"nodes.{name}.bias"]

    n = x.shape[1]
    u, v, z = F.silu(dense("xu", x)), F.silu(dense("xv", x)), F.silu(dense("xz", x))
    q = z * w["nodes.gamma_q.value"] + w["nodes.beta_q.value"]
    k = z * w["nodes.gamma_k.value"] + w["nodes.beta_k.value"]
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    bias = offsets[j - i + L - 1]  # (N, N), Toeplitz
    length = mask.sum(-1).to(x.dtype)[:, None, None]
    a = torch.relu(q @ k.transpose(-1, -2) / length + bias) ** 2
    a = a * mask[:, None, :]
    return dense("o", u * (a @ v)), a


@pytest.mark.parametrize("seed", [0, 1])
def test_gau_matches_the_paper_with_padding(seed: int) -> None:
    """Outputs and the attention A at real positions equal the reference."""
    model = compile_mechanism("gau_squared_relu")
    w, offsets = _weights(seed)
    load_weights(model, w)
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(10 + seed))
    mask = lengths_mask([7, 5, 2], 7)
    out = model(x=x, x_mask=mask)
    want, a = _reference(x, mask, w, offsets)
    torch.testing.assert_close(out["o"][mask], want[mask], **TOL)
    keep = mask[:, :, None] & mask[:, None, :]
    torch.testing.assert_close(out["attention"][keep], a[keep], **TOL)
    assert (out["attention"][keep] == 0).any(), "relu² should zero some pairs"


def test_gau_at_the_longest_exact_length() -> None:
    """At n = 16 every offset still has its own bias."""
    model = compile_mechanism("gau_squared_relu")
    w, offsets = _weights(2)
    load_weights(model, w)
    x = torch.randn(2, L, D, generator=torch.Generator().manual_seed(3))
    mask = lengths_mask([L, 9], L)
    want, _ = _reference(x, mask, w, offsets)
    torch.testing.assert_close(model(x=x, x_mask=mask)["o"][mask], want[mask], **TOL)
