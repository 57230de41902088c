"""The JSON Schema of the spec language, for editors' YAML language servers.

Node models come from the kind registry (:func:`attngraph.kinds.spec_kinds`); a
field that names a registry entry (a scorer ``fn``, a normaliser, a feature map, an
``act``: :class:`~attngraph.kinds.choices.Registered`) enumerates its registry as it
is when the schema is written, and ``train.task`` the training tasks it is given,
each described.

Every property carries a ``description``: the docstring under its field in the
model (the one source, :func:`field_docs`; :mod:`attngraph.kinds.reference` writes
the field reference of docs/spec-language.md from this schema). A kind's ``kind``
field is described by its model's docstring. Defaults (``default``, those made by
a factory too) and allowed values (``enum``, ``const``) come from the models' types.

The docstrings are read from the models' source here, when a schema is written,
rather than by pydantic at import (``use_attribute_docstrings``): validation, which
never shows them, does not pay for parsing them.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import re
import sys
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Union

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.json_schema import GenerateJsonSchema, NoDefault
from pydantic_core import PydanticUndefined, core_schema

from attngraph.kinds.base import spec_kinds
from attngraph.spec import models as m

__all__ = ["json_schema", "markdown", "field_docs"]


class _Schema(GenerateJsonSchema):
    """Pydantic's generator, with the defaults that factories make (``dims: {}``)."""

    def get_default_value(self, schema: core_schema.WithDefaultSchema) -> Any:
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            return factory()  # type: ignore[call-arg]
        default = schema.get("default", NoDefault)
        return NoDefault if default is PydanticUndefined else default


@functools.cache
def _module_docs(module: str) -> dict[str, dict[str, str]]:
    """For each top-level class of ``module``: the docstring under each of its
    annotated attributes."""
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (KeyError, OSError, TypeError, SyntaxError):
        return {}  # no source (a frozen or generated module): no descriptions
    out: dict[str, dict[str, str]] = {}
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef):
            out[cls.name] = {
                a.target.id: inspect.cleandoc(b.value.value)
                for a, b in itertools.pairwise(cls.body)
                if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name)
                and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant)
                and isinstance(b.value.value, str)
            }
    return out


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """The docstring under each field of ``model``, its own or inherited, by attribute.

    Examples
    --------
    >>> from attngraph.spec.models import RefLong
    >>> field_docs(RefLong)["detach"]
    'Stop the gradient along this one edge (diagrams draw it dashed).'
    """
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if issubclass(cls, BaseModel) and cls is not BaseModel:
            docs.update(_module_docs(cls.__module__).get(cls.__qualname__, {}))
    return docs


def _models(ann: Any) -> set[type[BaseModel]]:
    """The models inside an annotation, and the models inside their fields."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return {ann}.union(*(_models(f.annotation) for f in ann.model_fields.values()))
    return set().union(*(_models(a) for a in typing.get_args(ann)))


def _describe_fields(schema: dict[str, Any], models: tuple[type[BaseModel], ...]) -> None:
    """Each model's field docstrings as its properties' descriptions; each kind's
    docstring as its ``kind`` field's."""
    defs = schema.get("$defs", {})
    reached = set().union(*(_models(x) for x in (m.Spec, m.BlockSpec, *models)))
    named: dict[str, type[BaseModel]] = {x.__name__: x for x in reached}
    named |= {"Block": m.BlockSpec, "": m.Spec}  # the schema's own names for these
    for name, model in named.items():
        d = schema if name == "" else defs.get(name)
        if d is None:
            continue
        docs = field_docs(model)
        for attr, info in model.model_fields.items():
            prop = d["properties"][info.alias or attr]
            if attr in docs:
                prop["description"] = docs[attr]
        if model in models:
            d["properties"]["kind"]["description"] = d.get("description", "")


