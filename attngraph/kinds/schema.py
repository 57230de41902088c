"""The JSON Schema of the spec language, for editors' YAML language servers.

Node models come from the kind registry (:func:`attngraph.kinds.spec_kinds`); the
scorer ``fn`` enumerates :data:`attngraph.kinds.SCORERS`, and ``train.task`` the
training tasks it is given, each described.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Union

from pydantic import ConfigDict, Field, create_model

from attngraph.kinds.base import spec_kinds
from attngraph.kinds.scorers import SCORERS
from attngraph.spec import models as m

__all__ = ["json_schema"]


def json_schema(tasks: Mapping[str, str] | None = None) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a whole spec, nodes as a union tagged on ``kind``.

    ``tasks`` maps the training tasks ``train.task`` may name to a line on each
    (:func:`attngraph.train.tasks.task_lines` gives the registered ones; the kinds do
    not import the training code themselves).

    Examples
    --------
    >>> s = json_schema()
    >>> sorted(s["properties"])[:3]
    ['attngraph', 'blocks', 'dims']
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
                Field(default_factory=dict) if name == "blocks" else f,
            )
            for name, f in m.Spec.model_fields.items()
        },
    )
    schema = spec.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "attngraph spec (language version 1)"
    scorer = schema.get("$defs", {}).get("ScorerSpec")
    if scorer is not None:
        scorer["properties"]["fn"]["enum"] = SCORERS.names()
    train = schema.get("$defs", {}).get("TrainSpec")
    if train is not None and tasks:
        task = train["properties"]["task"]
        task["enum"] = list(tasks)
        task["description"] = ("The task `attngraph train` runs (data made in-process):\n"
                               + "\n".join(f"- {n}: {line}" if line else f"- {n}"
                                            for n, line in tasks.items()))
    return schema
