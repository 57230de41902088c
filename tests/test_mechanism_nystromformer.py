"""Nyströmformer (Xiong et al. 2021) against a reference written from eq. (14)-(16):
segment-mean landmarks, the three softmax kernels and the iterative Moore-Penrose
pseudo-inverse (6 iterations), with copied weights."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
from mechanism_support import TOL, compile_mechanism, heads_of, load_weights  # noqa: E402

C, D, H, M = 3, 16, 2, 4  # channels, model size, heads, landmarks


def _weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w = {"nodes.x.proj.weight": torch.randn(D, C, generator=g) * C ** -0.5,
         "nodes.x.proj.bias": torch.randn(D, generator=g) * 0.1}
    for name, attr in (("q", "proj"), ("k", "proj"), ("v", "proj"), ("z", "out")):
        w[f"nodes.{name}.{attr}.weight"] = torch.randn(D, D, generator=g) * D ** -0.5
        w[f"nodes.{name}.{attr}.bias"] = torch.randn(D, generator=g) * 0.1
    return w


def _pinv(a: torch.Tensor, iterations: int = 6) -> torch.Tensor:
    """Z_0 = Aᵀ/(‖A‖₁‖A‖_∞), Z ← ¼ Z (13I − AZ(15I − AZ(7I − AZ))), per matrix."""
    eye = torch.eye(a.shape[-1])
    norm1 = a.abs().sum(-2).amax(-1)  # largest column sum
    norm_inf = a.abs().sum(-1).amax(-1)  # largest row sum
    z = a.transpose(-1, -2) / (norm1 * norm_inf)[..., None, None]
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


def _reference(img: torch.Tensor, w: dict[str, torch.Tensor]) -> tuple[
        torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ŝ V = F̃ Ã⁺ (B̃ V) per head over the pixels (row-major), landmarks the means of
    M consecutive segments; heads concatenated, then W_O. Returns it, Ã⁺ and Ã."""
    x = img.flatten(2).transpose(1, 2) @ w["nodes.x.proj.weight"].T + w["nodes.x.proj.bias"]
    q, k, v = (heads_of(x, w, c, H) for c in "qkv")  # (B, H, N, d)
    b, h, n, d = q.shape
    ql = q.reshape(b, h, M, n // M, d).mean(-2)  # Q̃: segment means
    kl = k.reshape(b, h, M, n // M, d).mean(-2)
    f = (q @ kl.transpose(-1, -2) / math.sqrt(d)).softmax(-1)
    a = (ql @ kl.transpose(-1, -2) / math.sqrt(d)).softmax(-1)
    bt = (ql @ k.transpose(-1, -2) / math.sqrt(d)).softmax(-1)
    z = _pinv(a)
    out = (f @ (z @ (bt @ v))).transpose(1, 2).flatten(2)
    return out @ w["nodes.z.out.weight"].T + w["nodes.z.out.bias"], z, a


def test_nystromformer_matches_the_paper() -> None:
    """Outputs equal the reference's; so does Ã⁺, to 1e-5 of its largest entry (Ã of
    near-uniform softmax rows is ill-conditioned: Z has entries near 10, and the
    iteration carries float32 rounding of the products' order)."""
    model = compile_mechanism("nystromformer")
    w = _weights(3)
    load_weights(model, w)
    img = torch.randn(3, C, 4, 4, generator=torch.Generator().manual_seed(2))
    got = model(img=img)
    want, z, _ = _reference(img, w)
    torch.testing.assert_close(got["z"], want, **TOL)
    scale = z.abs().max()
    torch.testing.assert_close(got["pinv"] / scale, z / scale, **TOL)


def test_six_iterations_approach_the_pseudo_inverse() -> None:
    """After 6 iterations Ã Z Ã is close to Ã (the defining property of Ã⁺)."""
    model = compile_mechanism("nystromformer")
    w = _weights(5)
    load_weights(model, w)
    img = torch.randn(2, C, 4, 4, generator=torch.Generator().manual_seed(6))
    z = model(img=img)["pinv"]
    _, _, a = _reference(img, w)
    assert (a @ z @ a - a).abs().max() < 1e-2
