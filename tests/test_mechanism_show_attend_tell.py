"""Show, attend and tell (Xu et al. 2015) against the paper's decoder in plain torch:
an nn.LSTMCell whose hidden and cell states are carried, the gating scalar β and the
deep output, with teacher forcing in training and greedy feedback in eval."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402
from torch import nn  # noqa: E402

V, D, M, N, A = 20, 12, 8, 10, 6


class Decoder(nn.Module):
    """Section 3.1.2 with soft attention and the β gate; h_0, c_0 from the mean."""

    def __init__(self) -> None:
        super().__init__()
        self.init_h, self.init_c = nn.Linear(D, N), nn.Linear(D, N)
        self.E = nn.Embedding(V, M)
        self.W = nn.Parameter(torch.randn(N, A) * 0.3)
        self.U = nn.Parameter(torch.randn(D, A) * 0.3)
        self.b, self.v = nn.Parameter(torch.randn(A)), nn.Parameter(torch.randn(A))
        self.f_beta = nn.Linear(N, 1)
        self.lstm = nn.LSTMCell(M + D, N)
        self.L_h, self.L_z = nn.Linear(N, M, bias=False), nn.Linear(D, M, bias=False)
        self.L_o = nn.Linear(M, V)

    def forward(self, a: torch.Tensor, words: torch.Tensor | None, steps: int,
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """One image's annotations a [L, D]; teacher forcing when ``words`` is given."""
        mean = a.mean(0)
        h, c = self.init_h(mean)[None], self.init_c(mean)[None]
        y = torch.tensor([1])
        logits, alphas = [], []
        for t in range(steps):
            e = torch.tanh(h @ self.W + a @ self.U + self.b) @ self.v  # (L,)
            alpha = e.softmax(0)
            z = torch.sigmoid(self.f_beta(h))[0] * (alpha @ a)
            ey = self.E(y)  # (1, M)
            h, c = self.lstm(torch.cat([ey, z[None]], -1), (h, c))
            out = self.L_o(ey + self.L_h(h) + self.L_z(z[None]))
            logits.append(out[0])
            alphas.append(alpha)
            y = words[t:t + 1] if words is not None else out.argmax(-1)
        return torch.stack(logits), torch.stack(alphas)


def _weights(ref: Decoder) -> dict[str, torch.Tensor]:
    d = "nodes.dec.nodes"
    return {
        "nodes.h0.weight": ref.init_h.weight, "nodes.h0.bias": ref.init_h.bias,
        "nodes.c0.weight": ref.init_c.weight, "nodes.c0.bias": ref.init_c.bias,
        f"{d}.e.weight": ref.E.weight, f"{d}.score.W": ref.W, f"{d}.score.U": ref.U,
        f"{d}.score.b": ref.b, f"{d}.score.v": ref.v, f"{d}.beta.weight": ref.f_beta.weight,
        f"{d}.beta.bias": ref.f_beta.bias, f"{d}.cell.cell.weight_ih": ref.lstm.weight_ih,
        f"{d}.cell.cell.weight_hh": ref.lstm.weight_hh, f"{d}.cell.cell.bias_ih":
        ref.lstm.bias_ih, f"{d}.cell.cell.bias_hh": ref.lstm.bias_hh,
        f"{d}.lh.weight": ref.L_h.weight, f"{d}.lz.weight": ref.L_z.weight,
        f"{d}.logits.weight": ref.L_o.weight, f"{d}.logits.bias": ref.L_o.bias,
    }


@pytest.mark.parametrize("teacher", [True, False])
def test_show_attend_tell_matches_the_paper_with_padding(teacher: bool) -> None:
    """Logits and attention per image equal the reference (padded grid positions in the
    batch); training reads the previous target word, eval its own argmax."""
    torch.manual_seed(0)
    ref = Decoder()
    model = compile_mechanism("show_attend_tell")
    load_weights(model, _weights(ref))
    model.train(teacher)  # no dropout: training mode only switches teacher forcing on
    feats = torch.randn(2, 9, D)
    words = torch.randint(0, V, (2, 5))
    lengths = [9, 6]
    got = model(feats=feats, words=words, feats_mask=lengths_mask(lengths, 9))
    for b, n in enumerate(lengths):
        logits, alphas = ref(feats[b, :n], words[b] if teacher else None, 5)
        torch.testing.assert_close(got["logits"][b], logits, **TOL)
        torch.testing.assert_close(got["attention"][b, :, :n], alphas, **TOL)
        assert (got["attention"][b, :, n:] == 0).all()
