"""DRAW's pieces lowered: the filterbank's write and its read of the error image
against the paper's equations written per filter and pixel, the ``latent`` kind
against its formula (sample, KL, gradients, the KL as a training term), and a
loop carry started with ``zeros_like``. Shape errors are located with a hint."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.errors import ShapeError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402

TOL = {"atol": 1e-5, "rtol": 1e-5}
H, W, N, D = 7, 9, 3, 10

WRITE = f"""attngraph: 1
name: w
inputs:
  img:    {{type: image, height: {H}, width: {W}}}
  canvas: {{type: image, height: {H}, width: {W}}}
  h:      {{type: vector, dim: {D}}}
nodes:
  rp:    {{kind: linear, from: h, out: 5}}
  read:  {{kind: filterbank, image: img, canvas: canvas, params: rp, size: {N}}}
  w:     {{kind: linear, from: h, out: {N * N}}}
  wp:    {{kind: linear, from: h, out: 5}}
  write: {{kind: filterbank, patch: w, params: wp, size: {N}, height: {H}, width: {W}}}
outputs: {{read: read, flat: read.flat, write: write, wfx: write.fx}}
"""


def _bank(g: float, delta: float, var: float, pixels: int) -> torch.Tensor:
    """F[i, a] = exp(−(a − μ_i)²/2σ²) / Z, μ_i = g + (i − N/2 − 0.5) δ, a, i from 1."""
    f = torch.zeros(N, pixels, dtype=torch.float64)
    for i in range(1, N + 1):
        mu = g + (i - N / 2 - 0.5) * delta
        row = [math.exp(-((a - mu) ** 2) / (2 * var)) for a in range(1, pixels + 1)]
        f[i - 1] = torch.tensor(row) / (sum(row) + 1e-8)
    return f


def _filters(p: list[float]) -> tuple[torch.Tensor, torch.Tensor, float]:
    gx, gy = (W + 1) / 2 * (p[0] + 1), (H + 1) / 2 * (p[1] + 1)
    delta = (max(W, H) - 1) / (N - 1) * math.exp(p[3])
    return _bank(gx, delta, math.exp(p[2]), W), _bank(gy, delta, math.exp(p[2]), H), \
        math.exp(p[4])


def test_filterbank_write_and_error_read_match_the_paper() -> None:
    """write = (1/γ) F_Yᵀ w F_X (eq. 29) and the read of x and x̂ = x − σ(c) (eq. 27)
    equal the per-pixel reference, with equal gradients of the weights."""
    model = attngraph.compile(WRITE, seed=0).double()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(3, 1, H, W, generator=g, dtype=torch.float64)
    c = torch.randn(3, 1, H, W, generator=g, dtype=torch.float64)
    h = torch.randn(3, D, generator=g, dtype=torch.float64)
    out = model(img=x, canvas=c, h=h)
    nodes = model.nodes
    params = {n: dict(nodes[n].named_parameters()) for n in ("rp", "w", "wp")}
    lin = {n: (lambda v, p=p: v @ p["weight"].T + p["bias"]) for n, p in params.items()}
    ref_read, ref_write = [], []
    for k in range(3):
        fx, fy, gamma = _filters(lin["rp"](h[k]).tolist())
        xhat = x[k, 0] - torch.sigmoid(c[k, 0])
        ref_read.append(torch.stack([gamma * fy @ x[k, 0] @ fx.T, gamma * fy @ xhat @ fx.T]))
        wfx, wfy, wgamma = _filters(lin["wp"](h[k]).tolist())
        patch = lin["w"](h[k]).detach().reshape(N, N)
        ref_write.append((wfy.T @ patch @ wfx / wgamma)[None])
        torch.testing.assert_close(out["wfx"][k], wfx, **TOL)
    torch.testing.assert_close(out["read"], torch.stack(ref_read).detach(), **TOL)
    torch.testing.assert_close(out["flat"], out["read"].flatten(1), **TOL)
    torch.testing.assert_close(out["write"], torch.stack(ref_write), **TOL)
    # the write is linear in the patch: d(Σ write)/d(patch weights) by hand
    out["write"].sum().backward()
    grads = []
    for k in range(3):
        wfx, wfy, wgamma = _filters(lin["wp"](h[k]).tolist())
        dpatch = (wfy.sum(1)[:, None] * wfx.sum(1)[None, :] / wgamma).reshape(-1)  # (N²,)
        grads.append(dpatch[:, None] * h[k][None, :])
    torch.testing.assert_close(nodes["w"].weight.grad, sum(grads), **TOL)


LATENT = f"""attngraph: 1
name: lat
inputs:
  h: {{type: vector, dim: {D}}}
nodes:
  z: {{kind: latent, from: h, size: 4}}
outputs: {{z: z, kl: z.kl, mean: z.mean, log_std: z.log_std}}
"""


def test_latent_is_the_reparameterised_sample_and_its_kl() -> None:
    """z = μ + exp(log σ) ε with ε the seeded normal draws, KL = ½Σ(μ² + σ² − 1) − Σ log σ,
    gradients through the sample equal the formula's, and the KL is in ``aux``."""
    model = attngraph.compile(LATENT, seed=0).train()
    h = torch.randn(5, D, generator=torch.Generator().manual_seed(1))
    torch.manual_seed(3)
    out = model(h=h)
    torch.manual_seed(3)
    eps = torch.randn(5, 4)
    m, s = model.nodes["z"].mean, model.nodes["z"].log_std
    mu, log_std = m(h), s(h)
    z = mu + torch.exp(log_std) * eps
    kl = (0.5 * (mu**2 + torch.exp(log_std) ** 2 - 1) - log_std).sum(-1)
    torch.testing.assert_close(out["z"], z, **TOL)
    torch.testing.assert_close(out["kl"], kl, **TOL)
    torch.testing.assert_close(out["mean"], mu, **TOL)
    torch.testing.assert_close(model.aux["z.loss"], kl[:, None], **TOL)
    (out["z"].sum() + out["kl"].sum()).backward()
    want = torch.autograd.grad(z.sum() + kl.sum(), [m.weight, s.weight])
    torch.testing.assert_close(m.weight.grad, want[0], **TOL)
    torch.testing.assert_close(s.weight.grad, want[1], **TOL)


