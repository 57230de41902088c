"""Surface ``plugin``: misbehaving scorer functions and node kinds, registered as a
user's package would.

Each case registers, for its own duration (``KINDS.scoped()``, ``SCORERS.scoped()``),
either a scorer function (:class:`~attngraph.kinds.ScorerInfo`) or a kind (a copy of
``examples/05_custom_kind.py``'s ``scale``) whose hooks misbehave in one or more
ways: they raise an ``Exception``, raise a ``BaseException`` of their own, return
None or a value of the wrong type (a string, a float, a negative or 2**70 count, NaN),
``make`` or the lowering returns something that is not a module, or the module's
forward raises, returns None, a tuple, a dict, an integer tensor, the wrong shape, or
NaN. Then the case validates, compiles and runs the spec that uses it forward and
backward, draws it and describes it (in process), or does the same through
``attngraph --plugin MODULE`` with the registration in a module made for the case.

The oracle: one of the project's errors is clean; any other exception escaping is a
traceback defect, placed at the innermost attngraph frame that let it through; the
plugin's own ``BaseException`` too (attngraph calls every hook through one wrapper
that turns whatever it raises into an error at the node naming it). A non-finite
output is a defect unless the plugin's forward made it (then it is the plugin's
arithmetic).
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from fuzz.oracle import Outcome, place_of
from fuzz.surface import Case, Defect, Exit, cli, fail, finite, rejected

__all__ = ["PluginError", "PluginAbort", "prepare", "run"]


class PluginError(Exception):
    """What a misbehaving hook raises (an Exception of the plugin's own)."""


class PluginAbort(BaseException):
    """What a hook raises to leave at once (a BaseException of the plugin's own)."""


SCORER_SPEC = """attngraph: 1
name: plugged
inputs:
  src: {{type: vectors, dim: 8}}
nodes:
  q: {{kind: queries, from: src, heads: {heads}}}
  k: {{kind: keys, from: src, heads: {heads}}}
  v: {{kind: values, from: src, heads: {heads}}}
  s: {{kind: scorer, fn: {fn}, {query}key: k}}
  p: {{kind: softmax, scores: s}}
  z: {{kind: readout, weights: p, values: v}}
outputs: {{z: z}}
"""
KIND_SPEC = """attngraph: 1
name: plugged_kind
dims: {{d: 8}}
inputs:
  x: {{type: vectors, dim: d}}
nodes:
  xs: {{kind: {kind}, from: x, by: 0.5}}
  s: {{kind: scorer, fn: scaled_dot, query: xs, key: x}}
  p: {{kind: softmax, scores: s}}
  z: {{kind: readout, weights: p, values: x}}
outputs: {{z: z, weights: p}}
"""
#: How a hook that returns a value misbehaves.
RETURNS = ("ok", "ok", "raise", "base", "none", "str", "float", "negative", "huge", "nan",
           "bool", "list", "tensor")
#: How a module's forward misbehaves.
FORWARDS = ("ok", "ok", "raise", "base", "none", "tuple", "dict", "int", "flat", "extra-dim",
            "nan", "inf", "no-args", "numpy", "scalar", "detached", "half")


def prepare(root: Path) -> dict[str, Any]:
    """The folder the case modules for ``--plugin`` go in (on ``sys.path``)."""
    folder = root / "plugins"
    folder.mkdir(exist_ok=True)
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    return {"plugins": folder}


def _value(how: str, good: Any) -> Any:
    if how == "ok":
        return good
    if how == "raise":
        msg = "the plugin's hook failed"
        raise PluginError(msg)
    if how == "base":
        raise PluginAbort
    import torch

    return {"none": None, "str": "3", "float": 1.5, "negative": -1, "huge": 2**70,
            "nan": float("nan"), "bool": True, "list": [1], "tensor": torch.tensor(2)}[how]


def _forward(how: str, good: Any) -> Any:

    if how in ("ok", "no-args", "detached"):
        return good.detach() if how == "detached" else good
    if how in ("raise", "base"):
        return _value(how, good)
    return {"none": lambda: None, "tuple": lambda: (good, good), "dict": lambda: {"s": good},
            "int": lambda: good.long(), "flat": lambda: good.sum(-1),
            "extra-dim": lambda: good[..., None], "nan": lambda: good * float("nan"),
            "inf": lambda: good + float("inf"), "numpy": lambda: good.detach().numpy(),
            "scalar": lambda: good.sum(), "half": lambda: good.half()}[how]()


def _module(how: str, kind: Literal["scorer", "kind"], by: float = 0.5) -> Any:
    from torch import nn

    if how == "no-args":
        class NoArgs(nn.Module):
            def forward(self) -> Any:
                return None

        return NoArgs()

    if kind == "scorer":
        class Score(nn.Module):
            def forward(self, q: Any, k: Any, *args: Any, **kw: Any) -> Any:
                return _forward(how, q @ k.transpose(-1, -2))

        return Score()

    from attngraph.lower.runtime.module import NodeModule

    class Scale(NodeModule):
        def forward(self, x: dict[str, Any], rt: Any) -> Any:
            return _forward(how, x["from"] * by)

    return Scale()


def _scorer(case: Case) -> tuple[str, set[str]]:
    """Register a misbehaving scorer; its spec's text and what it misbehaves in."""
    from attngraph.kinds import ScorerInfo, register_scorer

    name = f"fz_{case.rng.randrange(10**6)}"
    hooks = {h: case.pick(RETURNS if h != "forward" else FORWARDS) if case.rng.random() < 0.5
             else "ok" for h in ("params", "make", "forward", "inner", "spec_params", "bias")}
    hooks["make-returns"] = case.pick(("module", "module", "module", "none", "str", "function",
                                       "tensor", "class"))
    case.op(f"scorer hooks {hooks}")
    needs_query = case.rng.random() < 0.8

    def make(dq: int, dk: int, hidden: int, heads: int | None = None) -> Any:
        _value(hooks["make"], None)
        ret = hooks["make-returns"]
        if ret != "module":
            import torch

            return {"none": None, "str": "module", "function": lambda q, k: q,
                    "tensor": torch.zeros(2), "class": type("M", (), {})}[ret]
        return _module(hooks["forward"], "scorer")

    info = ScorerInfo(name, case.pick(("q·k", "", "\u2028", "{x}", "a" * 500)),
                      needs_query=needs_query,
                      same_size=case.rng.random() < 0.5,
                      params=lambda dq, dk, h: _value(hooks["params"], 0),
                      make=make,
                      inner=lambda dq, dk, h: _value(hooks["inner"], 0),
                      spec_params=lambda spec: _value(hooks["spec_params"], 0),
                      bias=(lambda dq, dk, h: _value(hooks["bias"], 0))
                      if case.rng.random() < 0.3 else None)
    register_scorer(info)
    text = SCORER_SPEC.format(heads=case.pick((1, 2)), fn=name,
                              query="query: q, " if needs_query or case.rng.random() < 0.2
                              else "")
    return text, {h for h, v in hooks.items() if v not in ("ok", "module")}


def _kind(case: Case) -> tuple[str, set[str]]:
    """Register a misbehaving kind; its spec's text and what it misbehaves in."""
    from attngraph.ir.graph import TensorType
    from attngraph.kinds import RuleCtx, Style, kind
    from attngraph.spec.models import NodeModel, PosFloat, Ref

    name = f"fzk_{case.rng.randrange(10**6)}"
    hooks = {h: case.pick(RETURNS if h != "forward" else FORWARDS) if case.rng.random() < 0.4
             else "ok" for h in ("shape", "lowering", "forward", "work", "pure")}
    shape_returns = case.pick(("type", "type", "none", "empty", "str", "wrong-key", "list",
                               "bad-dims", "long"))
    case.op(f"kind hooks {hooks}, shape returns {shape_returns}")

    spec_model = type(f"Spec_{name}", (NodeModel,), {
        "__annotations__": {"kind": Literal[name], "from_": Ref, "by": PosFloat},
        "from_": Field(alias="from"), "by": 1.0, "__module__": __name__})

    def lowering(ctx: Any) -> Any:
        _value(hooks["lowering"], None)
        return _module(hooks["forward"], "kind", float(ctx.spec.by))

    def shape(ctx: RuleCtx) -> Any:
        _value(hooks["shape"], None)
        t = ctx.t("from")
        return {"type": {"": t}, "none": None, "empty": {}, "str": {"": "[N, 8]"},
                "wrong-key": {"zz": t}, "list": [t],
                "bad-dims": {"": TensorType(("N", -3))},
                "long": {"": TensorType(t.dims, dtype="long")}}[shape_returns]

    work = None
    if hooks["work"] != "ok" or case.rng.random() < 0.3:
        def work(ctx: Any) -> Any:
            from attngraph.kinds.base import elementwise_work

            return _value(hooks["work"], elementwise_work(ctx))

    pure: Any = True
    if hooks["pure"] != "ok" or case.rng.random() < 0.3:
        def pure(node: Any) -> Any:
            return _value(hooks["pure"], True)

    kind(name, spec_model, lowering=lowering, role="support", style=case.pick(
        (Style("#e6e6fa", "box"), Style("not a colour", "no-shape"))),
        transparent=case.rng.random() < 0.5, work=work, pure=pure)(shape)
    bad = {h for h, v in hooks.items() if v != "ok"}
    if shape_returns != "type":
        bad.add("shape-returns")
    return KIND_SPEC.format(kind=name), bad


def _place(exc: BaseException) -> str:
    """The innermost attngraph frame an exception passed through (else where it arose)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f"{Path('attngraph')}/" in f.filename.replace("\\", "/") and
              "/fuzz/" not in f.filename]
    if not frames:
        return place_of(exc)
    f = frames[-1]
    path = f.filename[f.filename.rfind("attngraph/"):]
    return f"{path}:{f.lineno} in {f.name}: {type(exc).__name__}"


def _exercise(text: str, case: Case, made_nan: bool) -> None:
    """Validate, compile, run forward and backward, draw and describe ``text``."""
    import attngraph
    from attngraph.analysis.describe import describe
    from fuzz.oracle import _inputs
    from renderers import render

    graph = attngraph.loads_spec(text, "plugged.yaml")
    step = case.pick(("compile", "compile", "render", "describe"), "step")
    if step == "render":
        render(graph, case.pick(("architecture", "unrolled")), case.pick(("json", "mermaid",
                                                                            "dot")))
        return
    if step == "describe":
        describe(graph)
        return
    model = attngraph.compile(graph, seed=0)
    out = model(**_inputs(graph, 5, seed=case.index))
    bad = finite(out)
    if bad and not made_nan:
        fail("nonfinite", "plugin output", f"output {bad} is not finite")
    loss = sum(v.float().mean() for v in out.values() if hasattr(v, "requires_grad")
               and v.requires_grad)
    if hasattr(loss, "backward"):
        loss.backward()


def run(case: Case) -> Outcome:
    """One misbehaving plugin through validate, compile, forward, render, describe."""
    from attngraph.kinds import KINDS, SCORERS

    via_cli = case.rng.random() < 0.15
    with KINDS.scoped(), SCORERS.scoped():
        try:
            if via_cli:
                return _via_cli(case)
            text, bad = (_scorer if case.rng.random() < 0.6 else _kind)(case)
            _exercise(text, case, made_nan=bool(bad & {"forward"}))
        except PluginAbort as exc:
            # the plugin's own BaseException must come out as a located error naming it
            return Outcome("defect", "crash", _place(exc),
                           "the plugin's BaseException passed through")
        except (Defect, Exit):
            raise
        except BaseException as exc:  # noqa: BLE001 - the oracle's
            o = rejected(exc)
            if o.outcome == "defect" and o.cls == "crash":
                return Outcome("defect", "crash", _place(exc), o.message)
            return o
    return Outcome("valid")


#: The case whose ``--plugin`` module is being imported, and its spec file.
_CURRENT: list[tuple[Case, Path]] = []


def register_current() -> None:
    """What a case's ``--plugin`` module calls when imported: register its plugin and
    write the spec that uses it (the command reads the spec after the plugins)."""
    case, spec = _CURRENT[-1]
    text, _ = (_scorer if case.rng.random() < 0.6 else _kind)(case)
    spec.write_text(text, encoding="utf-8")


def _via_cli(case: Case) -> Outcome:
    """The plugin as a module given to ``attngraph --plugin``."""
    mod = f"fzplug_{case.seed}_{case.index}"
    body = case.pick(("register", "register", "register", "raise", "base", "duplicate",
                      "syntax", "nothing"), "module")
    src = {"register": "from fuzz.surface_plugin import register_current\nregister_current()\n",
           "raise": "raise ValueError('the plugin does not import')\n",
           "base": "from fuzz.surface_plugin import PluginAbort\nraise PluginAbort\n",
           "duplicate": "from attngraph.kinds import ScorerInfo, register_scorer\n"
                        "register_scorer(ScorerInfo('dot', 'q·k'))\n",
           "syntax": "def (:\n", "nothing": ""}[body]
    folder = case.state["plugins"]
    path = folder / f"{mod}.py"
    path.write_text(src, encoding="utf-8")
    spec = case.tmp / "spec.yaml"
    spec.write_text(SCORER_SPEC.format(heads=1, fn="dot", query="query: q, "), encoding="utf-8")
    _CURRENT.append((case, spec))
    try:
        cmd = case.pick((["validate"], ["compile"], ["describe", "--format", "json"],
                         ["render", "--format", "json", "-o", str(case.tmp / "d.json")]),
                        "command")
        cli("--plugin", mod, *cmd[:1], str(spec), *cmd[1:])
    finally:
        _CURRENT.pop()
        sys.modules.pop(mod, None)
        path.unlink()
    return Outcome("valid")
