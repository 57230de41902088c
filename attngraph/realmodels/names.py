"""The name map of a real-model spec: which tensor of a checkpoint is which parameter.

A name map lives beside its spec (``specs/real/gpt2.yaml`` and
``specs/real/gpt2.names.yaml``) and says, as plain data:

- ``model_types``: the ``model_type`` values of a ``transformers`` ``config.json``
  it reads (``gpt2``);
- ``dims``: each dims name of the spec as a formula over the configuration's keys
  (``d: n_embd``, ``ff: n_inner or 4 * n_embd``, ``classes: len(id2label)``);
- ``require``: configuration keys and the values the spec computes the same for
  (``activation_function: [gelu_new]``): any other is refused rather than imported
  into a model that computes something else;
- ``prefixes``: leading parts of tensor names dropped where present
  (``transformer.``: a ``GPT2LMHeadModel``'s names read like a ``GPT2Model``'s);
- ``layers``: the dims name of the layer count, which ``{i}`` in a name runs over; or
  a mapping from the start of checkpoint names to such a dims name, for a model of
  several stacks (T5: ``{encoder.: layers, decoder.: dlayers}``; the longest start a
  name has decides);
- ``tensors``: checkpoint name -> parameter name, or -> a mapping with ``to`` (one
  name, or a list the tensor is split into along ``split``), ``transpose``
  (a ``Conv1D``'s ``[in, out]`` weight as a linear's ``[out, in]``), ``heads`` (rows
  of a rotary projection from the halves layout ``rotate_half`` uses to adjacent
  pairs, per head of that many) and ``fallback`` (the tensor to read when this one is
  absent: a tied output layer saved once);
- ``ignore``: checkpoint names that are not parameters (a causal mask buffer).

The file is read through :mod:`attngraph.fileio` and the YAML loader with
positions, and checked by the frozen pydantic models below: an unknown key or a
value of the wrong kind is one located error.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from attngraph.errors import SourceLoc, SpecError
from attngraph.source import load

__all__ = ["NAMES_SUFFIX", "NameMap", "TensorRule", "config_dims", "load_names", "names_path"]

#: The name map of ``X.yaml`` is ``X.names.yaml``.
NAMES_SUFFIX = ".names.yaml"

_Name = Annotated[str, Field(min_length=1, max_length=300, pattern=r"^[A-Za-z0-9_.{}]+$")]


class TensorRule(BaseModel):
    """How one checkpoint tensor becomes one or several parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    to: _Name | list[_Name]
    """The parameter, or the parameters the tensor is split into in equal parts."""
    split: Annotated[int, Field(ge=0, le=3)] = 0
    """With a list ``to``: the axis it is split along (after ``transpose``)."""
    transpose: bool = False
    """Swap the two axes of a matrix first (``Conv1D``'s ``[in, out]``)."""
    heads: str | None = None
    """A dims name: rows of a rotary projection, per head of that many, from the halves
    layout (features f and f + d/2 rotate together) to adjacent pairs (2f, 2f + 1)."""
    fallback: _Name | None = None
    """Read this tensor when the checkpoint lacks the rule's own (a tied output layer)."""


