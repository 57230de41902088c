"""Helpers of the mechanism tests: load a spec of ``mechanisms/``, copy weights in.

Each mechanism of the literature has a spec ``mechanisms/<name>.yaml`` (its first
comment lines cite the paper and name its nearest catalog relative with
``# relative: <catalog spec name>``) and a test file ``tests/test_mechanism_<name>.py``
that compares it with a hand-written PyTorch reference with the same weights to
1e-5, with padding in the batch where the mechanism has variable lengths.
``tests/test_mechanisms.py`` runs every spec of the folder through the commands.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MECHANISMS = ROOT / "mechanisms"
#: the tolerance every reference comparison uses
TOL = {"atol": 1e-5, "rtol": 1e-5}


def spec_path(name: str) -> Path:
    """The file of mechanism ``name``."""
    return MECHANISMS / f"{name}.yaml"


def relative(path: Path) -> str:
    """The catalog spec a mechanism names as its nearest relative (``# relative: x``)."""
    m = re.search(r"^#\s*relative:\s*([a-z0-9_]+)\s*$", path.read_text(encoding="utf-8"), re.M)
    if m is None:
        msg = f"{path.name} names no '# relative: <catalog spec>' in its header"
        raise AssertionError(msg)
    return m.group(1)


def compile_mechanism(name: str, seed: int = 0, **kw: Any) -> Any:
    """The compiled module of ``mechanisms/<name>.yaml`` in eval mode."""
    import attngraph

    model = attngraph.compile(spec_path(name), seed=seed, **kw)
    return model.eval()


def lengths_mask(lengths: list[int], n: int) -> Any:
    """A bool mask ``(B, n)``, True at the first ``lengths[b]`` items of example b."""
    import torch

    return torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]


def load_weights(model: Any, weights: dict[str, Any]) -> None:
    """Set the named parameters of ``model`` from ``weights``: every key must exist
    with the same shape, and every parameter of the model must be given (so that a
    reference that forgets a weight fails here, not by luck)."""
    import torch

    sd = model.state_dict()
    unknown = sorted(set(weights) - set(sd))
    assert not unknown, f"no such parameters: {unknown}; the model has {sorted(sd)}"
    params = {n for n, _ in model.named_parameters()}
    missing = sorted(params - set(weights))
    assert not missing, f"the reference gives no value for {missing}"
    for key, value in weights.items():
        shapes = f"{key}: {tuple(sd[key].shape)} vs {tuple(value.shape)}"
        assert sd[key].shape == value.shape, shapes
        sd[key] = torch.as_tensor(value).detach().clone()
    model.load_state_dict(sd)


def mha_weights(names: tuple[str, ...], d: int, seed: int, out: str = "z",
                bias: bool = True) -> dict[str, Any]:
    """Random weights for projections ``nodes.<name>.proj`` (d -> d) and a readout's
    ``nodes.<out>.out`` (d -> d), as a reference and the module share them."""
    import torch

    g = torch.Generator().manual_seed(seed)
    w: dict[str, Any] = {}
    for name, attr in [(n, "proj") for n in names] + [(out, "out")]:
        w[f"nodes.{name}.{attr}.weight"] = torch.randn(d, d, generator=g) * (d ** -0.5)
        if bias:
            w[f"nodes.{name}.{attr}.bias"] = torch.randn(d, generator=g) * 0.1
    return w


def heads_of(x: Any, w: dict[str, Any], name: str, heads: int) -> Any:
    """``x (B, N, d)`` projected by ``nodes.<name>.proj`` and split: (B, h, N, d/h)."""
    y = x @ w[f"nodes.{name}.proj.weight"].T
    if f"nodes.{name}.proj.bias" in w:
        y = y + w[f"nodes.{name}.proj.bias"]
    b, n, d = y.shape
    return y.reshape(b, n, heads, d // heads).transpose(1, 2)


def attend(scores: Any, keep: Any, v: Any, w: dict[str, Any], out: str = "z") -> Any:
    """softmax over kept items, read v (B, h, N, dv), heads concatenated, then W_o."""
    p = scores.masked_fill(~keep, float("-inf")).softmax(-1)
    z = (p @ v).transpose(1, 2).flatten(2)
    z = z @ w[f"nodes.{out}.out.weight"].T
    if f"nodes.{out}.out.bias" in w:
        z = z + w[f"nodes.{out}.out.bias"]
    return z