def test_latent_samples_in_eval_and_training_adds_its_kl() -> None:
    """In eval mode the latent still samples (two draws differ, one seed repeats), and
    model_terms adds its KL, averaged over the batch, to the training loss."""
    from attngraph.train.tasks.objectives import model_terms

    model = attngraph.compile(LATENT, seed=0).eval()
    h = torch.randn(5, D)
    with torch.no_grad():
        torch.manual_seed(0)
        a = model(h=h)["z"]
        b = model(h=h)["z"]
        torch.manual_seed(0)
        c = model(h=h)
    assert not torch.allclose(a, b)
    torch.testing.assert_close(a, c["z"])
    torch.testing.assert_close(model_terms(model), c["kl"].mean())


LOOP = """attngraph: 1
name: canvas
inputs:
  img: {type: image, height: 4, width: 5}
  h:   {type: vector, dim: 6}
blocks:
  b:
    inputs: [c, h]
    nodes:
      z:   {kind: latent, from: h, size: 3}
      w:   {kind: linear, from: z, out: 4}
      wp:  {kind: linear, from: h, out: 5}
      wr:  {kind: filterbank, patch: w, params: wp, size: 2, height: 4, width: 5}
      n:   {kind: add, from: [c, wr]}
    outputs: {c: n, kl: z.kl, wr: wr}
nodes:
  l: {kind: loop, body: b, steps: 3, inputs: {h: h}, carry: {c: {zeros_like: img, next: c}}}
outputs: {canvas: l.final_c, kl: l.kl, writes: l.wr}
"""


def test_a_canvas_carry_starts_as_zeros_like_and_sums_the_writes() -> None:
    """A carry with zeros_like starts as zeros of the image's shape: the final canvas
    is the sum of the 3 writes; the latent's KL is recorded per step, [B, 3]."""
    model = attngraph.compile(LOOP, seed=0).train()
    out = model(img=torch.rand(2, 1, 4, 5), h=torch.randn(2, 6))
    assert out["canvas"].shape == (2, 1, 4, 5) and out["kl"].shape == (2, 3)
    torch.testing.assert_close(out["canvas"], out["writes"].sum(1), **TOL)
    torch.testing.assert_close(model.aux["z.loss"], out["kl"], **TOL)


BASE = ("attngraph: 1\nname: t\ninputs:\n  img: {type: image, height: 7, width: 9}\n"
        "  h: {type: vector, dim: 4}\nnodes:\n  p: {kind: linear, from: h, out: 5}\n")


@pytest.mark.parametrize(("line", "col", "message"), [
    ("  r: {kind: filterbank, params: p, size: 3}\n", 6,
     "node 'r': a filterbank reads an image or writes a patch: give one of 'image' and "
     "'patch'"),
    ("  r: {kind: filterbank, patch: h, params: p, size: 2}\n", 32,
     "node 'r': a filterbank write needs the size of the image it writes"),
    ("  r: {kind: filterbank, patch: h, params: p, size: 3, height: 7, width: 9}\n", 32,
     "node 'r': a patch of 4 values is not C × 3×3"),
    ("  r: {kind: filterbank, image: img, params: p, size: 3, width: 9}\n", 64,
     "node 'r': 'width' sizes a write; a read takes its image's"),
    ("  r: {kind: filterbank, image: img, canvas: h, params: p, size: 3}\n", 45,
     "node 'r': the canvas is the image's logits, [1, 7, 9], got [4]"),
    ("  r: {kind: latent, from: img, size: 3}\n", 27,
     "node 'r': a latent is computed from a state vector [d], got [1, 7, 9]"),
])
def test_draw_kinds_check_their_inputs(line: str, col: int, message: str) -> None:
    """The filterbank write and the latent refuse what they cannot use, located at the
    field (line 8) with a hint."""
    with pytest.raises(ShapeError) as e:
        loads_spec(BASE + line + "outputs: {r: r}\n")
    d = e.value
    assert d.message.startswith(message) and d.loc.line == 8 and d.loc.col == col, d
    assert d.hint


def test_a_filterbank_is_exposed_only_when_its_filters_reach_a_declared_output() -> None:
    """Inside a loop, a filterbank whose fx, fy the body returns but the loop's outputs do
    not declare is implicit; declaring them makes it explicit (describe's exposure axis
    follows the filters out through the loop, as it does for every other site)."""
    from pathlib import Path

    from attngraph.analysis.axes import find_sites

    text = (Path(__file__).resolve().parents[1] / "specs" / "image_generation.yaml"
            ).read_text(encoding="utf-8")
    sites = {s.id.split("/")[-1]: s for s in find_sites(loads_spec(text))}
    assert sites["read"].axes["exposure"].value == "explicit"
    hidden = text.replace("  read_fx: draw.read_fx\n  read_fy: draw.read_fy\n", "")
    assert hidden != text
    sites = {s.id.split("/")[-1]: s for s in find_sites(loads_spec(hidden))}
    assert sites["read"].axes["exposure"].value == "implicit"
    assert sites["write"].axes["exposure"].value == "explicit"
