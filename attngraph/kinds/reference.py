"""The field reference of docs/spec-language.md, written from the JSON Schema.

One table per model: the document, an input, a block, ``train:``, every node kind
(in registry order), then the mappings nested in fields (a softmax's ``mask``, a
loop's ``carry`` and ``feed`` entries, the long reference, the learned query). A row
gives the field as written in YAML; its type, read from the model's annotation
(sizes, references and block names named as such); its default, allowed values
(``enum``, ``const``) and numeric range, read from the schema; and its description,
the schema's, which is the docstring under the field. So editors (hover) and the
reference say the same thing, from one source. ``attngraph docs`` writes the
tables between the two marker comments of the page (:func:`with_reference`).
Names that registries hold (scorer functions, normalisers, feature maps,
activations, training tasks) are not listed, so that registering one does not put
this reference out of date (the page's tables of those registries are written from
them, :mod:`attngraph.kinds.tables`).

Examples
--------
>>> from attngraph.kinds.schema import json_schema
>>> print(field_reference(json_schema()).splitlines()[4])
| `attngraph` | integer | required | `1` | The spec language version. |
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from pydantic import BaseModel

from attngraph.kinds.attention import MaskSpec
from attngraph.kinds.base import spec_kinds
from attngraph.kinds.schema import markdown
from attngraph.kinds.structure import CarrySpec, FeedSpec
from attngraph.spec import models as m

__all__ = ["START", "END", "field_reference", "with_reference"]

#: The marker comments around the generated tables in docs/spec-language.md.
START = ("<!-- field-reference:start (written by `attngraph docs` from the models' field "
         "docstrings: edit those, not this) -->")
END = "<!-- field-reference:end -->"

#: How a nested model is named in a type, and its table's heading.
_NAMES: dict[type[BaseModel], tuple[str, str]] = {
    m.InputSpec: ("input", "An input (an entry of `inputs:`)"),
    m.BlockSpec: ("block", "A block (an entry of `blocks:`)"),
    m.TrainSpec: ("train section", "Training defaults (`train:`)"),
    MaskSpec: ("mask", "A softmax's `mask:`"),
    CarrySpec: ("carry", "A loop's `carry:` entry"),
    FeedSpec: ("feed", "A loop's `feed:` entry"),
    m.RefLong: ("long reference", "The long reference form (`{ref: ..., detach: ...}`)"),
    m.LearnedQuery: ("learned query", "A learned query (`query: {learned: ...}`)"),
}
_BASIC = {int: "integer", float: "number", bool: "bool", str: "text", Any: "node"}


def _type(ann: Any, meta: tuple[Any, ...] = ()) -> str:
    """A field's type in words, from its annotation (and ``meta``, the metadata pydantic
    took out of a field's outer ``Annotated``)."""
    origin = typing.get_origin(ann)
    if origin is typing.Annotated or meta:
        meta = (*meta, *getattr(ann, "__metadata__", ()))
        base = typing.get_args(ann)[0] if origin is typing.Annotated else ann
        for mark, word in ((m.SIZE, "size"), (m.REF, "reference"), (m.BLOCK, "block name")):
            if mark in meta:
                return word
        patterns = [getattr(x, "pattern", None) for x in meta]
        if m.IDENT in patterns or m.BODY_ID in patterns:
            return "name"
        return "symbol" if any(patterns) else _type(base)
    if origin in (Union, types.UnionType):
        words = [_type(a) for a in typing.get_args(ann) if a is not type(None)]
        return " or ".join(dict.fromkeys(words))
    if origin is Literal:
        values = typing.get_args(ann)
        return "integer" if all(isinstance(v, int) for v in values) else "text"
    if origin is list:
        return f"list of {_type(typing.get_args(ann)[0])}"
    if origin is tuple:
        return "[" + ", ".join(_type(a) for a in typing.get_args(ann)) + "]"
    if origin is dict:
        key, value = typing.get_args(ann)
        return f"mapping {_type(key)} → {_type(value)}"
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return _NAMES[ann][0]
    return _BASIC[ann]


def _num(x: float) -> str:
    return f"{x:g}"


