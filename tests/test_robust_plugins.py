"""Every plugin hook is called through one located-error wrapper: whatever a
registered scorer function's or kind's code does wrong (raises any exception, even
SystemExit or a BaseException of its own, returns None or the wrong type, names a
module that does not import) is one attngraph error at the node's YAML line, naming
the function as module.qualname and what it raised or returned, with a hint."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest
from pydantic import Field

import attngraph
from attngraph.errors import AttnGraphError
from attngraph.ir.graph import TensorType
from attngraph.kinds import KINDS, SCORERS, ScorerInfo, kind, register_scorer
from attngraph.spec.models import NodeModel, Ref

SCORER_SPEC = """attngraph: 1
name: t
inputs:
  src: {type: vectors, dim: 8}
nodes:
  x: {kind: items, from: src}
  s: {kind: scorer, fn: FN, query: x, key: x}
  p: {kind: softmax, scores: s}
outputs: {p: p}
"""

KIND_SPEC = """attngraph: 1
name: t
inputs:
  src: {type: vectors, dim: 8}
nodes:
  x: {kind: items, from: src}
  y: {kind: twice, from: x}
outputs: {y: y}
"""


class Boom(BaseException):
    """A BaseException of a plugin's own (not an Exception)."""


def raising(exc: BaseException) -> Callable[..., Any]:
    def hook(*_args: Any, **_kw: Any) -> Any:
        raise exc

    return hook


def returning(value: Any) -> Callable[..., Any]:
    def hook(*_args: Any, **_kw: Any) -> Any:
        return value

    return hook


@pytest.fixture(autouse=True)
def _scoped() -> Iterator[None]:
    """Every registration of a test is removed after it."""
    with KINDS.scoped(), SCORERS.scoped():
        yield


def located(run: Callable[[], Any], line: int, *names: str) -> AttnGraphError:
    """The attngraph error ``run`` raises: at ``line``, naming each of ``names``, with a
    hint; nothing else escapes."""
    with pytest.raises(AttnGraphError) as info:
        run()
    d = info.value.diagnostics[0]
    assert d.loc.line == line, info.value.format()
    for name in names:
        assert name in d.message, (name, d.message)
    assert d.hint, d.message
    return info.value


def compile_text(text: str) -> Any:
    import torch

    model = attngraph.compile(attngraph.loads_spec(text, "t.yaml"), seed=0)
    return model(src=torch.randn(2, 3, 8))


def scorer(name: str, **kw: Any) -> str:
    kw.setdefault("module", "attngraph.lower.rules.scorers:Dot")
    register_scorer(ScorerInfo(name, "f(q, k)", **kw))
    return SCORER_SPEC.replace("FN", name)


@pytest.mark.parametrize(("hook", "field", "said"), [
    (raising(ValueError("no")), "shape", "raised ValueError: no"),
    (raising(SystemExit(4)), "shape", "raised SystemExit: 4"),
    (raising(Boom("bang")), "shape", "raised Boom: bang"),
    (raising(GeneratorExit()), "shape", "raised GeneratorExit"),
    (returning(None), "shape", "returned None, not a dict {port: TensorType}"),
    (returning([1]), "shape", "returned list [1], not a dict"),
    (raising(KeyError("k")), "params", "params(8, 8, 8) raised KeyError"),
    (returning("7"), "params", "returned str '7', not a whole number"),
    (returning(-3), "spec_params", "returned int -3, not a whole number"),
    (raising(ZeroDivisionError("z")), "inner", "inner(8, 8, 8) raised ZeroDivisionError"),
])
def test_a_scorer_hook_fails_at_the_node(hook: Callable[..., Any], field: str,
                                         said: str) -> None:
    """Validation (shape rule, parameter count, the guard's work) locates the scorer's
    line (7) and names the function."""
    text = scorer("bad", **{field: hook})
    located(lambda: attngraph.loads_spec(text, "t.yaml"), 7, "scorer fn 'bad'", said,
            f"{__name__}.{hook.__qualname__}")


