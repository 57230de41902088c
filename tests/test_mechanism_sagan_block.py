"""The SAGAN self-attention block (Zhang et al. 2019) against a hand-written one."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, load_weights  # noqa: E402
from torch import nn  # noqa: E402


class SelfAttn(nn.Module):
    """The paper's block: 1×1 convs f, g, h, v; β = softmax_i(f_iᵀ g_j); y = γ o + x."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.f, self.g = nn.Conv2d(c, c // 8, 1), nn.Conv2d(c, c // 8, 1)
        self.h, self.v = nn.Conv2d(c, c, 1), nn.Conv2d(c, c, 1)
        self.gamma = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, c, hh, ww = x.shape
        f, g, h = (m(x).flatten(2) for m in (self.f, self.g, self.h))  # (B, C', HW)
        s = f.transpose(1, 2) @ g  # s[i, j] = f_iᵀ g_j, (B, HW, HW)
        beta = s.softmax(dim=1)  # over i, for each j
        o = h @ beta  # o_j = Σ_i β_{j,i} h_i: (B, C, HW)
        o = self.v(o.reshape(b, c, hh, ww))
        return self.gamma * o + x, beta.transpose(1, 2)  # β as [j, i]


def _weights(ref: SelfAttn) -> dict[str, torch.Tensor]:
    w = {"nodes.go.gamma": ref.gamma}
    for node, conv in (("f", ref.f), ("g", ref.g), ("h", ref.h), ("o", ref.v)):
        w[f"nodes.{node}.conv.weight"], w[f"nodes.{node}.conv.bias"] = conv.weight, conv.bias
    return w


def test_block_is_the_identity_at_initialisation() -> None:
    """γ starts at 0: the compiled block returns its input."""
    model = compile_mechanism("sagan_block")
    assert model.state_dict()["nodes.go.gamma"].item() == 0.0
    x = torch.randn(2, 16, 6, 6)
    torch.testing.assert_close(model(x=x)["y"], x)


def test_block_matches_reference_with_gamma_set() -> None:
    """With γ = 0.7 and copied convolutions, outputs and attention equal the paper's."""
    torch.manual_seed(0)
    ref = SelfAttn()
    with torch.no_grad():
        ref.gamma.fill_(0.7)
    model = compile_mechanism("sagan_block")
    load_weights(model, _weights(ref))
    x = torch.randn(2, 16, 6, 6)
    want_y, want_beta = ref(x)
    got = model(x=x)
    torch.testing.assert_close(got["y"], want_y, **TOL)
    torch.testing.assert_close(got["attention"], want_beta, **TOL)
