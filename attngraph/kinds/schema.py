"""The JSON Schema of the spec language, for editors' YAML language servers.

Node models come from the kind registry (:func:`attngraph.kinds.spec_kinds`); the
scorer ``fn`` enumerates :data:`attngraph.kinds.SCORERS`, and ``train.task`` the
registered tasks (:data:`attngraph.train.taskbase.TASKS`), each described.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import ConfigDict, Field, create_model

from attngraph.kinds.base import spec_kinds
from attngraph.kinds.scorers import SCORERS
from attngraph.spec import models as m

__all__ = ["json_schema"]


def json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of a whole spec, nodes as a union tagged on ``kind``.

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
    if train is not None:
        _tasks(train["properties"]["task"])
    return schema


def _tasks(task: dict[str, Any]) -> None:
    """``train.task``: the registered tasks, each with the first line of its doc."""
    from attngraph.train.tasks import TASKS  # registers the built-in tasks (no torch)

    names = TASKS.names()
    task["enum"] = names
    lines = [f"- {n}: {(TASKS[n].__doc__ or '').strip().splitlines()[0]}"
             if (TASKS[n].__doc__ or "").strip() else f"- {n}" for n in names]
    task["description"] = ("The task `attngraph train` runs (data made in-process):\n"
                           + "\n".join(lines))
