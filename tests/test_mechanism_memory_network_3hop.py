"""End-to-end memory network, 3 hops, adjacent tying (Sukhbaatar et al. 2015), against
the paper's equations with four embedding tables."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

V, D = 40, 16


def test_three_hops_match_the_paper_with_padding() -> None:
    """Answer logits and each hop's weights equal the reference; 4 tables, tied."""
    torch.manual_seed(0)
    tables = [torch.randn(V, D) * 0.3 for _ in range(4)]  # A¹ (= B), C¹, C², C³
    model = compile_mechanism("memory_network_3hop")
    load_weights(model, {f"nodes.e{k + 1}.embed.weight": t for k, t in enumerate(tables)})
    assert sum(p.numel() for p in model.parameters()) == 4 * V * D
    story, question = torch.randint(0, V, (2, 6)), torch.randint(0, V, (2, 4))
    smask, qmask = lengths_mask([6, 3], 6), lengths_mask([4, 2], 4)
    got = model(story=story, question=question, story_mask=smask, question_mask=qmask)
    for b in range(2):
        x, q = story[b][smask[b]], question[b][qmask[b]]
        u = tables[0][q].sum(0)  # B = A¹
        for k in range(3):
            m, c = tables[k][x], tables[k + 1][x]  # A^{k+1} = C^k
            p = (m @ u).softmax(0)
            torch.testing.assert_close(got[f"hop{k + 1}"][b][smask[b]], p, **TOL)
            u = u + p @ c
        torch.testing.assert_close(got["answer"][b], tables[3] @ u, **TOL)  # Wᵀ = C³
