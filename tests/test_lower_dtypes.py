"""A compiled model follows ``.to(dtype)`` and ``.to(device)``: every tensor made at
run time (a loop's zero state, its start ids...) takes the dtype and device of the
model's inputs and parameters."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.frontend import load_spec  # noqa: E402
from attngraph.lower.runtime.examples import random_inputs  # noqa: E402

SPECS = sorted((Path(__file__).resolve().parent.parent / "specs").glob("*.yaml"))
IDS = [p.stem for p in SPECS]
#: their sinusoidal position table is made in float32 (lower/support.py), which
#: type promotion lifts a half model's values to


def _run(path: Path, dtype: Any, device: str = "cpu") -> tuple[dict, dict]:
    """Outputs of the float32 CPU model and of its copy in ``dtype`` on ``device``,
    in eval mode on the same inputs (floats cast to ``dtype``)."""
    graph = load_spec(path)
    model = attngraph.compile(graph, seed=0).eval()
    inputs = random_inputs(graph, batch=3, length=6, generator=torch.Generator().manual_seed(0))
    for n in graph.inputs:
        if "mask" in n.types:  # ragged trailing padding, one full row
            inputs[f"{n.id}_mask"] = torch.arange(6)[None, :] < torch.tensor([6, 4, 2])[:, None]
    for n in graph.inputs:  # positions point at real items of their input
        if n.spec.type == "positions":
            inputs[n.id] = inputs[n.id] % inputs[f"{n.spec.of}_mask"].sum(-1)[:, None]
    other = copy.deepcopy(model).to(device=device, dtype=dtype)
    cast = {k: (v.to(dtype) if v.is_floating_point() else v).to(device) for k, v in inputs.items()}
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # a latent samples in eval: the same draws in both
        want = model(**inputs)
        torch.manual_seed(0)
        return want, other(**cast)


@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_double_model_gives_float64_outputs_equal_to_float32(path: Path) -> None:
    """``model.double()`` on float64 inputs: every float output is float64 and equals
    the float32 model's to 1e-5."""
    want, got = _run(path, torch.float64)
    assert set(got) == set(want)
    for k, v in got.items():
        if want[k].is_floating_point():
            assert v.dtype == torch.float64, k
            torch.testing.assert_close(v.float(), want[k], atol=1e-5, rtol=1e-5)
        else:
            assert torch.equal(v, want[k]), k


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["half", "bf16"])
@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_half_models_run_in_half(path: Path, dtype: Any) -> None:
    """``model.half()`` / ``.to(torch.bfloat16)`` on CPU: outputs in that dtype, close to
    float32 (the precision of the format)."""
    want, got = _run(path, dtype)
    for k, v in got.items():
        if want[k].is_floating_point():
            assert v.dtype == dtype, k
            torch.testing.assert_close(v.float(), want[k], atol=0.05, rtol=0.05)


@pytest.mark.gpu
@pytest.mark.parametrize("path", SPECS, ids=IDS)
def test_cuda_model_equals_cpu(path: Path) -> None:
    """``model.cuda()`` on CUDA inputs gives the CPU outputs (1e-4), on the GPU."""
    want, got = _run(path, torch.float32, "cuda")
    for k, v in got.items():
        assert v.device.type == "cuda", k
        torch.testing.assert_close(v.cpu(), want[k], atol=1e-4, rtol=1e-4)
