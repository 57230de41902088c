"""Pydantic's validation errors as located diagnostics, each with a hint.

:func:`diagnose` turns the errors one model raised (at a path of the document)
into :class:`~attngraph.errors.Diagnostic` s: an error is mapped back onto the
document's path (union-member tags skipped), errors of one value are said once
(what is accepted, with did-you-mean for unknown fields and kinds), and every
diagnostic carries what to write instead. :mod:`attngraph.spec.validate` walks
the document and calls it for each model it validates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from attngraph.errors import Diagnostic, did_you_mean
from attngraph.source import Document, PathKey
from attngraph.spec import models as m
from attngraph.spec.fields import fields_of, nested_models

__all__ = ["KindModels", "diagnose", "part_name", "ID_RULE", "BODY_ID_RULE"]

#: Node models by kind name.
KindModels = Mapping[str, type[BaseModel]]

_WHAT = {
    "from": "a reference (node, node.port, or {ref: node, detach: true})",
    "query": "a reference, or {learned: size} for a learned query vector",
    "key": "a reference (node or node.port)",
    "scores": "a reference to a scorer",
    "weights": "a reference to weights (a softmax or a policy)",
    "values": "a reference to values",
    "adjacency": "a reference to a graph input",
    "steps": "a positive integer, or a reference whose length gives the steps",
    "baseline": "true, false, or a reference to the baseline's input",
    "beta": "a positive number, or 'learned'",
}


def part_name(path: PathKey) -> str:
    """How a message names the part of the spec at ``path``."""
    if len(path) >= 2 and path[0] == "nodes":
        return f"node '{path[1]}'"
    if len(path) >= 4 and path[0] == "blocks" and path[2] == "nodes":
        return f"block '{path[1]}', node '{path[3]}'"
    if len(path) >= 2 and path[0] == "blocks":
        return f"block '{path[1]}'"
    if len(path) >= 2 and path[0] == "inputs":
        return f"input '{path[1]}'"
    if len(path) >= 2 and path[0] == "outputs":
        return f"output '{path[1]}'"
    if path:
        return f"'{path[0]}'"
    return "spec"


def _doc_path(data: Any, loc: tuple[Any, ...]) -> tuple[PathKey, Any, bool]:
    """Map a pydantic error location onto the document; skip union-member tags.

    Returns the path, the value there, and whether the last step was found.
    """
    path: list[str | int] = []
    cur = data
    found = True
    for part in loc:
        if isinstance(cur, dict) and isinstance(part, str) and part in cur:
            path.append(part)
            cur = cur[part]
            found = True
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            path.append(part)
            cur = cur[part]
            found = True
        else:
            found = False
    return tuple(path), cur, found


def _model_for(path: PathKey, data: Any, kinds: KindModels) -> type[BaseModel] | None:
    """The model whose fields apply at ``path`` (for did-you-mean on unknown fields)."""
    node_path: PathKey | None = None
    if len(path) >= 2 and path[0] == "nodes":
        node_path, rest = path[:2], path[2:]
    elif len(path) >= 4 and path[0] == "blocks" and path[2] == "nodes":
        node_path, rest = path[:4], path[4:]
    if node_path is not None:
        node = _get(data, node_path)
        kind = node.get("kind") if isinstance(node, dict) else None
        model = kinds.get(kind) if isinstance(kind, str) else None
        return _below(model, rest) if model is not None else None
    if len(path) == 2 and path[0] == "inputs":
        return m.InputSpec
    if len(path) == 2 and path[0] == "blocks":
        return m.BlockSpec
    if path == ("train",):
        return m.TrainSpec
    if path == ():
        return m.Spec
    return None


def _below(model: type[BaseModel], rest: PathKey) -> type[BaseModel] | None:
    """The model at ``rest`` below a node's model: a nested model, or a long reference."""
    if not rest:
        return model
    table = fields_of(model)
    name = str(rest[0])
    if name in table.nested:
        # a nested model (``mask: {...}``) or a mapping of them (``carry: {h: {...}}``)
        skip = 2 if name in table.mappings else 1
        return _below(table.nested[name][0], rest[skip:]) if len(rest) >= skip else None
    if name in table.refs and len(rest) <= 2:
        return m.RefLong
    return None


