"""specs/graph_attention.yaml is GAT as published: two layers equal to torch_geometric's
``GATConv`` (4 concatenated heads, ELU, then 2 averaged heads) with the same weights, on
a random directed graph; and the spec's readout ``offset``/``act`` fields behave as
documented. torch_geometric is a dev extra: without it the equivalence test skips."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import attngraph  # noqa: E402
from attngraph.errors import AttnGraphError  # noqa: E402

SPEC = Path(__file__).resolve().parent.parent / "specs" / "graph_attention.yaml"
TOL = {"atol": 1e-5, "rtol": 1e-5}
N, FEAT = 12, 34


def _graph(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Node features (N, 34) and a directed adjacency (N, N), adjacency[i, j] = edge
    j → i: asymmetric, without self loops, and with nodes 0 and 1 given no in-edges
    (they attend only to themselves) though other nodes read them."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, FEAT, generator=g)
    adj = torch.rand(N, N, generator=g) < 0.3
    adj.fill_diagonal_(False)
    adj[:2] = False
    adj[2:, 0] = True
    assert not torch.equal(adj, adj.T)
    return x, adj


def _gatconv_pair(model: torch.nn.Module) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Two GATConv layers holding the compiled spec's weights."""
    pyg = pytest.importorskip("torch_geometric.nn")
    sd = model.state_dict()
    conv1 = pyg.GATConv(FEAT, 8, heads=4, concat=True)
    conv2 = pyg.GATConv(32, 2, heads=2, concat=False)
    with torch.no_grad():
        for conv, w, e, b in ((conv1, "wx", "e1", "h"), (conv2, "wh", "e2", "logits")):
            conv.lin.weight.copy_(sd[f"nodes.{w}.proj.weight"])
            # a_q scores the attending node i (the target), a_k the read node j (the source)
            conv.att_dst.copy_(sd[f"nodes.{e}.a_q"].unsqueeze(0))
            conv.att_src.copy_(sd[f"nodes.{e}.a_k"].unsqueeze(0))
            conv.bias.copy_(sd[f"nodes.{b}.offset"])
    return conv1.eval(), conv2.eval()


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Every parameter random (the offsets start at zero, which would hide them)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spec_equals_two_gatconv_layers_on_a_directed_graph(seed: int) -> None:
    """logits equal GATConv(34, 8, heads=4) → ELU → GATConv(32, 2, heads=2, concat=False)
    to 1e-5, with edge_index = (j, i) for adjacency[i, j]; the layer-1 attention equals
    GATConv's per-edge α (self loops included); nodes without in-edges read only
    themselves."""
    model = attngraph.compile(SPEC, seed=seed).eval()
    _randomise(model, seed)
    conv1, conv2 = _gatconv_pair(model)
    x, adj = _graph(seed)
    i, j = adj.nonzero(as_tuple=True)
    edge_index = torch.stack([j, i])  # source j → target i: i reads j
    with torch.no_grad():
        got = model(g=x[None], g_adjacency=adj[None])
        h, (ei, alpha) = conv1(x, edge_index, return_attention_weights=True)
        want = conv2(F.elu(h), edge_index)
    torch.testing.assert_close(got["logits"][0], want, **TOL)
    dense = torch.zeros(4, N, N)
    dense[:, ei[1], ei[0]] = alpha.T  # (heads, target i, source j)
    torch.testing.assert_close(got["attention"][0], dense, **TOL)
    assert torch.allclose(got["attention"][0, :, :2, :2], torch.eye(2).expand(4, 2, 2))


def test_direction_matters() -> None:
    """Reading the adjacency the other way round (i reads its out-neighbours) gives other
    outputs: the equality above pins the direction, not a symmetric accident."""
    model = attngraph.compile(SPEC, seed=0).eval()
    _randomise(model, 0)
    x, adj = _graph(0)
    with torch.no_grad():
        a = model(g=x[None], g_adjacency=adj[None])["logits"]
        b = model(g=x[None], g_adjacency=adj.T[None])["logits"]
    assert (a - b).abs().max() > 1e-2


def test_padded_nodes_do_not_change_the_real_ones() -> None:
    """A batch with a padded graph: its real nodes' logits equal the graph run alone."""
    model = attngraph.compile(SPEC, seed=0).eval()
    _randomise(model, 3)
    x, adj = _graph(3)
    xs = torch.stack([x, torch.randn(N, FEAT)])
    adjs = torch.stack([adj, torch.rand(N, N) < 0.5])
    mask = torch.arange(N)[None] < torch.tensor([[N], [7]])
    with torch.no_grad():
        alone = model(g=x[:7][None], g_adjacency=adj[:7, :7][None])["logits"][0]
        x2 = xs.clone()
        x2[1, :7], adjs[1, :7, :7] = x[:7], adj[:7, :7]
        both = model(g=x2, g_adjacency=adjs, g_mask=mask)["logits"][1, :7]
    torch.testing.assert_close(both, alone, **TOL)


OFFSET_WITH_OUT = """\
attngraph: 1
name: t
inputs: {x: {type: vectors, dim: 8}}
nodes:
  q: {kind: queries, from: x}
  s: {kind: scorer, fn: dot, query: q, key: x}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: x, out: 4, offset: true}
outputs: {z: z}
"""


def test_offset_with_out_is_refused_at_its_line() -> None:
    """``offset`` with ``out`` (whose bias does the same) is one located error with a hint."""
    with pytest.raises(AttnGraphError) as err:
        attngraph.loads_spec(OFFSET_WITH_OUT, "t.yaml")
    text = str(err.value)
    assert "t.yaml:8:" in text and "offset" in text
    assert err.value.hint and "bias" in err.value.hint


def test_readout_offset_and_act_are_z_plus_b_then_act() -> None:
    """A readout with offset and act computes act(Σ_j p_j v_j + b), and is not fused into
    an attention node (which has neither)."""
    text = OFFSET_WITH_OUT.replace("out: 4, offset: true", "offset: true, act: elu") \
        .replace("{kind: scorer, fn: dot", "{kind: scorer, fn: scaled_dot")
    model = attngraph.compile(attngraph.loads_spec(text, "t.yaml"), seed=0).eval()
    with torch.no_grad():
        model.nodes.z.offset.copy_(torch.linspace(-1, 1, 8))
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        got = model(x=x)["z"]
        q = x @ model.nodes.q.proj.weight.T + model.nodes.q.proj.bias
        p = (q @ x.transpose(1, 2) / 8 ** 0.5).softmax(-1)
        want = F.elu(p @ x + torch.linspace(-1, 1, 8))
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_trains_on_karate_club_at_more_seeds(seed: int) -> None:
    """Seed 0 is the catalog's slow test; seeds 1 and 2 reach 0.9 (20 of the 22 test
    nodes right, what the spec's target of 0.88 asks) too."""
    from attngraph.train.engine.loop import train

    graph = attngraph.load_spec(SPEC)
    metrics = train(graph, seed=seed).metrics
    assert metrics["accuracy"] >= 0.9, metrics
