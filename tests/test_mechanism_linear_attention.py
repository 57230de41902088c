"""Linear attention (Katharopoulos et al. 2020), causal and not, against a reference
written from the paper's equations with copied weights; and its linear-time form."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

D, H = 16, 2


def _reference(x: torch.Tensor, mask: torch.Tensor, w: dict[str, torch.Tensor],
               causal: bool) -> torch.Tensor:
    """z_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j) per head, φ = elu + 1, over the
    real j (j <= i when causal); heads concatenated, then W_o."""
    b, n, _ = x.shape

    def heads(name: str) -> torch.Tensor:
        y = x @ w[f"nodes.{name}.proj.weight"].T + w[f"nodes.{name}.proj.bias"]
        return y.reshape(b, n, H, D // H).transpose(1, 2)  # (B, H, N, d/h)

    q, k, v = (heads(c) for c in "qkv")
    kern = (F.elu(q) + 1) @ (F.elu(k) + 1).transpose(-1, -2)  # (B, H, N, N)
    keep = mask[:, None, None, :].expand(b, H, n, n)
    if causal:
        keep = keep & torch.ones(n, n, dtype=torch.bool).tril()
    kern = kern * keep
    z = (kern @ v) / kern.sum(-1, keepdim=True)
    z = z.transpose(1, 2).reshape(b, n, D)
    return z @ w["nodes.z.out.weight"].T + w["nodes.z.out.bias"]


def _weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    w = {}
    for name in ("q", "k", "v", "z"):
        attr = "out" if name == "z" else "proj"
        w[f"nodes.{name}.{attr}.weight"] = torch.randn(D, D, generator=g) * 0.3
        w[f"nodes.{name}.{attr}.bias"] = torch.randn(D, generator=g) * 0.1
    return w


@pytest.mark.parametrize("causal", [False, True])
def test_linear_attention_matches_the_paper_with_padding(causal: bool) -> None:
    """Outputs at real items equal the reference, with padded examples in the batch."""
    name = "linear_attention_causal" if causal else "linear_attention"
    model = compile_mechanism(name)
    w = _weights()
    load_weights(model, w)
    x = torch.randn(3, 7, D)
    mask = lengths_mask([7, 5, 2], 7)
    got = model(x=x, x_mask=mask)["z"]
    torch.testing.assert_close(got[mask], _reference(x, mask, w, causal)[mask], **TOL)


@pytest.mark.parametrize("causal", [False, True])
def test_compiled_form_is_linear_time_and_equals_the_quadratic_one(causal: bool) -> None:
    """The pass makes one linear_attention node (no N×N scores), equal to the chain."""
    from mechanism_support import spec_path

    import attngraph

    path = spec_path("linear_attention_causal" if causal else "linear_attention")
    fast = attngraph.compile(path, seed=0)
    slow = attngraph.compile(path, seed=0, fuse=False)
    kinds = [type(m).__name__ for m in fast.nodes.values()]
    assert "LinearAttention" in kinds and "Softmax" not in kinds
    assert "Softmax" in [type(m).__name__ for m in slow.nodes.values()]
    x = torch.randn(2, 9, D)
    mask = lengths_mask([9, 4], 9)
    torch.testing.assert_close(fast(x=x, x_mask=mask)["z"][mask],
                               slow(x=x, x_mask=mask)["z"][mask], **TOL)
