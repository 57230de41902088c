"""Helpers of the tests of ``model.code`` (``--format python``): padded inputs of a
model's types, the file loaded as a module, its names of the compiled model's
parameters, and the check that a file computes its model (outputs and gradients)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import torch
import yaml

import attngraph
from attngraph.frontend import loads_spec
from attngraph.lower.export.codegen import class_name
from attngraph.lower.runtime.examples import random_inputs
from fuzz.seeds import doc_specs

ROOT = Path(__file__).resolve().parent.parent


def masked_inputs(model: Any, *, batch: int = 3, length: int = 6,
                  seed: int = 0) -> dict[str, Any]:
    """Random inputs of the model's types, with a padding mask for every input that
    takes one: example 0 full, example 1 two items shorter, example 2 half as long
    (positions into a padded input point at its real items)."""
    inputs = random_inputs(model.graph, batch=batch, length=length,
                           generator=torch.Generator().manual_seed(seed))
    for a in model.binder.args:
        if a.port != "mask" or a.t.rank != 1:
            continue
        n = inputs[a.input].shape[1]
        lengths = torch.tensor([n, max(1, n - 2), max(1, n // 2)][:batch])
        inputs[a.name] = torch.arange(n)[None, :] < lengths[:, None]
    for a in model.binder.args:  # positions point at real items of their input
        items = inputs.get(f"{a.of}_mask") if a.of is not None else None
        if items is not None:
            inputs[a.input] = inputs[a.input] % items.sum(-1)[:, None]
    return inputs


def load(code: str, name: str) -> types.ModuleType:
    """The file as a module of this process (registered: dataclasses look it up);
    the caller removes it from ``sys.modules``."""
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    try:
        exec(compile(code, f"{name}.py", "exec"), mod.__dict__)  # noqa: S102
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def file_names(mod: types.ModuleType, model: Any) -> dict[str, str]:
    """Each state-dict name of the compiled model -> the file's (its STATE_NAMES)."""
    olds = sorted(mod.STATE_NAMES, key=len, reverse=True)
    out = {}
    for key in model.state_dict():
        old = next(o for o in olds if key == o or (o.endswith(".") and key.startswith(o)))
        out[key] = mod.STATE_NAMES[old] + key[len(old):]
    return out


def filled(mod: types.ModuleType, model: Any) -> Any:
    """The file's class of ``model`` (from the loaded file ``mod``), built and given the
    compiled model's state dict (strictly), in the model's mode (train or eval)."""
    ours = getattr(mod, class_name(model.graph.name))()
    ours.load_state_dict(model.state_dict())
    return ours.train(model.training)


#: the real models' dims at a test's size (their structure unchanged)
SMALL = {"vocab": 61, "d": 32, "heads": 4, "kv": 4, "kvd": 32, "ff": 64, "inner": 32,
         "layers": 2, "dlayers": 2, "n": 16}


def small(path: Path) -> str:
    """The text of a real model's spec with its ``dims:`` line at :data:`SMALL`."""
    text = path.read_text(encoding="utf-8")
    line = re.search(r"^dims: (\{.*\})$", text, re.M)
    if line is None:
        return text
    dims = {**yaml.safe_load(line.group(1))}
    dims.update({k: v for k, v in SMALL.items() if k in dims})
    flow = "{" + ", ".join(f"{k}: {v}" for k, v in dims.items()) + "}"
    return text[:line.start(1)] + flow + text[line.end(1):]


def every_spec() -> list[tuple[str, Any]]:
    """(name, spec) of every catalog spec (specs/, specs/real/ at :data:`SMALL` dims),
    mechanism and whole spec of a docs page (the blocks :func:`fuzz.seeds.doc_specs`
    takes)."""
    out: list[tuple[str, Any]] = []
    for folder in ("specs", "specs/real", "mechanisms"):
        out += [(f"{folder}/{p.stem}", small(p) if folder == "specs/real" else p)
                for p in sorted((ROOT / folder).glob("*.yaml"))
                if not p.name.endswith(".names.yaml")]
    for page in sorted((ROOT / "docs").glob("*.md")):
        out += [(s.name, s.text) for s in doc_specs(page)]
    return out


def compiled(spec: Any) -> Any:
    """The spec compiled with seed 0 (YAML text through loads_spec)."""
    return attngraph.compile(loads_spec(spec) if isinstance(spec, str) else spec, seed=0)


def _run(model: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # a model that samples (a latent, a policy) draws the same
        return model(**inputs)


def assert_file_equals_model(model: Any, name: str, *, batch: int = 2, length: int = 4,
                             atol: float = 1e-5) -> None:
    """The file of ``model`` (eval mode), loaded with its state dict (strictly),
    returns the same outputs on padded inputs, and the gradients of a sum of its
    float outputs reach every parameter as the compiled model's do."""
    model = model.eval()
    code = model.code
    mod = load(code, name)
    try:
        ours = filled(mod, model)
        inputs = masked_inputs(model, batch=batch, length=length)
        got, want = _run(ours, inputs), _run(model, inputs)
        assert list(got) == list(want)
        for k in want:
            assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
            torch.testing.assert_close(got[k], want[k], atol=atol, rtol=1e-5,
                                       msg=lambda m, o=k: f"output {o}: {m}")
        names = file_names(mod, model)
        mine = dict(ours.named_parameters(remove_duplicate=False))
        theirs = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        gw = _grads(want, [p for _, p in theirs])
        gg = _grads(got, [mine[names[n]] for n, _ in theirs])
        for (n, _), a, b in zip(theirs, gg, gw, strict=True):
            assert (a is None) == (b is None), f"gradient of {n}: {a is None} vs {b is None}"
            if a is not None:
                torch.testing.assert_close(a, b, atol=atol, rtol=1e-4, equal_nan=True,
                                           msg=lambda m, o=n: f"gradient of {o}: {m}")
    finally:
        del sys.modules[name]


def _grads(out: dict[str, Any], params: list[Any]) -> list[Any]:
    """d(Σ mean outputs²)/d params (None: not reached) over the float outputs that need
    it (a NaN of the model's own, retnet_retention's at padding, is compared as equal)."""
    terms = [v.float().square().mean() for v in out.values()
             if v.is_floating_point() and v.requires_grad]
    if not terms or not params:
        return [None] * len(params)
    loss = sum(terms)
    return list(torch.autograd.grad(loss, params, allow_unused=True))
