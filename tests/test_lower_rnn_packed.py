"""A masked ``rnn`` runs packed (``pack_padded_sequence``) with the step-by-step semantics.

The oracle is ``Rnn._stepwise``, the per-step loop that defines what a masked rnn
returns (zeros at padded items; each direction's state at the row's real items; the
initial state for a row without real items); it also runs while torch.compile traces.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.lower.rules.rnn import Rnn  # noqa: E402

SPEC = """
attngraph: 1
name: masked_rnn
inputs:
  x: {type: vectors, dim: 4}
INIT_INPUT
nodes:
  r: {kind: rnn, cell: CELL, from: x, hidden: 5, bidirectional: BI, layers: LAYERS INIT_REF}
outputs: {out: r, state: r.state}
"""

N = 7
LENGTHS = {
    "ragged": [7, 3, 1, 5],
    "all_true": [7, 7, 7, 7],
    "fully_padded_rows": [7, 0, 3, 0],
    "all_empty": [0, 0],
}


def _spec(cell: str, bi: bool, layers: int = 1, init: str = "full") -> str:
    """The spec; ``init`` is ``none``, ``h`` ([h], shared by the directions) or ``full``."""
    width = 5 if init == "h" or not bi else 10
    given = init != "none"
    return (SPEC.replace("CELL", cell).replace("BI", str(bi).lower())
            .replace("LAYERS", str(layers))
            .replace("INIT_INPUT\n", f"  s: {{type: vector, dim: {width}}}\n" if given else "")
            .replace(" INIT_REF", ", init: s" if given else ""))


def _mask(lengths: list[int], n: int = N) -> torch.Tensor:
    return torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]


def _inputs(lengths: list[int], init: str, bi: bool) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    b = len(lengths)
    kw = {"x": torch.randn(b, N, 4, generator=g, requires_grad=True),
          "x_mask": _mask(lengths)}
    if init != "none":
        width = 5 if init == "h" or not bi else 10
        kw["s"] = torch.randn(b, width, generator=g, requires_grad=True)
    return kw


def _run(model: torch.nn.Module, kw: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Outputs, then the gradients of a weighted sum of them (params and inputs)."""
    model.zero_grad(set_to_none=True)
    for t in kw.values():
        t.grad = None
    out = model(**kw)
    g = torch.Generator().manual_seed(2)
    loss = sum((v * torch.randn(v.shape, generator=g)).sum() for v in out.values())
    loss.backward()
    res = {f"out.{k}": v.detach() for k, v in out.items()}
    res.update({f"grad.{k}": p.grad for k, p in model.named_parameters()
                if p.grad is not None})
    res.update({f"grad.{k}": t.grad for k, t in kw.items() if t.grad is not None})
    return res


@pytest.mark.parametrize("case", list(LENGTHS))
@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize(("layers", "init"), [(1, "none"), (1, "full"), (2, "h")])
def test_packed_equals_stepwise(cell: str, bi: bool, case: str, layers: int, init: str,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs, state and the gradients of parameters, items and init equal the per-step
    implementation's to 1e-5, for ragged, all-real and fully padded rows."""
    model = attngraph.compile(_spec(cell, bi, layers, init), seed=0)
    kw = _inputs(LENGTHS[case], init, bi)
    got = _run(model, kw)
    monkeypatch.setattr(Rnn, "_packed", Rnn._stepwise)
    want = _run(model, kw)
    assert set(got) == set(want)
    assert "grad.x" in got and any(k.startswith("grad.nodes") for k in got)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-5, rtol=1e-5, msg=k)


@pytest.mark.parametrize("bi", [False, True], ids=["uni", "bi"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_each_row_equals_the_row_alone_without_padding(cell: str, bi: bool) -> None:
    """Row b of a padded batch gives, on its real items, the outputs and state of the
    unmasked rnn run on that row alone; zeros at its padding; init as a row's state
    when it has no real item."""
    model = attngraph.compile(_spec(cell, bi, 2, "full"), seed=0).eval()
    lengths = [7, 4, 0, 1]
    kw = _inputs(lengths, "full", bi)
    with torch.no_grad():
        out = model(**kw)
        for b, n in enumerate(lengths):
            if n == 0:
                assert (out["out"][b] == 0).all()
                torch.testing.assert_close(out["state"][b], kw["s"][b])
                continue
            alone = model(x=kw["x"][b:b + 1, :n], s=kw["s"][b:b + 1])
            torch.testing.assert_close(out["out"][b, :n], alone["out"][0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(out["state"][b], alone["state"][0], atol=1e-5, rtol=1e-5)
            assert (out["out"][b, n:] == 0).all()


def test_appended_padding_changes_nothing() -> None:
    """More trailing padding, with any values in it, leaves outputs at real items and
    the state unchanged (bidirectional LSTM: the backward direction starts at the last
    real item, not at the end of the padded row)."""
    model = attngraph.compile(_spec("lstm", True), seed=0).eval()
    kw = _inputs([7, 2, 5], "full", True)
    x, mask = kw["x"].detach(), kw["x_mask"]
    more = torch.cat([x, 100 * torch.randn(3, 4, 4)], 1)
    more_mask = torch.cat([mask, torch.zeros(3, 4, dtype=torch.bool)], 1)
    with torch.no_grad():
        a = model(x=x, x_mask=mask, s=kw["s"])
        b = model(x=more, x_mask=more_mask, s=kw["s"])
    torch.testing.assert_close(b["out"][:, :N], a["out"], atol=1e-5, rtol=1e-5)
    assert (b["out"][:, N:] == 0).all()
    torch.testing.assert_close(b["state"], a["state"], atol=1e-5, rtol=1e-5)


def test_parameter_names_are_the_torch_modules() -> None:
    """The packed path keeps ``nn.GRU``'s parameters: state_dict keys are unchanged."""
    model = attngraph.compile(_spec("gru", True, 2, "none"), seed=0)
    keys = {k.split("rnn.", 1)[1] for k in model.state_dict()}
    want = {f"{p}_l{layer}{sfx}" for p in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
            for layer in (0, 1) for sfx in ("", "_reverse")}
    assert keys == want


@pytest.mark.slow
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_masked_rnn_compiles_fullgraph(cell: str) -> None:
    """Under torch.compile(fullgraph=True) a masked rnn traces as one graph (the per-step
    path; packing cannot be traced) and equals the eager, packed result. Dynamo wraps
    nn.GRU/nn.LSTM only with ``allow_rnn``, masked or not."""
    model = attngraph.compile(_spec(cell, True), seed=0).eval()
    kw = {k: v.detach() for k, v in _inputs(LENGTHS["fully_padded_rows"], "full", True).items()}
    torch._dynamo.reset()
    with torch._dynamo.config.patch(allow_rnn=True), torch.no_grad():
        got = torch.compile(model, fullgraph=True, backend="eager")(**kw)
        want = model(**kw)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-5, rtol=1e-5)
