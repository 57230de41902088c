"""Slot Attention (Locatello et al. 2020) against Algorithm 1 written out in torch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402
from torch import nn  # noqa: E402


class SlotAttention(nn.Module):
    """Algorithm 1: slots compete for inputs, then a shared GRU and MLP update them."""

    def __init__(self, d: int = 16, slots: int = 3, iters: int = 3, hidden: int = 32,
                 eps: float = 1e-8) -> None:
        super().__init__()
        self.iters, self.eps, self.scale = iters, eps, d ** -0.5
        self.slots0 = nn.Parameter(torch.randn(slots, d))
        self.norm_in, self.norm_slots, self.norm_mlp = (nn.LayerNorm(d) for _ in range(3))
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.gru = nn.GRUCell(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, d))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, n, d = x.shape
        x = self.norm_in(x)
        k, v = self.k(x), self.v(x)
        slots = self.slots0.expand(b, -1, -1)
        for _ in range(self.iters):
            prev = slots
            q = self.q(self.norm_slots(slots))
            dots = torch.einsum("bkd,bnd->bkn", q, k) * self.scale
            compete = dots.softmax(dim=1)                  # over slots
            attn = compete + self.eps
            attn = attn * mask[:, None, :]                 # padding takes nothing
            attn = attn / attn.sum(dim=-1, keepdim=True)   # weighted mean over inputs
            updates = attn @ v
            slots = self.gru(updates.reshape(-1, d), prev.reshape(-1, d)).reshape(b, -1, d)
            slots = slots + self.mlp(self.norm_mlp(slots))
        return slots, compete * mask[:, None, :]


def _weights(ref: SlotAttention) -> dict[str, torch.Tensor]:
    run = "nodes.run.nodes"
    return {
        "nodes.s0.weight": ref.slots0, "nodes.nx.weight": ref.norm_in.weight,
        "nodes.nx.bias": ref.norm_in.bias, "nodes.k.proj.weight": ref.k.weight,
        "nodes.v.proj.weight": ref.v.weight, f"{run}.ns.weight": ref.norm_slots.weight,
        f"{run}.ns.bias": ref.norm_slots.bias, f"{run}.q.proj.weight": ref.q.weight,
        f"{run}.gru.cell.weight_ih": ref.gru.weight_ih, f"{run}.gru.cell.weight_hh":
        ref.gru.weight_hh, f"{run}.gru.cell.bias_ih": ref.gru.bias_ih,
        f"{run}.gru.cell.bias_hh": ref.gru.bias_hh, f"{run}.nm.weight": ref.norm_mlp.weight,
        f"{run}.nm.bias": ref.norm_mlp.bias, f"{run}.ff.net.0.weight": ref.mlp[0].weight,
        f"{run}.ff.net.0.bias": ref.mlp[0].bias, f"{run}.ff.net.2.weight": ref.mlp[2].weight,
        f"{run}.ff.net.2.bias": ref.mlp[2].bias,
    }


def test_slot_attention_matches_algorithm_1_with_padding() -> None:
    """Final slots and the last iteration's attention equal the reference."""
    torch.manual_seed(0)
    ref = SlotAttention()
    model = compile_mechanism("slot_attention")
    load_weights(model, _weights(ref))
    x = torch.randn(3, 7, 16)
    mask = lengths_mask([7, 5, 2], 7)
    want_slots, want_attn = ref(x, mask)
    got = model(x=x, x_mask=mask)
    torch.testing.assert_close(got["slots"], want_slots, **TOL)
    attn = got["attention"][:, -1]  # (B, K, N), the last iteration
    torch.testing.assert_close(attn * mask[:, None, :], want_attn, **TOL)
    # each real input's weights sum to one over the slots (before the renormalisation)
    torch.testing.assert_close(attn.sum(1)[mask], torch.ones(int(mask.sum())), **TOL)
