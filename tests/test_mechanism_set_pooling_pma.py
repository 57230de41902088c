"""Set transformer PMA (Lee et al. 2019) against a hand-written reference."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402
from torch import nn  # noqa: E402


class Pma(nn.Module):
    """PMA_k(Z) = MAB(S, rFF(Z)), MAB(X, Y) = LN(H + rFF(H)), H = LN(X + MH(X, Y, Y))."""

    def __init__(self, d: int = 16, k: int = 2, heads: int = 4, hidden: int = 32) -> None:
        super().__init__()
        self.seeds = nn.Parameter(torch.randn(k, d))
        self.rff_z = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d))
        self.mh = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.rff_h = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d))

    def forward(self, z: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.seeds.expand(z.shape[0], -1, -1)
        y = self.rff_z(z)
        a, w = self.mh(s, y, y, key_padding_mask=~mask, average_attn_weights=False)
        h = self.ln1(s + a)
        return self.ln2(h + self.rff_h(h)), w


def _weights(ref: Pma, d: int) -> dict[str, torch.Tensor]:
    w, b = ref.mh.in_proj_weight, ref.mh.in_proj_bias
    out = {"nodes.s.weight": ref.seeds,
           "nodes.mh.out.weight": ref.mh.out_proj.weight, "nodes.mh.out.bias": ref.mh.out_proj.bias,
           "nodes.h.weight": ref.ln1.weight, "nodes.h.bias": ref.ln1.bias,
           "nodes.pma.weight": ref.ln2.weight, "nodes.pma.bias": ref.ln2.bias}
    for i, name in enumerate("qkv"):
        out[f"nodes.{name}.proj.weight"] = w[i * d:(i + 1) * d]
        out[f"nodes.{name}.proj.bias"] = b[i * d:(i + 1) * d]
    for node, seq in (("ffz", ref.rff_z), ("ffh", ref.rff_h)):
        for j in (0, 2):
            out[f"nodes.{node}.net.{j}.weight"] = seq[j].weight
            out[f"nodes.{node}.net.{j}.bias"] = seq[j].bias
    return out


def test_pma_matches_reference_with_padding() -> None:
    """Pooled sets and per-head weights equal the reference's; padding gets no weight."""
    torch.manual_seed(0)
    ref = Pma().eval()
    model = compile_mechanism("set_pooling_pma")
    load_weights(model, _weights(ref, 16))
    z = torch.randn(3, 6, 16)
    mask = lengths_mask([6, 3, 1], 6)
    want, want_w = ref(z, mask)
    got = model(set=z, set_mask=mask)
    torch.testing.assert_close(got["pooled"], want, **TOL)
    torch.testing.assert_close(got["attention"], want_w, **TOL)
    assert got["attention"][1, ..., 3:].abs().max() == 0


def test_pma_ignores_the_order_of_the_set() -> None:
    """A permutation of the items leaves the pooled vectors unchanged."""
    model = compile_mechanism("set_pooling_pma")
    z = torch.randn(2, 5, 16)
    perm = torch.randperm(5)
    torch.testing.assert_close(model(set=z)["pooled"], model(set=z[:, perm])["pooled"], **TOL)
