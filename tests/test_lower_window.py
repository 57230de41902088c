"""Graves' soft window (the ``window`` kind) against its equations written per
component and character, gradients included; padded characters get no weight; the
centres only move forward; its weights are attention weights but not a simplex;
bad inputs are one located error with a hint."""

from __future__ import annotations

import math

import pytest

from attngraph.errors import ShapeError
from attngraph.frontend import loads_spec

torch = pytest.importorskip("torch")

H, K, D = 6, 2, 5

SPEC = f"""attngraph: 1
name: t
inputs:
  c:     {{type: vectors, dim: {D}, length: U}}
  h:     {{type: vector, dim: {H}}}
  kappa: {{type: vector, dim: {K}}}
nodes:
  win: {{kind: window, items: c, control: h, prev: kappa, components: {K}}}
outputs: {{window: win, phi: win.weights, centres: win.centres}}
"""


def _reference(c: list[list[float]], h: list[float], prev: list[float], w: list[list[float]],
               b: list[float], real: int) -> tuple[list[float], list[float], list[float]]:
    """Graves (2013) eq. 46-51 with plain floats: (window, φ, κ) of one example."""
    p = [sum(wi * hi for wi, hi in zip(row, h, strict=True)) + bi
         for row, bi in zip(w, b, strict=True)]
    alpha = [math.exp(x) for x in p[:K]]
    beta = [math.exp(x) for x in p[K:2 * K]]
    kappa = [k0 + math.exp(x) for k0, x in zip(prev, p[2 * K:], strict=True)]
    phi = [sum(alpha[k] * math.exp(-beta[k] * (kappa[k] - u) ** 2) for k in range(K))
           if u <= real else 0.0 for u in range(1, len(c) + 1)]
    window = [sum(phi[u] * c[u][j] for u in range(len(c))) for j in range(D)]
    return window, phi, kappa


def _model() -> object:
    import attngraph

    return attngraph.compile(loads_spec(SPEC, "t.yaml"), seed=0)


def test_window_matches_graves_equations_with_gradients() -> None:
    """Window, weights and centres equal the per-component formula to 1e-5 on examples
    of different lengths, and so do the gradients of a loss on all three with
    respect to the characters, the control, the previous centres and the weights."""
    torch.manual_seed(0)
    model = _model()
    lin = model.nodes["win"].proj
    with torch.no_grad():
        lin.weight.mul_(0.5)
    c = torch.randn(3, 4, D, dtype=torch.float64, requires_grad=True)
    h = torch.randn(3, H, dtype=torch.float64, requires_grad=True)
    prev = torch.tensor([[0.0, 0.5], [1.0, 2.0], [2.5, 0.2]], dtype=torch.float64,
                        requires_grad=True)
    mask = torch.tensor([[True] * 4, [True, True, True, False], [True, True, False, False]])
    model = model.double()
    out = model(c=c, h=h, kappa=prev, c_mask=mask)
    w, b = lin.weight.tolist(), lin.bias.tolist()
    for i in range(3):
        win, phi, kappa = _reference(c[i].tolist(), h[i].tolist(), prev[i].tolist(), w, b,
                                     int(mask[i].sum()))
        for got, want in ((out["window"][i], win), (out["phi"][i], phi),
                          (out["centres"][i], kappa)):
            torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64),
                                       rtol=1e-5, atol=1e-5)
    # gradients: the same loss through a differentiable transcription of the formula
    loss = (out["window"] ** 2).sum() + out["phi"].sum() + (out["centres"] ** 2).sum()
    grads = torch.autograd.grad(loss, [c, h, prev, lin.weight])
    p = h @ lin.weight.T + lin.bias
    alpha, beta, step = p.exp().split(K, -1)
    kappa = prev + step
    u = torch.arange(1, 5, dtype=torch.float64)
    phi = torch.stack([sum(alpha[:, k, None] * torch.exp(-beta[:, k, None]
                                                        * (kappa[:, k, None] - u) ** 2)
                           for k in range(K))], 0)[0] * mask
    window = torch.einsum("bu,bud->bd", phi, c)
    ref = (window ** 2).sum() + phi.sum() + (kappa ** 2).sum()
    want = torch.autograd.grad(ref, [c, h, prev, lin.weight])
    for g, r in zip(grads, want, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5)


def test_padded_characters_get_no_weight_and_change_nothing() -> None:
    """φ is 0 past a string's length, and changing the padded characters leaves the
    window unchanged."""
    torch.manual_seed(1)
    model = _model()
    c, h, prev = torch.randn(2, 5, D), torch.randn(2, H), torch.zeros(2, K)
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    out = model(c=c, h=h, kappa=prev, c_mask=mask)
    assert bool((out["phi"][1, 2:] == 0).all()) and bool((out["phi"][0] > 0).all())
    c2 = c.clone()
    c2[1, 2:] = 100.0
    out2 = model(c=c2, h=h, kappa=prev, c_mask=mask)
    torch.testing.assert_close(out2["window"], out["window"])


def test_centres_only_move_forward() -> None:
    """κ_t − κ_{t−1} = exp(κ̂) > 0: the centres move forward for ordinary controls and
    never back for any control (exp underflows to a step of 0 at the most)."""
    torch.manual_seed(2)
    model = _model()
    prev = torch.randn(64, K) * 3
    c = torch.randn(64, 3, D)
    out = model(c=c, h=torch.randn(64, H), kappa=prev)
    assert bool((out["centres"] > prev).all())
    out = model(c=c, h=torch.randn(64, H) * 1000, kappa=prev)
    assert bool((out["centres"] >= prev).all())


