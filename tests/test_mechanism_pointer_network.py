"""The pointer network (Vinyals et al. 2015) under teacher forcing, against an LSTM
encoder and an nn.LSTMCell decoder written from the paper, with padded inputs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, lengths_mask, load_weights  # noqa: E402
from torch import nn  # noqa: E402

D, H = 2, 12


def _reference(x: torch.Tensor, targets: torch.Tensor, enc: nn.LSTM, dec: nn.LSTMCell,
               p: dict[str, torch.Tensor]) -> torch.Tensor:
    """One example x [n, d]: e = LSTM(x); d_i = LSTMCell(input, (d, c)) from the
    encoder's last states; u_j = vᵀ tanh(W_1 e_j + W_2 d_i + b); the next input is
    x[C_i]; the first, the learned start vector."""
    e, (h, c) = enc(x[None])
    h, c = h[0], c[0]
    inp = p["go"][None]
    out = []
    for target in targets.tolist():
        h, c = dec(inp, (h, c))
        u = torch.tanh(e[0] @ p["W1"] + h @ p["W2"] + p["b"]) @ p["v"]
        out.append(u.softmax(-1))
        inp = x[target][None]
    return torch.stack(out)


def test_pointer_network_matches_the_paper_with_padding() -> None:
    """Pointer distributions equal the reference for each example; padded points get 0."""
    torch.manual_seed(0)
    enc, dec = nn.LSTM(D, H, batch_first=True), nn.LSTMCell(D, H)
    p = {"go": torch.randn(D), "W1": torch.randn(H, H) * 0.3, "W2": torch.randn(H, H) * 0.3,
         "b": torch.randn(H) * 0.1, "v": torch.randn(H)}
    s = "nodes.dec.nodes"
    model = compile_mechanism("pointer_network")
    load_weights(model, {
        "nodes.go.weight": p["go"][None],
        "nodes.enc.rnn.weight_ih_l0": enc.weight_ih_l0, "nodes.enc.rnn.weight_hh_l0":
        enc.weight_hh_l0, "nodes.enc.rnn.bias_ih_l0": enc.bias_ih_l0,
        "nodes.enc.rnn.bias_hh_l0": enc.bias_hh_l0,
        f"{s}.dec.cell.weight_ih": dec.weight_ih, f"{s}.dec.cell.weight_hh": dec.weight_hh,
        f"{s}.dec.cell.bias_ih": dec.bias_ih, f"{s}.dec.cell.bias_hh": dec.bias_hh,
        f"{s}.u.W": p["W2"], f"{s}.u.U": p["W1"], f"{s}.u.b": p["b"], f"{s}.u.v": p["v"]})
    points = torch.randn(2, 6, D)
    lengths = [6, 4]
    targets = torch.tensor([[5, 0, 3, 1], [2, 0, 3, 1]])
    got = model(points=points, targets=targets, points_mask=lengths_mask(lengths, 6))
    for b, n in enumerate(lengths):
        want = _reference(points[b, :n], targets[b], enc, dec, p)
        torch.testing.assert_close(got["pointer"][b, :, :n], want, **TOL)
        assert (got["pointer"][b, :, n:] == 0).all()


def test_a_target_past_the_real_points_is_a_located_error() -> None:
    """A position beyond an example's real points names the input, not a crash."""
    from attngraph.errors import LoweringError

    model = compile_mechanism("pointer_network")
    with pytest.raises(LoweringError) as e:
        model(points=torch.randn(1, 5, D), targets=torch.tensor([[1, 4]]),
              points_mask=lengths_mask([3], 5))
    assert "input 'targets': position 4 at example 0, entry 1, is past the 3 real items of " \
        "'points'" in str(e.value)