class NameMap(BaseModel):
    """A name map file (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    attngraph_names: Literal[1]
    """Version of the name map format."""
    model_types: list[str] = Field(min_length=1)
    dims: dict[str, str]
    require: dict[str, list[Any]] = Field(default_factory=dict)
    prefixes: list[str] = Field(default_factory=list)
    layers: str | dict[str, str]
    tensors: dict[_Name, _Name | TensorRule]
    ignore: list[_Name] = Field(default_factory=list)

    @field_validator("dims")
    @classmethod
    def _formulas(cls, dims: dict[str, str]) -> dict[str, str]:
        for name, text in dims.items():
            problem = _formula_problem(text)
            if problem:
                msg = f"dims '{name}': {problem} in {text!r}"
                raise ValueError(msg)
        return dims

    @model_validator(mode="after")
    def _stacks(self) -> NameMap:
        for template in self.tensors:
            if "{i}" in template and self.layers_of(template) is None:
                msg = (f"tensors: '{template}' runs {{i}} over the layers, but no start of "
                       f"layers: ({', '.join(self.layers)}) begins it")
                raise ValueError(msg)
        return self

    def layers_of(self, template: str) -> str | None:
        """The dims name of the layer count that ``{i}`` in ``template`` runs over."""
        if isinstance(self.layers, str):
            return self.layers
        starts = [p for p in self.layers if template.startswith(p)]
        return self.layers[max(starts, key=len)] if starts else None

    def rule(self, source: str) -> TensorRule:
        """The rule of checkpoint name ``source`` (a plain target as a rule)."""
        r = self.tensors[source]
        return TensorRule(to=r) if isinstance(r, str) else r


def names_path(spec: str | Path) -> Path:
    """The name map beside ``spec``: ``gpt2.yaml`` -> ``gpt2.names.yaml``."""
    p = Path(spec)
    return p.with_name(p.name.removesuffix(".yaml") + NAMES_SUFFIX)


def load_names(path: str | Path) -> NameMap:
    """Read and check the name map at ``path``.

    Raises
    ------
    SpecError
        Located in the file: unreadable, not YAML, an unknown key, a bad value.
    """
    doc = load(path)
    try:
        return NameMap.model_validate(doc.data)
    except ValidationError as exc:
        err = exc.errors()[0]
        at = tuple(p for p in err["loc"] if isinstance(p, (str, int)))
        where = ".".join(str(p) for p in at)
        msg = f"name map: {where or 'the file'}: {err['msg']}"
        raise SpecError(msg, doc.loc(at), "see docs/real-models.md for the fields of a "
                        "name map") from None


_OPS = (ast.Expression, ast.BinOp, ast.BoolOp, ast.Name, ast.Constant, ast.Load,
        ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Or, ast.Call)


def _formula_problem(text: str) -> str | None:
    """What in a dims formula is not a config key, an integer, + - * // or ``or``."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        return "not a formula"
    for n in ast.walk(tree):
        if not isinstance(n, _OPS):
            return (f"'{type(n).__name__}' is not allowed (config keys, integers, + - * //, "
                    "or, len(key))")
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id == "len"
                                            and len(n.args) == 1 and not n.keywords
                                            and isinstance(n.args[0], ast.Name)):
            return "the one call allowed is len(key)"
        if isinstance(n, ast.Constant) and (isinstance(n.value, bool)
                                            or not isinstance(n.value, int)):
            return "only integer constants"
    return None


def _value(node: ast.AST, config: dict[str, Any]) -> Any:
    if isinstance(node, ast.Expression):
        return _value(node.body, config)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return config.get(node.id)
    if isinstance(node, ast.Call):  # len(key): the number of entries (labels of id2label)
        got = _value(node.args[0], config)
        return len(got) if isinstance(got, (list, dict)) else None
    if isinstance(node, ast.BoolOp):  # `a or b`: b where a is absent (None)
        for v in node.values:
            got = _value(v, config)
            if got is not None:
                return got
        return None
    assert isinstance(node, ast.BinOp)  # checked by _formula_problem
    a, b = _value(node.left, config), _value(node.right, config)
    if a is None or b is None:
        return None
    ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
           ast.FloorDiv: int.__floordiv__}
    return ops[type(node.op)](int(a), int(b))


def config_dims(names: NameMap, config: dict[str, Any], where: str) -> dict[str, int]:
    """The spec's dims for a model of ``config`` (its ``config.json``).

    Raises
    ------
    SpecError
        At ``where`` (the configuration file): a key a formula reads is missing,
        or a required setting has another value.
    """
    for key, allowed in names.require.items():
        got = config.get(key)
        if got not in allowed:
            shown = ", ".join(repr(a) for a in allowed)
            msg = (f"the model's {key} is {got!r}; this spec computes the model for "
                   f"{shown} only")
            raise SpecError(msg, SourceLoc(where), "write a spec for that variant, or convert "
                            "the model to a supported setting")
    dims = {}
    for name, text in names.dims.items():
        got = _value(ast.parse(text, mode="eval"), config)
        if not isinstance(got, int) or isinstance(got, bool) or got < 1:
            keys = sorted({n.id for n in ast.walk(ast.parse(text, mode="eval"))
                           if isinstance(n, ast.Name) and n.id != "len"})
            msg = (f"dims '{name}' = {text} needs the configuration's {', '.join(keys)}, "
                   f"which give {got!r}")
            raise SpecError(msg, SourceLoc(where), "is this the configuration of a model "
                            f"of type {' or '.join(names.model_types)}?")
        dims[name] = got
    return dims


def pattern(name: str) -> re.Pattern[str]:
    """A checkpoint name with ``{i}`` as a regular expression (``i`` a layer index)."""
    return re.compile(re.escape(name).replace(r"\{i\}", r"(?P<i>\d+)") + "$")
