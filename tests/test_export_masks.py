"""Exported programs take the padding masks: a padded batch through the pt2 program,
the ONNX model and the Python file equals, per example, that example alone (cut to
its real items, no mask) through the compiled model, at its real positions."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from export_support import exported, traced_as_the_command_does  # noqa: E402

import attngraph  # noqa: E402
from attngraph.cli import main  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.lower.export.codegen import class_name  # noqa: E402
from attngraph.lower.export.inputs import full_masks, program_inputs, with_masks  # noqa: E402
from attngraph.lower.export.programs import export_file  # noqa: E402
from attngraph.lower.runtime.examples import random_inputs  # noqa: E402

#: the exported files are shared by the test processes (``export_support.exported``)
pytestmark = pytest.mark.usefixtures("shared_exports")

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted((ROOT / "specs").glob("*.yaml"))
#: one spec per kind of input that takes a mask, and one that takes none: tokens,
#: vectors (and a target without a mask), a graph (with its adjacency), two masked
#: inputs of two lengths (positions into the other), images only
FAST = ["global_attention", "graph_attention", "handwriting_generation", "pointer_sort",
        "caption_generation"]
#: float32, every format (onnxruntime's own kernels included: 3.6e-7 at most measured)
ATOL = {"pt2": 1e-5, "python": 1e-5, "onnx": 1e-5}
#: the largest difference measured per format and spec (printed with -s)
MEASURED: dict[tuple[str, str], float] = {}

Runner = Callable[[dict[str, Any]], dict[str, Any]]


def _made(stem: str, fmt: str) -> tuple[Any, Any]:
    """A catalog spec's compiled model (eval, seed 0) and its exported file (traced at
    batch 2, lengths 8), made once per session and shared with tests/test_onnx.py and
    tests/test_export.py (``export_support.exported``)."""
    model, made = exported(ROOT / "specs" / f"{stem}.yaml", fmt, batch=2, length=8)
    if fmt != "python":
        traced_as_the_command_does(made)
    return model, made


def _runner(model: Any, fmt: str, made: Any) -> Runner:
    """The exported program of ``fmt`` (its file ``made``), as a function of named
    inputs."""
    if fmt == "pt2":
        program = torch.export.load(io.BytesIO(made.data)).module()
        names = [i.name for i in program_inputs(model)]
        return lambda kw: program(*[kw[n] for n in names])
    if fmt == "onnx":
        ort = pytest.importorskip("onnxruntime")
        session = ort.InferenceSession(made.data, providers=["CPUExecutionProvider"])
        outs = [o.name for o in session.get_outputs()]

        def run(kw: dict[str, Any]) -> dict[str, Any]:
            feeds = {i.name: kw[i.name].numpy() for i in session.get_inputs()}
            return {k: torch.from_numpy(v) for k, v in zip(outs, session.run(outs, feeds),
                                                            strict=True)}
        return run
    name = f"exported_{model.graph.name}"
    mod = types.ModuleType(name)
    sys.modules[name] = mod  # dataclasses look their module up
    exec(compile(made.data, f"{name}.py", "exec"), mod.__dict__)  # noqa: S102
    net = getattr(mod, made.class_name or class_name(model.graph.name))()
    net.load_state_dict(model.state_dict())
    net.eval()
    return lambda kw: net(**kw)


def _real(model: Any, inputs: dict[str, Any], i: int) -> dict[str, Any]:
    """Example ``i`` alone: each input cut to the real items of its lengths (read off
    the masks), with a mask only where one is still needed (words of sentences)."""
    size: dict[str, int] = {}
    for a in model.binder.args:
        if a.port == "mask":
            m = inputs[a.name][i]
            for axis, d in enumerate(a.t.dims):
                rest = tuple(j for j in range(m.dim()) if j != axis)
                hit = (m.any(dim=rest) if rest else m).nonzero()
                size[str(d)] = int(hit.max()) + 1 if len(hit) else 1
    out = {}
    for a in model.binder.args:
        if a.name not in inputs:
            continue
        x = inputs[a.name][i:i + 1]
        for axis, d in enumerate(a.t.dims):
            if isinstance(d, str) and d in size:
                x = x.narrow(axis + 1, 0, size[d])
        if a.port == "mask" and bool(x.all()):
            continue
        out[a.name] = x
    return out


def _check_per_example(model: Any, run: Runner, fmt: str, *, batch: int = 3,
                       length: int = 11, seed: int = 5) -> float:
    """A padded batch at another batch and length than the traced ones: per example,
    the program's outputs at the real positions equal the example alone through the
    model; the largest difference."""
    g = torch.Generator().manual_seed(seed)
    inputs = with_masks(model, random_inputs(model.graph, batch=batch, length=length,
                                             generator=g), generator=g)
    samples = any(n.kind == "latent" for _, n in model.graph.walk())
    with torch.no_grad():
        got = run(inputs)
        worst = 0.0
        for i in range(batch):
            want = model(**_real(model, inputs, i))
            assert list(got) == list(want)
            for k, ref in want.items():
                value = got[k][i:i + 1]
                for axis, n in enumerate(ref.shape):
                    value = value.narrow(axis, 0, n)
                assert value.shape == ref.shape, (k, i)
                if samples:  # a latent draws other noise for a batch than for one example
                    continue
                worst = max(worst, float((value - ref).abs().max()) if ref.numel() else 0.0)
                torch.testing.assert_close(value, ref, atol=ATOL[fmt], rtol=ATOL[fmt],
                                           msg=lambda m, k=k, i=i: f"{k}[{i}]: {m}")
    return worst


def _check(stem: str, fmt: str) -> None:
    if fmt == "onnx":
        pytest.importorskip("onnxscript")
        pytest.importorskip("onnxruntime")
    start = time.perf_counter()
    model, made = _made(stem, fmt)
    run = _runner(model, fmt, made)
    worst = _check_per_example(model, run, fmt)
    MEASURED[fmt, stem] = worst
    print(f"{fmt} {stem}: max |diff| {worst:.2e} in {time.perf_counter() - start:.1f}s")


def _params(fmts: tuple[str, ...], stems: list[str], *, slow: bool) -> list[Any]:
    """A test per format and spec, on the worker of the spec's other export tests
    (``--dist loadgroup``), which share its exported files."""
    marks = [pytest.mark.slow] if slow else []
    return [pytest.param(s, f, marks=[*marks, pytest.mark.xdist_group(s)], id=f"{f}-{s}")
            for f in fmts for s in stems]


@pytest.mark.parametrize(("stem", "fmt"), _params(("pt2", "python", "onnx"), FAST,
                                                  slow=False))
def test_a_padded_batch_equals_each_example_alone(stem: str, fmt: str) -> None:
    """One spec per kind of masked input: the exported program takes each input's
    mask, and a padded batch (batch 3, length 11; traced at 2 and 8) gives per
    example what the example alone gives the compiled model, at its real positions."""
    _check(stem, fmt)


@pytest.mark.slow
@pytest.mark.parametrize(("stem", "fmt"), _params(
    ("pt2", "python", "onnx"), [p.stem for p in SPECS if p.stem not in FAST], slow=True))
def test_every_catalog_spec_exported_equals_each_example_alone(stem: str, fmt: str) -> None:
    """Every catalog spec, every format: a padded batch through the exported program
    equals, per example, the example alone through the compiled model."""
    _check(stem, fmt)


@pytest.mark.xdist_group("pointer_sort")
def test_the_programs_take_every_mask_with_dynamic_axes() -> None:
    """pt2 and ONNX inputs are the model's forward arguments in its order, masks
    included (bool), with the batch and the lengths dynamic; an all-True mask gives
    what the model gives without masks."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    model, pt2 = _made("pointer_sort", "pt2")  # (made once: the test above exports it)
    names = ["source", "target", "source_mask", "target_mask"]
    assert [i.name for i in program_inputs(model)] == names
    assert pt2.exported is not None and list(pt2.exported.example) == names
    assert pt2.exported.batch_dynamic and pt2.exported.lengths_dynamic
    _, onnx = _made("pointer_sort", "onnx")
    session = ort.InferenceSession(onnx.data, providers=["CPUExecutionProvider"])
    got = [(i.name, i.type) for i in session.get_inputs()]
    assert got == [("source", "tensor(int64)"), ("target", "tensor(int64)"),
                   ("source_mask", "tensor(bool)"), ("target_mask", "tensor(bool)")]
    assert all(isinstance(d, str) for i in session.get_inputs() for d in i.shape)
    plain = random_inputs(model.graph, batch=4, length=7,
                          generator=torch.Generator().manual_seed(2))
    program = torch.export.load(io.BytesIO(pt2.data)).module()
    full = full_masks(model, plain)
    with torch.no_grad():
        want = model(**plain)
        got_pt2 = program(*[full[n] for n in names])
    feeds = {n: full[n].numpy() for n in names}
    got_onnx = dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds),
                        strict=True))
    for k, ref in want.items():
        torch.testing.assert_close(got_pt2[k], ref, atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(torch.from_numpy(got_onnx[k]), ref, atol=1e-4, rtol=1e-4)


@pytest.mark.xdist_group("glimpse_soft")
def test_a_spec_without_masks_exports_as_before() -> None:
    """A spec whose inputs take no mask (images) exports the same inputs as before (the
    file made once: tests/test_export.py checks it too)."""
    model, made = _made("glimpse_soft", "pt2")
    assert [str(i) for i in program_inputs(model)] == ["image: float32 (B, 1, 32, 32)"]
    done = made.exported
    assert done is not None and list(done.example) == ["image"]


def test_the_command_prints_the_inputs_of_the_program(tmp_path: Path) -> None:
    """``attngraph export`` says what the program it wrote takes: each input's name,
    dtype and shape, the masks and what True means, and that every mask is needed."""
    out = tmp_path / "ga.pt2"
    res = CliRunner().invoke(main, ["export", str(ROOT / "specs" / "global_attention.yaml"),
                                    "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert ("inputs: tokens: int64 (B, N), tokens_mask: bool (B, N) (True = a real item of "
            "tokens)\n  (every mask is required: all True for a batch without padding)\n"
            f"run it: torch.export.load({str(out)!r}).module()(tokens, tokens_mask)\n"
            ) in res.output


#: imports the exported file of a run where neither attngraph nor safetensors can be
#: imported (torch alone), loads it with its weights and runs it on the saved inputs
LOADER_RUNNER = """
import sys
sys.modules["attngraph"] = None
sys.modules["safetensors"] = None
sys.path.insert(0, ".")
import torch
from model import load
model = load()
assert not model.training
with torch.no_grad():
    out = model(**torch.load("inputs.pt"))
torch.save(out, "out.pt")
"""


def _run_alone(folder: Path) -> dict[str, Any]:
    """``LOADER_RUNNER`` in ``folder``, isolated (``-I``: no user site, no PYTHONPATH,
    not the project's folder), its outputs."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    run = subprocess.run([sys.executable, "-I", "-c", LOADER_RUNNER], cwd=folder, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    return torch.load(folder / "out.pt")


def test_the_python_file_of_a_run_loads_its_weights_with_torch_alone(tmp_path: Path) -> None:
    """``export RUN --format python -o model.py`` writes model.py and the run's weights
    beside it (model.safetensors); ``from model import load; load()``, where only
    torch can be imported, gives the trained model: on a padded batch it equals the
    run's model to 1e-6."""
    run_dir = tmp_path / "run"
    spec = ROOT / "specs" / "global_attention.yaml"
    res = CliRunner().invoke(main, ["train", str(spec), "--out", str(run_dir), "--steps", "3",
                                    "--quiet"])
    assert res.exit_code == 0, res.output
    folder = tmp_path / "elsewhere"
    res = CliRunner().invoke(main, ["export", str(run_dir), "--format", "python", "-o",
                                    str(folder / "model.py")])
    assert res.exit_code == 0, res.output
    assert f"and {folder / 'model.safetensors'}" in res.output
    assert "run it: from model import load; model = load(); model(tokens, tokens_mask)" \
        in res.output
    trained = attngraph.load_run(run_dir).model.eval()
    fresh = attngraph.compile(spec, seed=0).eval()
    g = torch.Generator().manual_seed(7)
    inputs = with_masks(trained, random_inputs(trained.graph, batch=4, length=9,
                                               generator=g), generator=g)
    torch.save(inputs, folder / "inputs.pt")
    got = _run_alone(folder)
    with torch.no_grad():
        want, other = trained(**inputs), fresh(**inputs)
    assert not torch.allclose(want["logits"], other["logits"])  # the trained weights
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=1e-6, rtol=0, msg=k)


TIED = """attngraph: 1
name: tied
dims: {vocab: 30, d: 8}
inputs:
  tok: {type: tokens, vocab: vocab}
  other: {type: tokens, vocab: vocab, length: M}
nodes:
  x:  {kind: items, from: tok, embed: d}
  y: {kind: items, from: other, embed: d, share: x}
  out: {kind: linear, from: x, out: vocab, tie: x}
outputs: {o: out, y: y}
"""


def test_shared_and_tied_weights_load_back_shared(tmp_path: Path) -> None:
    """Shared and tied parameters are written once per name (safetensors keeps no
    aliases) and load back into the file's one shared parameter: ``load()`` equals
    the model, and the tied weight is still the embedding table."""
    model = attngraph.compile(loads_spec(TIED), seed=3).eval()
    made = export_file(model, "python", weights="model.safetensors")
    assert made.weights is not None
    (tmp_path / "model.py").write_bytes(made.data)
    (tmp_path / "model.safetensors").write_bytes(made.weights)
    mod = types.ModuleType("tied_model")
    mod.__dict__["__file__"] = str(tmp_path / "model.py")
    sys.modules["tied_model"] = mod  # dataclasses look their module up
    exec(compile(made.data, str(tmp_path / "model.py"), "exec"), mod.__dict__)  # noqa: S102
    net = mod.load()
    # the file names its parameters its own way: STATE_NAMES maps the model's names
    # to them, by their longest matching prefix
    names: dict[str, str] = getattr(mod, "STATE_NAMES", {})

    def own(name: str) -> Any:
        old = max((o for o in names if name.startswith(o)), key=len, default="")
        return net.get_parameter(names.get(old, "") + name[len(old):])

    assert own("nodes.out.weight") is own("nodes.x.embed.weight")
    inputs = full_masks(model, random_inputs(model.graph, batch=2, length=5,
                                             generator=torch.Generator().manual_seed(1)))
    with torch.no_grad():
        got, want = net(**inputs), model(**inputs)
    for k in want:
        torch.testing.assert_close(got[k], want[k], atol=0, rtol=0, msg=k)


def test_a_python_file_named_like_its_weights_is_refused(tmp_path: Path) -> None:
    """``-o model.safetensors`` of a run would overwrite the file with its weights:
    one error, nothing written."""
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(main, ["train", str(ROOT / "specs" / "global_attention.yaml"),
                                    "--out", str(run_dir), "--steps", "1", "--quiet"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "model.safetensors"
    res = CliRunner().invoke(main, ["export", str(run_dir), "--format", "python", "-o",
                                    str(out)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "overwritten by its own weights" in res.output and not out.exists()
