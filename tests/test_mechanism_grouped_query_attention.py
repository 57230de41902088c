"""Grouped-query and multi-query attention against a hand-written reference."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

D, HQ = 32, 8


def gqa_reference(x: torch.Tensor, mask: torch.Tensor, w: dict[str, torch.Tensor],
                  kv: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention with 8 query heads and ``kv`` key/value heads: query head j
    reads key/value head j // (8 / kv); padded keys masked; heads concatenated, W_o."""
    b, n, _ = x.shape
    hd = D // HQ

    def proj(name: str, heads: int) -> torch.Tensor:
        y = x @ w[f"nodes.{name}.proj.weight"].T + w[f"nodes.{name}.proj.bias"]
        return y.reshape(b, n, heads, hd).transpose(1, 2)

    q, k, v = proj("q", HQ), proj("k", kv), proj("v", kv)
    group = HQ // kv
    heads, weights = [], []
    for j in range(HQ):
        g = j // group
        s = q[:, j] @ k[:, g].transpose(-1, -2) / math.sqrt(hd)  # (B, N, N)
        keep = mask[:, None, :] & torch.ones(n, n, dtype=torch.bool).tril()
        p = s.masked_fill(~keep, -torch.inf).softmax(-1)
        weights.append(p)
        heads.append(p @ v[:, g])
    z = torch.cat(heads, -1) @ w["nodes.z.out.weight"].T + w["nodes.z.out.bias"]
    return z, torch.stack(weights, 1)


def random_weights(kv: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(kv)
    sizes = {"q": D, "k": kv * D // HQ, "v": kv * D // HQ}
    w = {}
    for name, out in sizes.items():
        w[f"nodes.{name}.proj.weight"] = torch.randn(out, D, generator=g) * 0.2
        w[f"nodes.{name}.proj.bias"] = torch.randn(out, generator=g) * 0.1
    w["nodes.z.out.weight"] = torch.randn(D, D, generator=g) * 0.2
    w["nodes.z.out.bias"] = torch.randn(D, generator=g) * 0.1
    return w


@pytest.mark.parametrize(("name", "kv"), [("grouped_query_attention", 2),
                                          ("multi_query_attention", 1)])
@pytest.mark.parametrize("fuse", [True, False])
def test_matches_reference_with_padding(name: str, kv: int, fuse: bool) -> None:
    """Outputs and every query head's weights equal the reference's (fused or not)."""
    model = compile_mechanism(name, fuse=fuse)
    w = random_weights(kv)
    load_weights(model, w)
    x = torch.randn(3, 6, D)
    mask = lengths_mask([6, 4, 1], 6)
    got = model(x=x, x_mask=mask)
    want_z, want_p = gqa_reference(x, mask, w, kv)
    torch.testing.assert_close(got["z"][mask], want_z[mask], **TOL)
    real = mask[:, None, :, None] & mask[:, None, None, :]
    torch.testing.assert_close(got["attention"] * real, want_p.nan_to_num() * real, **TOL)
