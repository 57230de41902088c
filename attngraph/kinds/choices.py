"""Open choices: spec fields whose value names an entry of a registry.

A scorer's ``fn``, a softmax's normaliser, a feature map's φ and a layer's ``act``
are each a name in a registry that a package may extend (:data:`SCORERS
<attngraph.kinds.scorers.SCORERS>`, :data:`NORMALISERS
<attngraph.kinds.normalisers.NORMALISERS>`, :data:`FEATURE_MAPS
<attngraph.kinds.activations.FEATURE_MAPS>`, :data:`ACTIVATIONS
<attngraph.kinds.activations.ACTIVATIONS>`), never a ``Literal``. Such a field is
annotated ``Annotated[Ident, Registered(REGISTRY, "noun")]``, and that one mark
does three things:

- validation checks the name against the registry, with a "did you mean";
- the JSON Schema lists the registry's names as the field's ``enum`` when it is
  written (so a name registered later is offered too);
- passes, analyses and renderers get the entry, with its traits, through
  :func:`named`, whatever the kind that holds the field: they never compare the
  name itself with a built-in one.

Examples
--------
>>> from attngraph.kinds.normalisers import NORMALISERS
>>> from attngraph.kinds.attention import SoftmaxSpec
>>> spec = SoftmaxSpec(kind="softmax", scores="s", fn="sparsemax")
>>> named(spec, NORMALISERS).sparse
True
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import CoreSchema, core_schema

from attngraph.errors import AttnGraphError, LoweringError, did_you_mean
from attngraph.registry import Registry, resolve

__all__ = ["Registered", "named", "marked_fields", "load"]

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Registered:
    """The mark of a field whose value is a name in ``registry`` (``noun`` names an
    entry in messages, with its article: ``"a scorer function"``, ``"an activation"``)."""

    registry: Registry[Any]
    noun: str

    def check(self, value: str) -> str:
        """The name, if registered; a ``ValueError`` with a did-you-mean otherwise."""
        if value not in self.registry:
            msg = f"'{value}' is not {self.noun}; {did_you_mean(value, self.registry)}"
            raise ValueError(msg)
        return value

    def __get_pydantic_core_schema__(self, source: Any,
                                     handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema,
                                     handler: GetJsonSchemaHandler) -> dict[str, Any]:
        out = dict(handler(schema))
        out["enum"] = self.registry.names()  # read when the schema is written
        return out


@functools.cache
def marked_fields(model: type[BaseModel]) -> tuple[tuple[str, Registered], ...]:
    """The fields of ``model`` that name a registry entry: ``(attribute, mark)`` pairs."""
    out = []
    for attr, info in model.model_fields.items():
        mark = next((x for x in info.metadata if isinstance(x, Registered)), None)
        if mark is not None:
            out.append((attr, mark))
    return tuple(out)


def named(spec: Any, registry: Registry[T]) -> T | None:
    """The entry of ``registry`` that a field of ``spec`` names, or None (the spec has
    no such field, or none: an input's spec, a kind that makes no such choice)."""
    if not isinstance(spec, BaseModel):
        return None
    for attr, mark in marked_fields(type(spec)):
        if mark.registry is registry:
            value = getattr(spec, attr)
            return registry.get(value) if isinstance(value, str) else None
    return None


def load(impl: str | Callable[..., Any]) -> Callable[..., Any]:
    """An implementation: a callable, or what a lazy ``"module:attribute"`` names.

    A plugin's reference that does not load (a missing module or attribute, an import
    that raises, whatever it raises) is one :class:`LoweringError` naming it, which
    the lowering places at the node that uses it; attngraph's own references are its
    own bugs when they fail, and propagate."""
    if not isinstance(impl, str):
        return impl
    if impl.startswith("attngraph."):
        return resolve(impl)  # type: ignore[no-any-return]
    try:
        return resolve(impl)  # type: ignore[no-any-return]
    except (AttnGraphError, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - importing a plugin's module runs its code
        msg = (f"the implementation {impl!r} cannot be loaded: {type(exc).__name__}"
               + (f": {exc}" if str(exc) else ""))
        hint = ("a registered normaliser, activation or feature map names "
                "'package.module:attribute'; install that package where attngraph runs "
                "or fix the name where it is registered")
        raise LoweringError(msg, None, hint) from exc
