"""``validate(doc, kinds) -> Spec``: check a document against the schema, with positions.

Every problem found becomes one :class:`~attngraph.errors.Diagnostic` located at
the offending key or value; all of them are raised together as one
:class:`~attngraph.errors.SpecError`. Nodes are validated one at a time by the
model of their own ``kind`` (``kinds`` maps a kind's name to its model; the
pipeline passes :func:`attngraph.kinds.spec_kinds`), so unknown kinds and fields
get a "did you mean".
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from attngraph.errors import Diagnostic, SpecError, did_you_mean
from attngraph.source import Document, PathKey
from attngraph.spec import models as m
from attngraph.spec.diagnose import KindModels, diagnose, part_name

__all__ = ["validate"]

def _validate_model(
    doc: Document, base: PathKey, model: type[BaseModel], data: Any, diags: list[Diagnostic],
    kinds: KindModels,
) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        diags.extend(diagnose(doc, base, data, exc.errors(include_url=False), kinds))
        return None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin kind's model runs its own code
        # pydantic turns a validator's ValueError into a ValidationError; anything else a
        # plugin's model raises is located at its node, naming the model
        where = f"{model.__module__}.{model.__qualname__}"
        if isinstance(exc, Exception) and where.startswith("attngraph."):
            raise
        text = type(exc).__name__ + (f": {exc}" if str(exc) else "")
        diags.append(Diagnostic(
            doc.loc(base), f"{part_name(base)}: its model {model.__name__} raised {text} "
            f"(in {where})", f"the error is in {where}, a plugin's code: a validator refuses "
            "a value by raising ValueError with a message"))
        return None


def _validate_nodes(
    doc: Document, base: PathKey, nodes: Any, diags: list[Diagnostic], kinds: KindModels,
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(nodes, dict):
        return out
    for nid, raw in nodes.items():
        path = (*base, nid)
        if not isinstance(raw, dict):
            diags.append(Diagnostic(
                doc.loc(path), f"{part_name(path)}: a node is a mapping with a 'kind:'",
                "write e.g. {kind: softmax, scores: score}",
            ))
            continue
        kind = raw.get("kind")
        if kind is None:
            diags.append(Diagnostic(
                doc.loc(path), f"{part_name(path)}: missing field 'kind'",
                "known kinds: " + ", ".join(sorted(kinds)),
            ))
            continue
        model = kinds.get(kind) if isinstance(kind, str) else None
        if model is None:
            diags.append(Diagnostic(
                doc.loc((*path, "kind")), f"{part_name(path)}: unknown kind {kind!r}",
                did_you_mean(str(kind), kinds),
            ))
            continue
        node = _validate_model(doc, path, model, raw, diags, kinds)
        if node is not None:
            out[nid] = node
    return out


def validate(doc: Document, kinds: KindModels) -> m.Spec:
    """Check ``doc`` against the spec language's schema.

    Parameters
    ----------
    doc : Document
        A document from :func:`attngraph.source.load`.
    kinds : mapping of str to model
        The model of each node kind a spec may use (:func:`attngraph.kinds.spec_kinds`).

    Returns
    -------
    Spec
        The typed spec; node sizes may still be dims names (resolved by ``build``).

    Raises
    ------
    SpecError
        With one diagnostic per problem found.
    """
    data = doc.data
    if not isinstance(data, dict):
        msg = "a spec is a mapping with 'attngraph: 1', 'name', 'inputs', 'nodes', 'outputs'"
        raise SpecError(
            msg,
            doc.loc(()),
            f"found {type(data).__name__} at the top; start the file with 'attngraph: 1' "
            "and 'name: ...' on their own lines",
        )
    diags: list[Diagnostic] = []
    if "attngraph" in data and data["attngraph"] != 1:
        diags.append(Diagnostic(
            doc.loc(("attngraph",)),
            f"language version {data['attngraph']!r} is not supported",
            "this attngraph reads 'attngraph: 1'",
        ))
    _auto_dims(doc, data.get("dims"), diags)
    if "attngraph" not in data or data["attngraph"] == 1:
        spec = _validate_model(doc, (), m.Spec, _top_level(data), diags, kinds)
    else:
        spec = None
    nodes = _validate_nodes(doc, ("nodes",), data.get("nodes"), diags, kinds)
    blocks = _validate_blocks(doc, data.get("blocks", {}), spec, diags, kinds)
    if diags:
        raise SpecError(diags[0].message, diagnostics=_dedupe(diags))
    assert spec is not None  # no diagnostics means the top-level model validated
    return spec.model_copy(update={"nodes": nodes, "blocks": blocks})


def _top_level(data: dict[str, Any]) -> dict[str, Any]:
    """What the top-level model checks: the document with each node's body left out
    (of the top level's nodes and of each block's)."""
    top = {k: v for k, v in data.items() if k not in ("nodes", "blocks")}
    if "nodes" in data:
        top["nodes"] = _ids_only(data["nodes"])
    blocks_raw = data.get("blocks", {})
    if isinstance(blocks_raw, dict):
        # node ids are checked by the models' keys (an id becomes a module name and an
        # attribute name, so one rule for every id, in blocks as at the top level); the
        # nodes themselves are validated one at a time
        top["blocks"] = {
            b: ({**v, "nodes": _ids_only(v["nodes"])} if isinstance(v, dict) and "nodes" in v
                else v) for b, v in blocks_raw.items()
        }
    elif "blocks" in data:
        top["blocks"] = blocks_raw
    return top


def _validate_blocks(doc: Document, blocks_raw: Any, spec: m.Spec | None,
                     diags: list[Diagnostic], kinds: KindModels) -> dict[str, m.BlockSpec]:
    """Each block's nodes, validated one at a time, in the block the top-level model
    made (none when it did not validate)."""
    blocks: dict[str, m.BlockSpec] = {}
    if not isinstance(blocks_raw, dict):
        return blocks
    for bname, braw in blocks_raw.items():
        bnodes = _validate_nodes(
            doc, ("blocks", bname, "nodes"),
            braw.get("nodes") if isinstance(braw, dict) else None, diags, kinds,
        )
        if spec is not None:
            blocks[bname] = spec.blocks[bname].model_copy(update={"nodes": bnodes})
    return blocks


def _auto_dims(doc: Document, dims: Any, diags: list[Diagnostic]) -> None:
    """A dims entry written ``auto``: the training data decides it, so a spec read
    without data cannot have it (``attngraph.train.data.autosize`` reads it with data)."""
    if not isinstance(dims, dict):
        return
    for name, value in dims.items():
        if value == m.AUTO:
            diags.append(Diagnostic(
                doc.loc(("dims", name)),
                f"dims '{name}' is auto: the training data decides it, and no data is read "
                "here",
                f"train with data (attngraph train SPEC --data FILE, or attngraph.fit(SPEC, "
                f"DATA)), which states the size it chose; to check, draw or compile the spec "
                f"alone, write a number for {name}",
            ))


def _ids_only(nodes: Any) -> Any:
    """``nodes`` with each node's body left out: the model checks the ids alone."""
    return {k: {} for k in nodes} if isinstance(nodes, dict) else nodes


def _dedupe(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple[str, str]] = set()
    out = []
    for d in sorted(diags, key=lambda d: (d.loc.line, d.loc.col)):
        k = (str(d.loc), d.message)
        if k not in seen:
            seen.add(k)
            out.append(d)
    return out