def _branches(prop: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The property and the branches of its ``anyOf``/``oneOf``."""
    return [prop, *prop.get("anyOf", ()), *prop.get("oneOf", ())]


def _literal(ann: Any) -> bool:
    """Whether an annotation holds a ``Literal`` (values the language fixes)."""
    return typing.get_origin(ann) is Literal or any(_literal(a) for a in typing.get_args(ann))


def _allowed(prop: Mapping[str, Any], fixed: bool) -> str:
    """The values a property allows: its enumerations, then its numeric ranges. An
    enumeration the language does not fix (not ``fixed``) comes from a registry that
    packages extend: the page names no list that would go out of date."""
    out: list[str] = []
    for b in _branches(prop):
        values = b.get("enum", [b["const"]] if "const" in b else [])
        if values and not fixed:
            out.append("a registered name (`attngraph schema` lists them)")
            continue
        out += [f"`{json.dumps(v).strip(chr(34))}`" for v in values]
    for b in _branches(prop):
        lo = "[" + _num(b["minimum"]) if "minimum" in b else (
            "(" + _num(b["exclusiveMinimum"]) if "exclusiveMinimum" in b else None)
        hi = _num(b["maximum"]) + "]" if "maximum" in b else (
            _num(b["exclusiveMaximum"]) + ")" if "exclusiveMaximum" in b else None)
        if lo or hi:
            out.append(f"{lo or '(-∞'}, {hi or '∞)'}")
    return ", ".join(out)


def _default(prop: Mapping[str, Any], required: bool) -> str:
    if "default" not in prop:
        return "required" if required else ""
    d = prop["default"]
    return "none" if d is None else f"`{json.dumps(d).strip(chr(34))}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(model: type[BaseModel], schema: Mapping[str, Any]) -> list[str]:
    props, required = schema["properties"], set(schema.get("required", ()))
    rows = ["| field | type | default | allowed | description |", "|---|---|---|---|---|"]
    for attr, info in model.model_fields.items():
        name = info.alias or attr
        prop = props[name]
        text = prop.get("description", "").split("\n\n")[0]
        rows.append(f"| `{name}` | {_cell(_type(info.annotation, tuple(info.metadata)))} | "
                    f"{_default(prop, name in required)} | "
                    f"{_cell(_allowed(prop, _literal(info.annotation)))} | "
                    f"{_cell(text)} |")
    return rows


def field_reference(schema: Mapping[str, Any]) -> str:
    """The reference tables (markdown) of every model in ``schema``, which is
    :func:`attngraph.kinds.schema.json_schema`'s output."""
    defs = schema["$defs"]
    parts: list[tuple[str, type[BaseModel], Mapping[str, Any]]] = [
        ("The document", m.Spec, schema),
        (_NAMES[m.InputSpec][1], m.InputSpec, defs["InputSpec"]),
        (_NAMES[m.BlockSpec][1], m.BlockSpec, defs["Block"]),
        (_NAMES[m.TrainSpec][1], m.TrainSpec, defs["TrainSpec"]),
    ]
    parts += [(f"Kind `{name}`", model, defs[model.__name__])
              for name, model in spec_kinds().items()]
    parts += [(_NAMES[x][1], x, defs[x.__name__])
              for x in (MaskSpec, CarrySpec, FeedSpec, m.RefLong, m.LearnedQuery)]
    lines: list[str] = []
    for head, model, sub in parts:
        lines += [f"### {head}", ""]
        if model is not m.Spec:
            lines += [_cell(markdown(model.__doc__ or "")), ""]
        lines += [*_table(model, sub), ""]
    return "\n".join(lines)


def with_reference(text: str, reference: str, start: str = START, end: str = END) -> str:
    """``text`` (a page) with ``reference`` between its marker lines ``start`` and ``end``
    (default :data:`START` and :data:`END`); ``ValueError`` if they are missing or out
    of order.

    Examples
    --------
    >>> page = "\\n".join(["# Prose", START, "old", END, "more prose"])
    >>> with_reference(page, "new").splitlines()[2:5]
    ['', 'new', '']
    """
    i, j = text.find(start), text.find(end)
    if i < 0 or j < i:
        msg = "the page has no field reference markers"
        raise ValueError(msg)
    return text[: i + len(start)] + "\n\n" + reference.rstrip() + "\n\n" + text[j:]