def _get(data: Any, path: PathKey) -> Any:
    cur = data
    for p in path:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and isinstance(p, int) and 0 <= p < len(cur):
            cur = cur[p]
        else:
            return None
    return cur


def _field_names(model: type[BaseModel]) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def diagnose(doc: Document, base: PathKey, data: Any, errors: list[Any],
              kinds: KindModels) -> list[Diagnostic]:
    """Turn one model's pydantic errors (at ``base`` in the doc) into diagnostics."""
    groups: dict[PathKey, list[Any]] = {}
    out = []
    for err in _fitting_branch(data, errors):
        path, _, found = _doc_path(data, tuple(err["loc"]))
        key = (*base, *path)
        if err["loc"] and err["loc"][-1] == "[key]":
            out.append(_bad_id(doc, key, err))
            continue
        if err["type"] in ("extra_forbidden", "missing") or not found:
            # an unknown or missing field: the last loc part names it
            name = str(err["loc"][-1])
            if err["type"] == "extra_forbidden" and not found:
                key = (*key, name)
            err = {**err, "_name": name}
        groups.setdefault(key, []).append(err)
    for key, errs in groups.items():
        out.append(_one(doc, key, errs, kinds))
    return out


#: Why an id has the form it has: what it becomes in the compiled model.
ID_RULE = ("an id becomes a module name and an attribute name of the compiled model, so it "
           "starts with a lowercase letter, then lowercase letters, digits or _ (at most 64 "
           "characters; no '.', '-', spaces or capitals)")
#: The same for a node id in a block, which may also hold capitals and start with _.
BODY_ID_RULE = ("an id becomes a module name of the compiled model and is written in "
                "references (id or id.port), so it is letters, digits and _, not starting "
                "with a digit (at most 64 characters; no '.', '-' or spaces)")


def _bad_id(doc: Document, path: PathKey, err: Any) -> Diagnostic:
    """A mapping key that is not an identifier (a node id, a block, input, output, dims or
    port name): located at the key, saying the rule once for every kind of id."""
    name = err.get("input")
    parent = str(path[-2]) if len(path) >= 2 else ""
    what = {"nodes": "node id", "inputs": "input name", "outputs": "output name",
            "blocks": "block name", "dims": "dims name"}.get(parent, f"{parent}: name")
    where = f"{part_name(path[:-2])}: " if len(path) > 2 else ""
    body = (err.get("ctx") or {}).get("pattern") == m.BODY_ID
    fixed = re.sub(r"[^A-Za-z0-9_]" if body else r"[^a-z0-9_]", "_",
                   str(name) if body else str(name).lower()).strip("_") or "x"
    if not fixed[0].isalpha():
        fixed = f"n_{fixed}"
    return Diagnostic(doc.loc(path, key=True),
                      f"{where}{what} {name!r} is not an identifier",
                      f"write e.g. {fixed[:64]!r}: {BODY_ID_RULE if body else ID_RULE}")


def _fitting_branch(data: Any, errors: list[Any]) -> list[Any]:
    """For a mapping written for one form of a union field (``query: {learned: 0}``),
    keep only the errors of the form whose keys it has: its value is wrong, not its
    field names. Other errors pass unchanged."""
    if not isinstance(data, dict):
        return errors
    by_field: dict[Any, dict[str, list[Any]]] = {}
    rest: list[Any] = []
    for err in errors:
        loc = tuple(err["loc"])
        value = data.get(loc[0]) if loc and isinstance(loc[0], str) else None
        if len(loc) > 1 and isinstance(value, dict) and isinstance(loc[1], str) \
                and loc[1] not in value:
            by_field.setdefault(loc[0], {}).setdefault(loc[1], []).append(err)
        else:
            rest.append(err)
    for branches in by_field.values():
        fits = [es for es in branches.values()
                if not any(e["type"] in ("extra_forbidden", "missing", "model_type",
                                         "dict_type", "model_attributes_type") for e in es)]
        rest += fits[0] if len(fits) == 1 else [e for es in branches.values() for e in es]
    return rest


