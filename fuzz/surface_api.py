"""Surface ``api``: the Python entry points given arguments of the wrong kind.

Where the command line's option types check a value before the code sees it, a
call from Python passes anything: ``None``, a bool, a string of digits, a float, a
NaN, a huge or negative number, a list, a dict, bytes, a tensor of the wrong dtype or
shape, an object. Each case calls one entry point with one argument replaced by such
a value (the others valid):

- ``attngraph.compile`` (the spec, ``seed``, ``fuse``, ``allow_large``, ``block``),
  ``attngraph.loads_spec`` (the text, the file name);
- a compiled model's forward (an input, its mask, an input it does not have);
- ``attngraph.generate`` on a small GPT-2 (``inputs``, ``max_length``, ``beam``,
  ``eos``, ``pad``, ``length_penalty``, ``start``, ``output``, ``return_attention``,
  ``cache``);
- ``attngraph.load_run``, and a finished run's ``predict``, ``evaluate`` (the
  records, ``batch``, ``max_length``, ``beam``, ``attention``, ``bf16``, ``truncate``)
  and ``export`` (the path, inside the case's folder, and the format);
- ``attngraph.fit`` for one step into the case's folder (the data, ``batch``, ``lr``,
  ``seed``, ``epochs``, ``valid_fraction``, ``patience``, ``tokenize``, the switches,
  ``fields``, ``valid``, ``device``).

The oracle: one of the project's errors, located, with a hint, is a clean rejection; a
result is valid when its numbers are finite; any other exception (a ``TypeError`` from
deep inside) is a ``crash`` defect at the innermost project frame.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attngraph.errors import whole
from fuzz.oracle import Outcome
from fuzz.seeds import ROOT
from fuzz.surface import Case, fail, finite, quiet, rejected
from fuzz.surface_rundir import make_run

__all__ = ["prepare", "run"]

GA = ROOT / "specs" / "global_attention.yaml"
#: GPT-2 at a tiny size: a causal decoder for forward and generate
GPT2_DIMS = {"vocab": 17, "d": 8, "heads": 2, "ff": 16, "layers": 1, "n": 12}


class _Odd:
    """An object of no kind the code knows."""

    def __repr__(self) -> str:
        return "<odd object>"


def _odd_values() -> tuple[Any, ...]:
    import torch

    return (None, True, False, 0, -1, 1, 3, 2**70, -(2**70), 1.5, float("nan"), float("inf"),
            -0.0, "", "x", "3", "a" * 10_000, b"x", [], [1, 2], [[1, 2]], (1,), {}, {"a": 1},
            _Odd(), torch.tensor(1.0), torch.tensor([1.5, 2.0]), torch.zeros(2, 3),
            torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.bool),
            torch.zeros(0, dtype=torch.long), torch.full((2, 3), 99), torch.tensor(float("nan")),
            torch.zeros(2, 3, 4, dtype=torch.long))


def prepare(root: Path) -> dict[str, Any]:
    """A finished run and its data file, the GPT-2 spec at a tiny size, compiled."""
    import attngraph
    from attngraph.realmodels.build import with_dims

    out = make_run(root)
    text = with_dims((ROOT / "specs" / "real" / "gpt2.yaml").read_text(encoding="utf-8"),
                     GPT2_DIMS)
    gpt2 = attngraph.compile(attngraph.loads_spec(text, "gpt2.yaml"), seed=0)
    gpt2.eval()
    return {"run": out, "data": out.parent / "train.jsonl", "gpt2": gpt2, "gpt2_text": text}


def _call(case: Case, what: str, fn: Any, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Outcome:
    """Call ``fn`` and say what happened."""
    from attngraph.errors import AttnGraphError

    try:
        with quiet():
            result = fn(*args, **kwargs)
    except AttnGraphError as exc:
        out = rejected(exc)
        if out.outcome == "rejected" and not out.hint:
            fail("no-hint", f"{what}: {out.place}", out.message)
        return out
    except Exception as exc:  # noqa: BLE001 - any other is the defect this surface looks for
        return rejected(exc)
    bad = finite(result if not hasattr(result, "figures") else result.figures)
    if bad:
        fail("nonfinite", f"{what}: {bad}", f"{what} gave a non-finite value at {bad}")
    return Outcome("valid")


def run(case: Case) -> Outcome:
    """One entry point, one argument of an odd kind."""
    import torch

    import attngraph

    odd = _odd_values()
    value = case.pick(odd)
    entry = case.pick(("compile", "loads_spec", "forward", "generate", "generate",
                       "load_run", "predict", "predict", "evaluate", "export", "fit"), "entry")
    st = case.state
    if entry == "fit":  # one step of training, into the case's folder
        arg = case.pick(("data", "batch", "lr", "seed", "epochs", "valid_fraction",
                         "patience", "tokenize", "bf16", "overwrite", "quiet", "fields",
                         "valid", "device"), "arg")
        case.op(f"{arg}={value!r:.30}")
        kw = {"steps": 1, "batch": 4, "out": case.tmp / "run", "quiet": True}
        data: Any = str(st["data"])
        if arg == "data":
            data = value
        elif arg == "epochs":  # a count it takes trains that long: a few at most
            kw.pop("steps")
            kw["epochs"] = min(value, 2) if whole(value) else value
        else:
            kw[arg] = value
        return _call(case, f"fit({arg})", attngraph.fit, (GA, data), kw)
    if entry == "compile":
        arg = case.pick(("spec", "seed", "seed", "fuse", "allow_large", "block"), "arg")
        case.op(f"{arg}={value!r:.30}")
        kw: dict[str, Any] = {"seed": 0}
        spec: Any = str(GA)
        if arg == "spec":
            spec = value
        else:
            kw[arg] = value
        return _call(case, f"compile({arg})", attngraph.compile, (spec,), kw)
    if entry == "loads_spec":
        arg = case.pick(("text", "file"), "arg")
        case.op(f"{arg}={value!r:.30}")
        text: Any = GA.read_text(encoding="utf-8")
        kw = {"file": value} if arg == "file" else {}
        return _call(case, f"loads_spec({arg})", attngraph.loads_spec,
                     (value if arg == "text" else text,), kw)
    model = st["gpt2"]
    tokens = torch.randint(0, GPT2_DIMS["vocab"], (2, 5), generator=torch.Generator()
                           .manual_seed(case.index))
    if entry == "forward":
        arg = case.pick(("tokens", "tokens_mask", "extra"), "arg")
        case.op(f"{arg}={value!r:.30}")
        inputs: dict[str, Any] = {"tokens": tokens}
        inputs["other" if arg == "extra" else arg] = value
        with torch.no_grad():
            return _call(case, f"forward({arg})", model, (), inputs)
    if entry == "generate":
        arg = case.pick(("inputs", "max_length", "max_length", "beam", "eos", "pad",
                         "length_penalty", "start", "output", "return_attention", "cache"),
                        "arg")
        case.op(f"{arg}={value!r:.30}")
        kw = {"max_length": 4}
        given: Any = {}
        if arg == "inputs":
            given = value
        else:
            kw[arg] = value
        return _call(case, f"generate({arg})", attngraph.generate, (model, given), kw)
    if entry == "load_run":
        case.op(f"path={value!r:.30}")
        return _call(case, "load_run(path)", attngraph.load_run, (value,), {})
    the_run = attngraph.load_run(st["run"])
    records = [{"text": "the storm rain", "label": "weather"}, {"text": "the team coach"}]
    if entry in ("predict", "evaluate"):
        args = ("data", "batch", "batch", "max_length", "beam", "bf16", "truncate") + (
            ("attention",) if entry == "predict" else ())
        arg = case.pick(args, "arg")
        case.op(f"{arg}={value!r:.30}")
        data = records if entry == "predict" else records[:1]
        kw = {}
        if arg == "data":
            data = value
        else:
            kw[arg] = value
        return _call(case, f"{entry}({arg})", getattr(the_run, entry), (data,), kw)
    arg = case.pick(("path", "format"), "arg")
    where = case.pick(("out.pt2", "out.onnx", "out.py", "missing/out.pt2", "."), "at")
    path: Any = case.tmp / where
    kw = {"format": "python"}
    if arg == "path":
        path = value if not isinstance(value, (str, bytes)) else case.tmp / "x" / str(value)[:50]
    else:
        kw["format"] = value
    case.op(f"{arg}={value!r:.30}")
    return _call(case, f"export({arg})", the_run.export, (path,), kw)