@pytest.mark.parametrize(("kw", "said"), [
    ({"module": "no_such_pkg_xyz.mod:Cls"},
     "module names 'no_such_pkg_xyz.mod:Cls', which cannot be loaded: ModuleNotFoundError"),
    ({"module": f"{__name__}:no_such_class"}, "which cannot be loaded: AttributeError"),
    ({"module": None, "make": raising(SystemExit(3))}, "make(8, 8, 8) raised SystemExit: 3"),
    ({"module": None, "make": returning(None)}, "returned None, not an nn.Module"),
])
def test_a_scorer_module_that_cannot_be_made_fails_at_compile(kw: dict[str, Any],
                                                              said: str) -> None:
    """Compiling locates a missing module, or a make that raises or returns another
    thing, at the scorer's line."""
    text = scorer("bad", **kw)
    located(lambda: compile_text(text), 7, "scorer fn 'bad'", said)


class TwiceSpec(NodeModel):
    """``{kind: twice, from: x}``."""

    kind: Literal["twice"]
    from_: Ref = Field(alias="from")


def _twice_shape(ctx: Any) -> dict[str, TensorType]:
    """y = 2x."""
    return {"": ctx.t("from")}


def _twice_lowering(ctx: Any) -> Any:
    from attngraph.lower.runtime.module import NodeModule

    class Twice(NodeModule):
        def forward(self, x: Any, rt: Any) -> Any:
            return 2 * x["from"]

    return Twice()


def twice(**kw: Any) -> None:
    """Register kind ``twice``; ``kw`` replaces its rules."""
    shape = kw.pop("shape", _twice_shape)
    kw.setdefault("lowering", _twice_lowering)
    kind("twice", TwiceSpec, **kw)(shape)


@pytest.mark.parametrize(("rules", "stage", "said"), [
    ({"shape": raising(RuntimeError("r"))}, "validate",
     "the shape rule of kind 'twice' raised RuntimeError: r"),
    ({"shape": returning(None)}, "validate", "the shape rule of kind 'twice' returned None"),
    ({"shape": returning({"": 3})}, "validate", "returned dict {'': 3}, not a dict"),
    ({"shape": raising(Boom())}, "validate", "the shape rule of kind 'twice' raised Boom"),
    ({"work": raising(IndexError("i"))}, "validate",
     "the work rule of kind 'twice' raised IndexError: i"),
    ({"work": returning(5)}, "validate", "the work rule of kind 'twice' returned int 5"),
    ({"magnitude": raising(OverflowError("o"))}, "validate",
     "the magnitude rule of kind 'twice' raised OverflowError: o"),
    ({"lowering": raising(TypeError("t"))}, "compile",
     "the lowering rule of kind 'twice' raised TypeError: t"),
    ({"lowering": raising(SystemExit(4))}, "compile", "raised SystemExit: 4"),
    ({"lowering": returning("module")}, "compile", "returned str 'module', not an nn.Module"),
    ({"lowering": "no_such_pkg_xyz.lower:Twice"}, "compile",
     "names 'no_such_pkg_xyz.lower:Twice', which cannot be loaded"),
])
def test_a_kind_rule_fails_at_the_node(rules: dict[str, Any], stage: str, said: str) -> None:
    """A registered kind's shape, work, magnitude and lowering rules: one error at the
    node's line (7) naming the rule's function."""
    twice(**rules)
    hook = next(iter(rules.values()))
    names = [said] + ([f"{__name__}.{hook.__qualname__}"] if callable(hook) else [])
    run = (lambda: attngraph.loads_spec(KIND_SPEC, "t.yaml")) if stage == "validate" \
        else (lambda: compile_text(KIND_SPEC))
    located(run, 7, *names)


@pytest.mark.parametrize("exc", [ZeroDivisionError("z"), SystemExit(2), Boom("b")])
def test_a_kind_forward_that_raises_fails_at_the_node(exc: BaseException) -> None:
    """Whatever a plugin kind's module raises at run time is located at its node,
    naming its class."""
    def lowering(ctx: Any) -> Any:
        from attngraph.lower.runtime.module import NodeModule

        class Broken(NodeModule):
            def forward(self, x: Any, rt: Any) -> Any:
                raise exc

        return Broken()

    twice(lowering=lowering)
    located(lambda: compile_text(KIND_SPEC), 7, "node 'y' (twice) failed at run time",
            type(exc).__name__, "Broken.forward")


