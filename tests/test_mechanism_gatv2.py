"""GATv2 (Brody et al. 2022), two heads, against a per-node reference from the paper's
equations: directed edges, self loops, and padded nodes in the batch."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402

HEADS, D, FEAT = 2, 16, 8


def _reference(x: torch.Tensor, adj: torch.Tensor, n: int,
               w: dict[str, torch.Tensor]) -> torch.Tensor:
    """One graph of n real nodes: e_ij = aᵀ LeakyReLU(W_r x_i + W_l x_j) over
    j with adj[i, j] or j = i; h'_i = ‖_heads Σ_j α_ij W_l x_j."""
    hd = D // HEADS
    right = (x @ w["nodes.right.proj.weight"].T + w["nodes.right.proj.bias"]).reshape(-1, HEADS, hd)
    left = (x @ w["nodes.left.proj.weight"].T + w["nodes.left.proj.bias"]).reshape(-1, HEADS, hd)
    out = torch.zeros(n, D)
    for i in range(n):
        nbrs = [j for j in range(n) if adj[i, j] or j == i]
        for hh in range(HEADS):
            e = torch.stack([w["nodes.e.a"][hh] @ F.leaky_relu(right[i, hh] + left[j, hh], 0.2)
                             for j in nbrs])
            alpha = e.softmax(0)
            out[i, hh * hd:(hh + 1) * hd] = sum(a * left[j, hh] for a, j in zip(alpha, nbrs,
                                                                                  strict=True))
    return out


def test_gatv2_matches_the_paper_on_directed_padded_graphs() -> None:
    """Every real node's output equals the reference; edges count in their direction."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    w = {"nodes.right.proj.weight": torch.randn(D, FEAT, generator=g) * 0.4,
         "nodes.right.proj.bias": torch.randn(D, generator=g) * 0.1,
         "nodes.left.proj.weight": torch.randn(D, FEAT, generator=g) * 0.4,
         "nodes.left.proj.bias": torch.randn(D, generator=g) * 0.1,
         "nodes.e.a": torch.randn(HEADS, D // HEADS, generator=g)}
    model = compile_mechanism("gatv2")
    load_weights(model, w)
    x = torch.randn(2, 6, FEAT)
    adj = torch.rand(2, 6, 6) > 0.6  # directed: not symmetric
    assert not torch.equal(adj, adj.transpose(1, 2))
    lengths = [6, 4]
    got = model(g=x, g_adjacency=adj, g_mask=lengths_mask(lengths, 6))["h"]
    for b, n in enumerate(lengths):
        want = _reference(x[b, :n], adj[b, :n, :n], n, w)
        torch.testing.assert_close(got[b, :n], want, **TOL)


def test_gatv2_attention_is_dynamic() -> None:
    """Unlike GAT, the ranking of neighbours can differ between nodes (the paper's point):
    some two nodes with the same neighbours order them differently."""
    model = compile_mechanism("gatv2", seed=3)
    x = torch.randn(1, 6, FEAT)
    adj = torch.ones(1, 6, 6, dtype=torch.bool)
    p = model(g=x, g_adjacency=adj)["attention"][0, 0]  # (6, 6), head 1
    orders = {tuple(row.argsort().tolist()) for row in p}
    assert len(orders) > 1
