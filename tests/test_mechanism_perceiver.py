"""The Perceiver (Jaegle et al. 2021) against hand-written pre-norm blocks, with the
paper's weight sharing across repeats and padded bytes."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402
from torch import nn  # noqa: E402

C, D, K, H, CLASSES = 6, 16, 4, 32, 5


class Block(nn.Module):
    """z = z + MHA(LN(z), LN(x), LN(x)); z = z + MLP(LN(z)), ``heads`` heads."""

    def __init__(self, d_in: int, heads: int, cross: bool) -> None:
        super().__init__()
        self.heads, self.cross = heads, cross
        self.nz, self.nm = nn.LayerNorm(D), nn.LayerNorm(D)
        self.nx = nn.LayerNorm(d_in) if cross else None
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(d_in, D), nn.Linear(d_in, D)
        self.o = nn.Linear(D, D)
        self.f = nn.Sequential(nn.Linear(D, H), nn.GELU(), nn.Linear(H, D))

    def forward(self, z: torch.Tensor, x: torch.Tensor | None, mask: torch.Tensor | None,
                ) -> torch.Tensor:
        nz = self.nz(z)
        src = self.nx(x) if self.cross else nz

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.reshape(t.shape[0], t.shape[1], self.heads, -1).transpose(1, 2)

        q, k, v = split(self.q(nz)), split(self.k(src)), split(self.v(src))
        s = q @ k.transpose(-1, -2) / math.sqrt(D // self.heads)
        if mask is not None:
            s = s.masked_fill(~mask[:, None, None, :], -torch.inf)
        a = (s.softmax(-1) @ v).transpose(1, 2).flatten(2)
        r = z + self.o(a)
        return r + self.f(self.nm(r))


def _block_weights(prefix: str, blk: Block) -> dict[str, torch.Tensor]:
    w = {f"{prefix}.a.out.weight": blk.o.weight, f"{prefix}.a.out.bias": blk.o.bias}
    for node, lin in (("q", blk.q), ("k", blk.k), ("v", blk.v)):
        w[f"{prefix}.{node}.proj.weight"], w[f"{prefix}.{node}.proj.bias"] = lin.weight, lin.bias
    norms = {"nz": blk.nz, "nm": blk.nm} | ({"nx": blk.nx} if blk.nx is not None else {})
    for node, ln in norms.items():
        w[f"{prefix}.{node}.weight"], w[f"{prefix}.{node}.bias"] = ln.weight, ln.bias
    for j in (0, 2):
        w[f"{prefix}.f.net.{j}.weight"] = blk.f[j].weight
        w[f"{prefix}.f.net.{j}.bias"] = blk.f[j].bias
    return w


def test_perceiver_matches_reference_with_shared_repeats_and_padding() -> None:
    """Latents and logits equal the reference; weights: one latent transformer, the
    first cross-attend and one shared by the later ones."""
    torch.manual_seed(0)
    z0 = torch.randn(K, D)
    cross1, cross2 = Block(C, 1, True), Block(C, 1, True)
    latent = Block(D, 2, False)
    head = nn.Linear(D, CLASSES)
    model = compile_mechanism("perceiver")
    load_weights(model, {"nodes.z0.weight": z0, "nodes.logits.weight": head.weight,
                         "nodes.logits.bias": head.bias}
                 | _block_weights("nodes.c1.nodes", cross1)
                 | _block_weights("nodes.c2.nodes", cross2)
                 | _block_weights("nodes.l1.nodes", latent))
    x = torch.randn(3, 7, C)
    mask = lengths_mask([7, 5, 2], 7)
    z = z0.expand(3, K, D)
    for cross in (cross1, cross2, cross2):
        z = latent(cross(z, x, mask), None, None)
    got = model(bytes=x, bytes_mask=mask)
    torch.testing.assert_close(got["latents"], z, **TOL)
    torch.testing.assert_close(got["logits"], head(z.mean(1)), **TOL)