def test_a_rule_set_params_wrongly_is_located() -> None:
    """A shape rule that adds a non-integer to ctx.params is refused at its node."""
    def shape(ctx: Any) -> dict[str, TensorType]:
        ctx.params += 0.5
        return {"": ctx.t("from")}

    twice(shape=shape)
    located(lambda: attngraph.loads_spec(KIND_SPEC, "t.yaml"), 7, "set ctx.params to 0.5")


def test_ctrl_c_inside_a_hook_is_not_swallowed() -> None:
    """KeyboardInterrupt is the user's Ctrl-C: it passes through the wrapper."""
    text = scorer("bad", shape=raising(KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        attngraph.loads_spec(text, "t.yaml")


def test_a_builtin_bug_is_not_blamed_on_the_spec() -> None:
    """An Exception of attngraph's own rules propagates (for tests and the fuzzer)."""
    from attngraph.ir.graph import Node
    from attngraph.kinds.hooks import call_hook

    def rule() -> None:
        raise KeyError(rule.__name__)

    rule.__module__ = "attngraph.kinds.fake"
    with pytest.raises(KeyError):
        call_hook(rule, node=Node("n", None), what="x", error=AttnGraphError)


def test_the_module_of_a_plugin_does_not_stay_imported() -> None:
    """(Housekeeping) this file's registrations are scoped: none outlives a test."""
    assert "twice" not in KINDS and "bad" not in SCORERS
    assert "no_such_pkg_xyz" not in sys.modules


def test_a_registered_implementation_that_does_not_load_fails_at_the_node() -> None:
    """A normaliser, activation or feature map registered by a lazy reference to a
    module that is not there is one error at the node that uses it, naming the
    reference (it is loaded when the node is lowered, by a built-in module)."""
    from attngraph.kinds import (
        ACTIVATIONS,
        NORMALISERS,
        ActivationInfo,
        NormaliserInfo,
        register_activation,
        register_normaliser,
    )

    with NORMALISERS.scoped(), ACTIVATIONS.scoped():
        register_normaliser(NormaliserInfo("gone_norm", "f(s)", impl="no_such_pkg.norms:f"))
        register_activation(ActivationInfo("gone_act", "g(x)", impl="no_such_pkg.acts:g"))
        text = SCORER_SPEC.replace("FN", "dot").replace(
            "{kind: softmax, scores: s}", "{kind: softmax, scores: s, fn: gone_norm}")
        located(lambda: compile_text(text), 8, "node 'p'", "no_such_pkg.norms:f")
        text = KIND_SPEC.replace("y: {kind: twice, from: x}",
                                 "y: {kind: linear, from: x, out: 4, act: gone_act}")
        located(lambda: compile_text(text), 7, "node 'y'", "no_such_pkg.acts:g")


@pytest.mark.parametrize(("value", "said"), [
    (lambda x: {"s": x}, "forward returned a dict with keys ['s'], not a tensor"),
    (lambda x: [x], "forward returned list, not a tensor"),
    (lambda x: None, "forward returned NoneType, not a tensor"),
    (lambda x: {"": x, "extra": x}, "forward returned a dict with keys ['', 'extra']"),
])
def test_a_kind_forward_returning_the_wrong_thing_fails_at_the_node(
        value: Callable[[Any], Any], said: str) -> None:
    """A plugin kind's module must return a tensor (or a dict of exactly its ports):
    anything else is one error at its node, never a KeyError in a later node."""
    def lowering(ctx: Any) -> Any:
        from attngraph.lower.runtime.module import NodeModule

        class Odd(NodeModule):
            def forward(self, x: Any, rt: Any) -> Any:
                return value(x["from"])

        return Odd()

    twice(lowering=lowering)
    located(lambda: compile_text(KIND_SPEC), 7, "node 'y' (twice) failed at run time",
            said, "Odd.forward")
