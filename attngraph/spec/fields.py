"""Which fields of a spec model are sizes, references and block names, derived once.

Every table that used to be written by hand (in the builder, the validator, the
IR dump, ``diff``) is read from the models' annotations instead: a field whose
annotation carries :data:`~attngraph.spec.models.SIZE`, :data:`~attngraph.spec.models.REF`
or :data:`~attngraph.spec.models.BLOCK` (directly, or inside ``list``, ``dict``,
``Optional`` and unions) is a size, a reference or a block name. Nested models
(a softmax's ``mask``, a loop's ``carry`` entries) have tables of their own.

Examples
--------
>>> from attngraph.spec.models import BlockSpec
>>> fields_of(BlockSpec).refs
('output', 'outputs')
"""

from __future__ import annotations

import typing
from dataclasses import dataclass

from pydantic import BaseModel

from attngraph.spec.models import BLOCK, FORMULA, REF, SIZE

__all__ = ["Fields", "fields_of", "nested_models"]


def _marks(annotation: object, metadata: tuple[object, ...] = ()) -> set[object]:
    """Every marker inside an annotation (through Annotated, unions and containers)."""
    marks = (SIZE, REF, BLOCK, FORMULA)
    found: set[object] = {m for m in metadata if m in marks}
    if typing.get_origin(annotation) is typing.Annotated:
        found |= {m for m in getattr(annotation, "__metadata__", ()) if m in marks}
    for arg in typing.get_args(annotation):
        found |= _marks(arg)
    return found


def _is_mapping(annotation: object) -> bool:
    """True when the annotation is a ``dict`` (possibly Optional or Annotated)."""
    if typing.get_origin(annotation) is dict:
        return True
    return any(_is_mapping(a) for a in typing.get_args(annotation)
               if typing.get_origin(annotation) is not dict)


def _models(annotation: object) -> set[type[BaseModel]]:
    """Spec models reachable inside an annotation (a nested ``mask``, ``carry`` values)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    out: set[type[BaseModel]] = set()
    for arg in typing.get_args(annotation):
        out |= _models(arg)
    return out


@dataclass(frozen=True)
class Fields:
    """The field table of one model: names as written in YAML (``from``, not ``from_``).

    ``attrs`` maps each YAML name to the model attribute; ``nested`` maps a field
    to the spec models its values may be (their own tables apply below it);
    ``mappings`` are the fields that hold a mapping (``carry: {h: ...}``).
    """

    sizes: frozenset[str]
    refs: tuple[str, ...]
    blocks: frozenset[str]
    attrs: dict[str, str]
    nested: dict[str, tuple[type[BaseModel], ...]]
    mappings: frozenset[str]
    #: formula fields: the node ids a formula names are references too
    formulas: frozenset[str] = frozenset()

    def attr(self, name: str) -> str:
        """The model attribute of a YAML field name."""
        return self.attrs.get(name, name)


_TABLES: dict[type[BaseModel], Fields] = {}


def fields_of(model: type[BaseModel]) -> Fields:
    """The :class:`Fields` of ``model``, computed once per model."""
    table = _TABLES.get(model)
    if table is None:
        table = _TABLES[model] = _table(model)
    return table


def _table(model: type[BaseModel]) -> Fields:
    sizes: set[str] = set()
    refs: list[str] = []
    blocks: set[str] = set()
    attrs: dict[str, str] = {}
    nested: dict[str, tuple[type[BaseModel], ...]] = {}
    mappings: set[str] = set()
    formulas: set[str] = set()
    for attr, info in model.model_fields.items():
        name = info.alias or attr
        attrs[name] = attr
        marks = _marks(info.annotation, tuple(info.metadata))
        if SIZE in marks:
            sizes.add(name)
        if REF in marks:
            refs.append(name)
        if BLOCK in marks:
            blocks.add(name)
        if FORMULA in marks:
            formulas.add(name)
        if _is_mapping(info.annotation):
            mappings.add(name)
        inner = _models(info.annotation) - {m for m in _models(info.annotation)
                                            if m.__name__ in ("RefLong", "LearnedQuery")}
        if inner:
            nested[name] = tuple(sorted(inner, key=lambda m: m.__name__))
    return Fields(frozenset(sizes), tuple(refs), frozenset(blocks), attrs, nested,
                  frozenset(mappings), frozenset(formulas))


def nested_models(model: type[BaseModel]) -> set[type[BaseModel]]:
    """``model`` and every model nested in it (for tables over a whole spec)."""
    out = {model}
    for inner in fields_of(model).nested.values():
        for m in inner:
            out |= nested_models(m)
    return out