def _field_models(schema: dict[str, Any]) -> set[str]:
    """The $defs that a property refers to itself (``train``, ``mask``, a long
    reference, a learned query), rather than through names the user chooses."""
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for prop in node.get("properties", {}).values():
                for b in [prop, *prop.get("anyOf", ()), *prop.get("oneOf", ())]:
                    if "$ref" in b:
                        out.add(b["$ref"].rsplit("/", 1)[1])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(schema)
    return out


def markdown(text: str) -> str:
    """A docstring as one markdown paragraph: RST ````code```` becomes ```code```.

    Examples
    --------
    >>> markdown('''Scores ``[N]``,
    ...     one per item.''')
    'Scores `[N]`, one per item.'
    """
    return re.sub(r"``(.+?)``", r"`\1`", " ".join(text.split()))


def _described(node: Any) -> None:
    """Every description under ``node`` as markdown (``markdownDescription`` too, which
    editors render)."""
    if isinstance(node, dict):
        if isinstance(node.get("description"), str):
            node["description"] = node["markdownDescription"] = markdown(node["description"])
        for v in node.values():
            _described(v)
    elif isinstance(node, list):
        for v in node:
            _described(v)


def json_schema(tasks: Mapping[str, str] | None = None) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a whole spec, nodes as a union tagged on ``kind``.

    ``tasks`` maps the training tasks ``train.task`` may name to a line on each
    (:func:`attngraph.train.tasks.lookup.task_lines` gives the registered ones; the kinds do
    not import the training code themselves).

    Examples
    --------
    >>> s = json_schema()
    >>> sorted(s["properties"])[:3]
    ['attngraph', 'blocks', 'dims']
    >>> s["$defs"]["TrainSpec"]["properties"]["optimizer"]["default"]
    'adam'
    >>> s["$defs"]["SoftmaxSpec"]["properties"]["kind"]["description"][:23]
    'Weights: softmax (spars'
    """
    cfg = ConfigDict(extra="forbid")
    models = tuple(spec_kinds().values())
    node_t = Annotated[Union[models], Field(discriminator="kind")]  # type: ignore[valid-type]
    nodes_t = dict[m.Ident, node_t]  # type: ignore[valid-type]
    block = create_model(  # type: ignore[call-overload]
        "Block", __config__=cfg, __doc__=m.BlockSpec.__doc__,
        **{
            name: (nodes_t if name == "nodes" else f.annotation, f)
            for name, f in m.BlockSpec.model_fields.items()
        },
    )
    spec = create_model(  # type: ignore[call-overload]
        "AttnGraphSpec", __config__=cfg, __doc__=m.Spec.__doc__,
        **{
            name: (
                nodes_t if name == "nodes"
                else dict[m.Ident, block] if name == "blocks"  # type: ignore[valid-type]
                else f.annotation,
                f,
            )
            for name, f in m.Spec.model_fields.items()
        },
    )
    schema = spec.model_json_schema(by_alias=True, schema_generator=_Schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "attngraph spec (language version 1)"
    defs = schema.get("$defs", {})
    _describe_fields(schema, models)
    # An editor's hover over such a field shows the first description it meets,
    # which is the model's, under the field's own: the field's says it in place.
    for name in _field_models(schema):
        defs[name].pop("description", None)
        defs[name].pop("title", None)
    _described(schema)
    _tasks(defs.get("TrainSpec"), tasks)
    return schema


def _tasks(train: dict[str, Any] | None, tasks: Mapping[str, str] | None) -> None:
    """List the training ``tasks`` under ``train.task`` (an enum, one task a line)."""
    if train is None or not tasks:
        return
    task = train["properties"]["task"]
    task["enum"] = list(tasks)
    # a list, one task a line: kept as lines (markdown renders them as a list)
    task["description"] = task["markdownDescription"] = (
        task["description"] + "\n\n"
        + "\n".join(f"- {n}: {markdown(line)}" if line else f"- {n}"
                    for n, line in tasks.items()))
