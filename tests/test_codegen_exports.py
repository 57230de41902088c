"""torch.export and ONNX of the generated module (``model.code``) give the programs
of the compiled model: the same outputs in onnxruntime as the model's own ONNX file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from codegen_support import load, masked_inputs  # noqa: E402

import attngraph  # noqa: E402
from attngraph.lower.export.codegen import class_name  # noqa: E402
from attngraph.lower.export.programs import export_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _generated(spec: str) -> tuple[object, torch.nn.Module]:
    model = attngraph.compile(ROOT / "specs" / f"{spec}.yaml", seed=0).eval()
    mod = load(model.code, f"{spec}_onnx_file")
    ours = getattr(mod, class_name(model.graph.name))()
    ours.load_state_dict(model.state_dict())
    return model, ours.eval()


def _ort(onnx: bytes, inputs: dict[str, torch.Tensor]) -> list[object]:
    sess = ort.InferenceSession(onnx, providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: inputs[i.name].numpy() for i in sess.get_inputs()})


def test_onnx_of_the_file_runs_as_the_models_onnx() -> None:
    """multihead_attention's file exported to ONNX (torch.onnx, dynamo) returns in
    onnxruntime what the compiled model's ONNX file returns, on padded inputs."""
    model, ours = _generated("multihead_attention")
    try:
        inputs = masked_inputs(model, batch=2, length=8)
        mine = torch.onnx.export(ours, (), kwargs=inputs, dynamo=True, verbose=False)
        theirs, _ = export_onnx(model, batch=2, length=8)
        got = _ort(mine.model_proto.SerializeToString(), inputs)
        want = _ort(theirs, inputs)
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b), atol=1e-5,
                                       rtol=1e-5)
    finally:
        del sys.modules["multihead_attention_onnx_file"]