def test_one_gaussian_peaks_never_move_back() -> None:
    """With one component, step after step (the centres carried), the window's peak
    argmax_u φ never moves to an earlier character while it has weight anywhere: the
    peak is the position nearest a centre that only grows."""
    import attngraph

    torch.manual_seed(3)
    model = attngraph.compile(loads_spec(SPEC.replace(f"components: {K}", "components: 1")
                                         .replace(f"dim: {K}}}", "dim: 1}"), "t.yaml"),
                              seed=0)
    c, kappa = torch.randn(32, 8, D), torch.zeros(32, 1)
    last = torch.zeros(32, dtype=torch.long)
    for _ in range(12):
        out = model(c=c, h=torch.randn(32, H) - 1.5, kappa=kappa)
        kappa, phi = out["centres"], out["phi"]
        live = phi.amax(-1) > 1e-6
        peak = phi.argmax(-1)
        assert bool((peak[live] >= last[live]).all())
        last = torch.where(live, peak, last)


def test_window_weights_are_attention_weights_but_not_a_simplex() -> None:
    """The weights port is typed as attention weights over the U characters, not as a
    distribution (it need not sum to one); the window has the characters' width."""
    g = loads_spec(SPEC, "t.yaml")
    t = g.node("win").types
    assert t["weights"].weights and not t["weights"].simplex
    assert t["weights"].dims == ("U",) and t[""].dims == (D,) and t["centres"].dims == (K,)
    model = _model()
    out = model(c=torch.randn(1, 3, D), h=torch.randn(1, H), kappa=torch.zeros(1, K))
    assert abs(float(out["phi"].detach().sum()) - 1.0) > 1e-3  # not normalised


def test_describe_places_the_window_of_the_catalog_spec() -> None:
    """The handwriting spec's window is one attention site: soft, location-based,
    external, local, recurrent (inside the loop), its weights exposed as 'attention'."""
    from pathlib import Path

    from attngraph.analysis.axes import find_sites
    from attngraph.frontend import load_spec

    spec = Path(__file__).resolve().parents[1] / "specs" / "handwriting_generation.yaml"
    sites = find_sites(load_spec(spec))
    assert [s.form for s in sites] == ["window"]
    got = {k: a.value for k, a in sites[0].axes.items()}
    assert got == {"hardness": "soft", "basis": "location", "source": "external",
                   "reach": "local", "heads": "single-head", "recurrence": "recurrent",
                   "exposure": "explicit"}
    assert "'attention'" in sites[0].axes["exposure"].reason


HEAD = f"""attngraph: 1
name: t
inputs:
  c:   {{type: vectors, dim: {D}}}
  tok: {{type: tokens, vocab: 9}}
  h:   {{type: vector, dim: {H}}}
  k2:  {{type: vector, dim: 2}}
  k3:  {{type: vector, dim: 3}}
nodes:
"""


@pytest.mark.parametrize(("line", "col", "message"), [
    ("  w: {kind: window, items: h, control: h, prev: k2, components: 2}\n", 28,
     "node 'w': window reads items [U, d] (the characters), got [6]"),
    ("  w: {kind: window, items: tok, control: h, prev: k2, components: 2}\n", 28,
     "node 'w': window reads float items [U, d] (the characters), got long[N_tok]"),
    ("  w: {kind: window, items: c, control: c, prev: k2, components: 2}\n", 40,
     "node 'w': control is the controller state, a float vector [h], got [N, 5]"),
    ("  w: {kind: window, items: c, control: h, prev: k3, components: 2}\n", 49,
     "node 'w': prev holds the previous centres, [2] for components: 2, got [3]"),
])
def test_window_checks_its_inputs(line: str, col: int, message: str) -> None:
    """Items that are not [U, d] floats, a control that is not a vector and previous
    centres of the wrong size are each one error located at the field, with a hint."""
    with pytest.raises(ShapeError) as e:
        loads_spec(HEAD + line + "outputs: {w: w}\n", "t.yaml")
    d = e.value
    assert d.message.startswith(message), d.message
    assert (d.loc.file, d.loc.line, d.loc.col) == ("t.yaml", 10, col) and d.hint


def test_a_readout_of_window_weights_says_they_do_not_sum_to_one() -> None:
    """A readout refuses the window's weights (they are not normalised over the items),
    located at its weights field; the message no longer calls them normalised over the
    queries, which a window's weights are not."""
    line = ("  w: {kind: window, items: c, control: h, prev: k2, components: 2}\n"
            "  r: {kind: readout, weights: w.weights, values: c}\n")
    with pytest.raises(ShapeError) as e:
        loads_spec(HEAD + line + "outputs: {r: r}\n", "t.yaml")
    d = e.value
    assert d.message == ("node 'r': weights 'w.weights' do not sum to one over the items "
                         "(they are normalised over the queries, or not at all, as a "
                         "window's)")
    assert (d.loc.file, d.loc.line, d.loc.col) == ("t.yaml", 11, 31)
    assert "normalize: true" in (d.hint or "")
