"""The JSON Schema describes every field, from one source that also writes the docs.

Each field's description is the docstring under it in its model; the schema shows
it (with the default and the allowed values the field's type gives), and the field
reference of docs/spec-language.md is generated from that schema by ``attngraph
docs``. These tests walk the whole schema, compare it with the models, and check
that the committed reference is what the generator writes now.
"""

from __future__ import annotations

import json
import shutil
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from attngraph.kinds import spec_kinds
from attngraph.kinds.attention import MaskSpec
from attngraph.kinds.reference import END, START, field_reference, with_reference
from attngraph.kinds.schema import field_docs, json_schema, markdown
from attngraph.kinds.structure import CarrySpec, FeedSpec
from attngraph.spec import models as m
from attngraph.train.tasks.lookup import task_lines

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "spec-language.md"
SCHEMA = json_schema(task_lines())
DEFS = SCHEMA["$defs"]
#: every model of the schema, by its $defs name ("" for the document itself)
MODELS: dict[str, type[BaseModel]] = {
    "": m.Spec, "Block": m.BlockSpec,
    **{x.__name__: x for x in (m.InputSpec, m.TrainSpec, m.RefLong, m.LearnedQuery,
                               MaskSpec, CarrySpec, FeedSpec)},
    **{x.__name__: x for x in spec_kinds().values()},
}


def _def(name: str) -> dict[str, Any]:
    return SCHEMA if name == "" else DEFS[name]


