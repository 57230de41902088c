"""The hierarchical attention network (Yang et al. 2016) against a reference that reads
each real sentence of each document alone, with padding at both levels in the batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, load_weights  # noqa: E402
from torch import nn  # noqa: E402

V, E, H, C, K = 50, 8, 6, 10, 4


class Level(nn.Module):
    """Bi-GRU over a sequence, then attention with a learned context vector."""

    def __init__(self, d_in: int) -> None:
        super().__init__()
        self.gru = nn.GRU(d_in, H, bidirectional=True, batch_first=True)
        self.proj = nn.Linear(2 * H, C)
        self.context = nn.Parameter(torch.randn(C))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, _ = self.gru(x[None])  # (1, n, 2H)
        alpha = (torch.tanh(self.proj(h[0])) @ self.context).softmax(0)
        return alpha @ h[0], alpha


def _weights(prefix: str, level: Level) -> dict[str, torch.Tensor]:
    w = {f"{prefix}.u.weight": level.proj.weight, f"{prefix}.u.bias": level.proj.bias,
         f"{prefix}.s.query": level.context}
    for name, p in level.gru.named_parameters():
        w[f"{prefix}.h.rnn.{name}"] = p
    return w


def test_han_matches_reference_with_padded_words_and_sentences() -> None:
    """Document logits and the attention at both levels equal the reference's."""
    torch.manual_seed(0)
    embed, words, sents, out = nn.Embedding(V, E), Level(E), Level(2 * H), nn.Linear(2 * H, K)
    model = compile_mechanism("hierarchical_attention")
    load_weights(model, {"nodes.sents.nodes.e.weight": embed.weight,
                         "nodes.logits.weight": out.weight, "nodes.logits.bias": out.bias}
                 | _weights("nodes.sents.nodes", words) | _weights("nodes", sents))
    doc = torch.randint(0, V, (2, 3, 5))
    lengths = [[5, 2, 4], [3, 1, 0]]  # words per sentence; 0 = a padded sentence
    mask = torch.tensor([[[w < n for w in range(5)] for n in row] for row in lengths])
    got = model(doc=doc, doc_mask=mask)
    for b, row in enumerate(lengths):
        vecs = []
        for s, n in enumerate(row):
            if n == 0:
                assert (got["word_attention"][b, s] == 0).all()
                continue
            v, alpha = words(embed(doc[b, s, :n]))
            vecs.append(v)
            torch.testing.assert_close(got["word_attention"][b, s, :n], alpha, **TOL)
        doc_vec, beta = sents(torch.stack(vecs))
        torch.testing.assert_close(got["sentence_attention"][b, :len(vecs)], beta, **TOL)
        torch.testing.assert_close(got["logits"][b], out(doc_vec), **TOL)