def _one(doc: Document, path: PathKey, errs: list[Any], kinds: KindModels) -> Diagnostic:
    """The one diagnostic of the errors ``errs`` of the value at ``path``."""
    where = part_name(path)
    first = errs[0]
    typ = first["type"]
    if typ in ("extra_forbidden", "missing"):
        return _field_error(doc, path, first, kinds)
    field = str(path[-1]) if path else "spec"
    value = _get(doc.data, path) if path else doc.data
    if typ in ("union_tag_invalid", "union_tag_not_found"):
        return Diagnostic(doc.loc(path), f"{where}: unknown kind {value!r}",
                          did_you_mean(str(value), kinds))
    if typ == "literal_error":
        expected = first.get("ctx", {}).get("expected", "")
        options = [o.strip().strip("'") for o in expected.replace(" or ", ", ").split(",")]
        return Diagnostic(
            doc.loc(path), f"{where}: {field} {value!r} is not one of {expected}",
            did_you_mean(str(value), [o for o in options if o]),
        )
    if isinstance(value, str) and field in _size_fields(kinds):
        return _size_error(doc, path, field, value)
    if len(errs) > 1 or typ.endswith("_type"):
        return _union_error(doc, path, errs, field, value, kinds)
    msg = _msg(first)
    if typ == "value_error" and "; " in msg:
        # a validator's own message: "what is wrong; what to do"
        msg, hint = msg.split("; ", 1)
        return Diagnostic(doc.loc(path), f"{where}: {field}: {msg}", hint)
    return Diagnostic(doc.loc(path), f"{where}: {field}: {msg}", _hint(first, field))


def _field_error(doc: Document, path: PathKey, err: Any, kinds: KindModels) -> Diagnostic:
    """An unknown field (with did-you-mean from the fields of its model) or a missing one."""
    where, name = part_name(path), err["_name"]
    if err["type"] == "extra_forbidden":
        model = _model_for(path[:-1], doc.data, kinds)
        hint = (did_you_mean(name, _field_names(model)) if model
                else "remove it; docs/spec-language.md lists the fields of each part")
        return Diagnostic(doc.loc(path, key=True), f"{where}: unknown field '{name}'", hint)
    return Diagnostic(
        doc.loc(path, key=True), f"{where}: missing field '{name}'",
        f"add '{name}:' ({_WHAT.get(name, 'required')})",
    )


def _size_error(doc: Document, path: PathKey, field: str, value: str) -> Diagnostic:
    """A size field holding text: a length symbol (``N``), known only per batch, or
    something that is no dims name."""
    if re.match(r"^[A-Z][A-Za-z0-9_]*$", value):  # N, T, N_src: a length symbol
        carry = field == "zeros" and "carry" in path
        return Diagnostic(
            doc.loc(path), f"{part_name(path)}: {field}: '{value}' is a length, known only "
            "when a batch arrives, not a fixed size",
            f"start the carry with zeros_over: <items of length {value}> for zeros "
            f"[{value}]" if carry else "write a number, or a dims name (dims: {d: 64})",
        )
    return _not_a_size(doc, path, field, value)


def _not_a_size(doc: Document, path: PathKey, field: str, value: Any) -> Diagnostic:
    return Diagnostic(
        doc.loc(path),
        f"{part_name(path)}: {field} must be a positive integer or a dims name, "
        f"found {value!r}",
        f"write e.g. {field}: 64, or {field}: d with d under dims:",
    )