def _properties(node: Any, path: str = "#") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every property schema under ``node``: in $defs, anyOf/oneOf branches, items,
    patternProperties and additionalProperties alike."""
    if isinstance(node, dict):
        for name, prop in node.get("properties", {}).items():
            yield f"{path}/properties/{name}", prop
        for key, value in node.items():
            yield from _properties(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _properties(value, f"{path}/{i}")


def _fields() -> Iterator[tuple[str, type[BaseModel], str, str, Any, dict[str, Any]]]:
    """(where, model, YAML name, attribute, field info, property schema) for every
    field of every model."""
    for dname, model in MODELS.items():
        props = _def(dname)["properties"]
        for attr, info in model.model_fields.items():
            name = info.alias or attr
            yield f"{dname or 'Spec'}.{name}", model, name, attr, info, props[name]


def _literals(ann: Any) -> set[Any]:
    """The values of every ``Literal`` inside an annotation."""
    if typing.get_origin(ann) is Literal:
        return set(typing.get_args(ann))
    return set().union(*(_literals(a) for a in typing.get_args(ann)))


def _allowed(prop: dict[str, Any]) -> set[Any]:
    """The values a property allows: its enum or const, in any branch, or those of its
    list's items or its mapping's keys (an expression's ``axes`` and ``sizes``)."""
    out: set[Any] = set()
    for b in [prop, *prop.get("anyOf", ()), *prop.get("oneOf", ())]:
        out |= set(b.get("enum", ())) | ({b["const"]} if "const" in b else set())
        for inner in ("items", "propertyNames"):  # a list's items, a mapping's keys
            if isinstance(b.get(inner), dict):
                out |= _allowed(b[inner])
        for value in b.get("patternProperties", {}).values():  # a mapping's values (dims)
            out |= _allowed(value)
    return out


def test_every_property_has_a_description() -> None:
    """Walking the whole schema ($defs and every branch), each property has a
    non-empty description, and a markdown one for editors that render it."""
    props = list(_properties(SCHEMA))
    assert len(props) > 300  # every kind's fields: the walk reaches them all
    bare = [where for where, p in props if not str(p.get("description", "")).strip()]
    assert not bare, f"{len(bare)} of {len(props)} properties undescribed: {bare[:10]}"
    assert all(p["markdownDescription"] == p["description"] for _, p in props)


def test_every_model_and_kind_is_described() -> None:
    """Each model of the schema has a description, its docstring, except those a field
    holds directly (its description says it there, and editors show the first one
    they meet); a kind's ``kind`` field shows the kind's description."""
    assert set(MODELS) - {""} == set(DEFS)  # the table above is the whole schema
    held = {"TrainSpec", "MaskSpec", "RefLong", "LearnedQuery"}
    for dname, model in MODELS.items():
        d = _def(dname)
        if dname in held:
            assert "description" not in d and "title" not in d, dname
        else:
            assert d["description"] == markdown(model.__doc__ or ""), dname
    for model in spec_kinds().values():
        d = DEFS[model.__name__]
        assert d["properties"]["kind"]["description"] == d["description"] != ""


def test_descriptions_are_the_field_docstrings() -> None:
    """The schema's description of a field is the docstring under it in its model
    (the one source): every field of every model has one."""
    missing = []
    for where, model, name, attr, _info, prop in _fields():
        if name == "kind" and model is not m.Spec:
            continue  # a kind's tag shows the kind's description (above)
        doc = field_docs(model).get(attr)
        if not doc:
            missing.append(where)
            continue
        shown = prop["description"].split("\n\n")[0]  # train.task adds its task list
        assert shown == markdown(doc), where
    assert not missing, f"fields without a docstring: {missing}"


@pytest.mark.parametrize("name", sorted(MODELS), ids=lambda n: n or "Spec")
def test_field_docs_read_what_pydantic_reads(name: str) -> None:
    """:func:`field_docs` finds the attribute docstrings pydantic's own
    ``use_attribute_docstrings`` would (through every base class)."""
    from pydantic._internal._docs_extraction import extract_docstrings_from_cls

    model = MODELS[name]
    want: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if issubclass(cls, BaseModel) and cls is not BaseModel:
            want.update(extract_docstrings_from_cls(cls, use_inspect=True))
    assert field_docs(model) == want
    assert set(want) >= set(model.model_fields) - {"kind"}


def test_defaults_are_the_models_defaults() -> None:
    """A field with a default (one a factory makes too) shows it as ``default``; a
    required field is listed as required and shows none."""
    checked = 0
    for where, model, name, _attr, info, prop in _fields():
        required = name in _def(next(k for k, v in MODELS.items() if v is model)).get(
            "required", [])
        if info.is_required():
            assert required and "default" not in prop, where
            continue
        default = info.default_factory() if info.default_factory else info.default  # type: ignore[call-arg]
        assert default is not PydanticUndefined
        want = default.model_dump() if isinstance(default, BaseModel) else default
        assert "default" in prop and prop["default"] == want, where
        checked += 1
    assert checked > 150


def test_allowed_values_are_the_literals() -> None:
    """A field whose type is (or holds) a ``Literal`` lists exactly its values as
    ``enum``/``const``; the scorer ``fn`` and ``train.task`` list the registered
    scorer functions and tasks."""
    checked = 0
    for where, _model, _name, _attr, info, prop in _fields():
        values = _literals(info.annotation)
        if values:
            assert _allowed(prop) == values, where
            checked += 1
    assert checked > 50
    assert DEFS["TrainSpec"]["properties"]["task"]["enum"] == list(task_lines())
    assert "dot" in DEFS["ScorerSpec"]["properties"]["fn"]["enum"]


def test_markdown_joins_lines_and_turns_rst_code_into_markdown() -> None:
    """Docstrings wrap lines and write ``code``; the schema says it in one line of
    markdown."""
    assert markdown("a ``[N, d]``\n    b  c") == "a `[N, d]` b c"


def test_committed_field_reference_is_up_to_date() -> None:
    """docs/spec-language.md holds, between its markers, exactly what the generator
    writes from the models now (run `attngraph docs` after editing a docstring)."""
    text = DOC.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1
    assert with_reference(text, field_reference(SCHEMA)) == text


def test_field_reference_has_a_row_per_field() -> None:
    """Each model has a table, with one row per field showing its default, allowed
    values and description."""
    ref = field_reference(SCHEMA)
    assert ref.count("| field | type | default | allowed | description |") == len(MODELS)
    for kind in spec_kinds():
        assert f"### Kind `{kind}`" in ref
    rows = [line for line in ref.splitlines() if line.startswith("| `")]
    assert len(rows) == sum(len(x.model_fields) for x in MODELS.values())
    row = next(r for r in rows if r.startswith("| `optimizer` |"))
    assert row == ("| `optimizer` | text | `adam` | `adam`, `sgd` | The optimiser. |")
    temp = next(r for r in rows if r.startswith("| `temperature` |"))
    assert "| number | `1.0` | [0.001, 1000] |" in temp


def test_reference_does_not_list_what_registries_hold() -> None:
    """Registering a scorer function changes the schema's ``fn`` enum (editors offer
    it), not the reference page, which names the registry instead of its contents."""
    from attngraph.kinds import SCORERS, ScorerInfo, register_scorer

    before = field_reference(SCHEMA)
    assert "a registered name" in next(r for r in before.splitlines()
                                       if r.startswith("| `fn` | name |"))
    with SCORERS.scoped():
        register_scorer(ScorerInfo("zz_probe", "0", module="x:y"))
        now = json_schema(task_lines())
        assert "zz_probe" in now["$defs"]["ScorerSpec"]["properties"]["fn"]["enum"]
        assert field_reference(now) == before


def test_reference_needs_its_markers() -> None:
    """A page without the marker comments is refused, not rewritten blindly."""
    with pytest.raises(ValueError, match="markers"):
        with_reference("# a page\n", "table")
    with pytest.raises(ValueError, match="markers"):
        with_reference(f"{END}\n{START}\n", "table")


@pytest.mark.dot
def test_docs_command_rewrites_the_reference(tmp_path: Path, cli) -> None:
    """`attngraph docs --out DIR` rewrites DIR/spec-language.md's reference between its
    markers, leaving the prose; without markers it is one located error."""
    specs = tmp_path / "specs"
    specs.mkdir()
    shutil.copy(ROOT / "specs" / "intra_attention.yaml", specs)
    out = tmp_path / "docs"
    out.mkdir()
    stale = f"# Prose\n\nkept\n\n{START}\nold table\n{END}\n\nafter\n"
    (out / "spec-language.md").write_text(stale, encoding="utf-8")
    r = cli("docs", "--specs", specs, "--out", out, code=0)
    page = (out / "spec-language.md").read_text(encoding="utf-8")
    assert page == with_reference(stale, field_reference(SCHEMA))
    assert page.startswith("# Prose\n\nkept\n") and page.endswith(f"{END}\n\nafter\n")
    assert "rewritten" in r.output

    (out / "spec-language.md").write_text("# no markers\n", encoding="utf-8")
    r = cli("docs", "--specs", specs, "--out", out, code=1)
    assert "spec-language.md has no field reference markers" in r.output
    assert "Traceback" not in r.output
    assert (out / "spec-language.md").read_text(encoding="utf-8") == "# no markers\n"


def test_schema_command_output_is_described(cli) -> None:
    """What `attngraph schema` prints (what editors load) has the descriptions."""
    r = cli("schema", code=0)
    printed = json.loads(r.output)
    # the schema of the registries as they are now (another test of this worker may
    # hold an entry registered in its scope), not as they were at collection
    assert printed == json.loads(json.dumps(json_schema(task_lines())))