def _union_error(doc: Document, path: PathKey, errs: list[Any], field: str, value: Any,
                 kinds: KindModels) -> Diagnostic:
    """The errors of a union (reference | long form, int | dims name): say what is
    accepted."""
    where, first = part_name(path), errs[0]
    best = [e for e in errs if not e["type"].endswith("_type") and e["type"] != "model_type"]
    if best and best[0]["type"] != "string_pattern_mismatch":
        return Diagnostic(doc.loc(path), f"{where}: {field}: {_msg(best[0])}",
                          _hint(best[0], field))
    if field in _WHAT:
        return Diagnostic(doc.loc(path),
                          f"{where}: {field} must be {_WHAT[field]}, found {value!r}",
                          _ref_hint(field))
    if field in _size_fields(kinds):
        return _not_a_size(doc, path, field, value)
    return Diagnostic(doc.loc(path), f"{where}: {field}: {_msg(first)}, found {value!r}",
                      _hint(first, field))


#: What to write instead, by pydantic error type.
_FIX = {
    "int_type": "write a whole number, e.g. {f}: 16",
    "int_parsing": "write a whole number, e.g. {f}: 16",
    "int_from_float": "write a whole number, e.g. {f}: 16",
    "float_type": "write a number, e.g. {f}: 0.5",
    "float_parsing": "write a number, e.g. {f}: 0.5",
    "finite_number": "write a finite number (not .inf or .nan)",
    "bool_type": "write {f}: true or {f}: false",
    "bool_parsing": "write {f}: true or {f}: false",
    "string_type": "write text; quote it if YAML would read it as a number ('1')",
    "dict_type": "write a mapping, e.g. {f}: {{name: value}}",
    "model_type": "write a mapping of its fields, e.g. {f}: {{name: value}}",
    "model_attributes_type": "write a mapping of its fields, e.g. {f}: {{name: value}}",
    "list_type": "write a list, e.g. {f}: [a, b]",
    "tuple_type": "write a list, e.g. {f}: [a, b]",
    "too_short": "give more items",
    "too_long": "give fewer items",
    "string_too_long": "shorten it",
    "string_too_short": "write at least one character",
}
_EXAMPLE = {
    "outputs": "add outputs: {name: node_id}, the values forward returns",
    "nodes": "add nodes: {id: {kind: ..., ...}}",
    "inputs": "add inputs: {name: {type: tokens, vocab: 100}}",
}
_BOUND = {"greater_than": "above {gt}", "greater_than_equal": "of at least {ge}",
          "less_than": "below {lt}", "less_than_equal": "of at most {le}"}


def _ref_hint(field: str) -> str:
    if field in ("steps", "baseline", "beta"):
        return f"write {field}: followed by {_WHAT[field]}"
    return (f"name a node or an input of this spec ({field}: x, or x.port such as "
            f"enc.state); ids are lowercase letters, digits and _")


def _hint(err: Any, field: str) -> str:
    """What to write instead, for one pydantic error on ``field``."""
    typ = err["type"]
    ctx = err.get("ctx") or {}
    if typ in _BOUND:
        try:
            return f"use a value {_BOUND[typ].format(**ctx)} for {field}"
        except (KeyError, IndexError):
            pass
    if typ == "string_pattern_mismatch":
        if ctx.get("pattern") == m.IDENT:
            return ("names start with a lowercase letter, then lowercase letters, digits "
                    "or _ (at most 64 characters)")
        return "write a node id, or id.port (e.g. enc.state)"
    if typ in _FIX:
        return _FIX[typ].format(f=field)
    if field in _WHAT:
        return _ref_hint(field)
    if field in _EXAMPLE:
        return _EXAMPLE[field]
    return f"see '{field}' in docs/spec-language.md"


def _size_fields(kinds: KindModels) -> set[str]:
    """Names of size fields in any model (for "must be a positive integer or a dims name")."""
    models = {mm for k in kinds.values() for mm in nested_models(k)}
    models |= {m.InputSpec, m.LearnedQuery}
    return {name for mm in models for name in fields_of(mm).sizes}


def _msg(err: Any) -> str:
    msg = str(err["msg"])
    if err["type"] == "string_pattern_mismatch":
        pat = err.get("ctx", {}).get("pattern", "")
        if pat == m.IDENT:
            return f"{err['input']!r} is not an identifier (lowercase letters, digits, _)"
        return f"{err['input']!r} is not a reference (node or node.port)"
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return msg[0].lower() + msg[1:] if msg else msg
