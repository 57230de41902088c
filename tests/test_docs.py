"""The user reference stays true: its examples validate and it covers the language.

``docs/spec-language.md`` is checked against the code: every fenced ``yaml`` block
is a complete spec that :func:`attngraph.frontend.loads_spec` accepts (or, when
marked, fails with the exact output shown next to it); every node kind, scorer
function and field of the models is documented. ``docs/editor-setup.md`` is
checked the same way (its JSON parses, its spec validates, its modeline is right).

Markers are HTML comments on the line before a fence:

- ``<!-- error: FILE -->``: the spec must fail; the next ``text`` block is exactly
  what ``attngraph validate FILE`` prints on stderr.
- ``<!-- large -->``: the spec is refused by the resource guard and accepted with
  ``allow_large=True``.
- ``<!-- after-python -->``: run the preceding ``python`` block first (it registers
  a scorer), then validate; the registration is undone afterwards.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attngraph.errors import AttnGraphError
from attngraph.frontend import loads_spec
from attngraph.kinds import (
    ACTIVATIONS,
    FEATURE_MAPS,
    KINDS,
    NORMALISERS,
    SCORERS,
    spec_kinds,
)
from attngraph.kinds.attention import MaskSpec
from attngraph.kinds.structure import CarrySpec, FeedSpec
from attngraph.spec import models as m
from fuzz.seeds import Block, blocks, is_spec

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "spec-language.md"
EDITOR = ROOT / "docs" / "editor-setup.md"


DOC_BLOCKS = blocks(DOC)
SPECS = [b for b in DOC_BLOCKS if b.lang == "yaml"]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _section(text: str, kind: str) -> str:
    """The text under the heading of ``kind`` (up to the next heading of its level)."""
    head = re.search(rf"^(#+) `{re.escape(kind)}`", text, re.M)
    if head is None:
        return ""
    level = len(head.group(1))
    rest = text[head.end():]
    nxt = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: nxt.start()] if nxt else rest


def _field_names(model: type) -> list[str]:
    return [f.alias or name for name, f in model.model_fields.items()]


def test_doc_has_examples() -> None:
    """The reference has a spec example for most kinds (at least one per kind overall)."""
    assert len(SPECS) >= 15


@pytest.mark.parametrize("block", SPECS, ids=[f"line{b.line}" for b in SPECS])
def test_yaml_example_is_a_complete_spec(block: Block) -> None:
    """Every yaml block in the reference is a whole spec starting with 'attngraph: 1'."""
    assert is_spec(block.text), f"docs/spec-language.md:{block.line}: not a whole spec"


@pytest.mark.parametrize("block", SPECS, ids=[f"line{b.line}" for b in SPECS])
def test_yaml_example_checks(block: Block) -> None:
    """Each example validates, or fails exactly as the reference says it does."""
    where = f"docs/spec-language.md:{block.line}"
    if block.marker.startswith("error:"):
        with pytest.raises(AttnGraphError):
            loads_spec(block.text, block.marker.split(":", 1)[1].strip())
        return
    if block.marker == "large":
        with pytest.raises(AttnGraphError, match="over the limit"):
            loads_spec(block.text, where)
        assert loads_spec(block.text, where, allow_large=True).params > 0
        return
    if block.marker == "after-python":
        i = DOC_BLOCKS.index(block)
        code = next(b for b in reversed(DOC_BLOCKS[:i]) if b.lang == "python")
        # every registry the example may add to is put back after it (a normaliser or
        # an activation left registered changes the schema other tests compare)
        with SCORERS.scoped(), NORMALISERS.scoped(), ACTIVATIONS.scoped(), \
                FEATURE_MAPS.scoped(), KINDS.scoped():
            exec(compile(code.text, where, "exec"), {})  # noqa: S102 - the doc's own example
            loads_spec(block.text, where)
        return
    try:
        g = loads_spec(block.text, where)
    except AttnGraphError as exc:
        pytest.fail(f"{where}: example does not validate:\n{exc.format()}")
    assert g.outputs
    for nid, shown in _shape_notes(block.text):
        assert str(g.node(nid).types[""]) == shown, f"{where}: node '{nid}'"


def _shape_notes(text: str) -> list[tuple[str, str]]:
    """(node id, shape) for every ``id: {...}  # => [shape]`` line of an example."""
    return re.findall(r"^\s+(\w+):.*#\s*=>\s*(.+?)\s*$", text, re.M)


def test_shape_notes_are_checked() -> None:
    """The reference annotates many shapes, so the check above has teeth."""
    assert sum(len(_shape_notes(b.text)) for b in SPECS) >= 40


def test_error_examples_print_what_the_doc_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli
) -> None:
    """The error output shown in the reference is what `attngraph validate` prints."""

    marked = [b for b in SPECS if b.marker.startswith("error:")]
    assert marked, "the reference shows at least one real error"
    monkeypatch.chdir(tmp_path)
    for b in marked:
        name = b.marker.split(":", 1)[1].strip()
        (tmp_path / name).write_text(b.text, encoding="utf-8")
        i = DOC_BLOCKS.index(b)
        shown = next(x for x in DOC_BLOCKS[i + 1:] if x.lang == "text")
        res = cli("validate", name, code=1)
        assert res.stderr.strip() == shown.text.strip()


@pytest.mark.parametrize("kind", sorted(spec_kinds()))
def test_every_kind_has_a_section_listing_its_fields(kind: str) -> None:
    """Each node kind has a heading, and its section names each of its fields."""
    sec = _section(_text(DOC), kind)
    assert sec, f"no heading for kind '{kind}'"
    missing = [f for f in _field_names(spec_kinds()[kind]) if f"`{f}`" not in sec]
    assert not missing, f"kind '{kind}': fields not documented: {missing}"


@pytest.mark.parametrize("kind", sorted(spec_kinds()))
def test_every_kind_appears_in_a_checked_example(kind: str) -> None:
    """Each node kind is used by at least one example that the tests validate."""
    pat = re.compile(rf"kind:\s*{re.escape(kind)}\b")
    assert any(pat.search(b.text) for b in SPECS if not b.marker.startswith("error:"))


@pytest.mark.parametrize("fn", sorted(SCORERS))
def test_every_scorer_is_documented_and_used(fn: str) -> None:
    """Each scorer function has a heading or table row and a checked example."""
    text = _text(DOC)
    assert re.search(rf"^(#+ `{fn}`|\| `{fn}` \|)", text, re.M), f"scorer '{fn}' undocumented"
    pat = re.compile(rf"fn:\s*{fn}\b")
    assert any(pat.search(b.text) for b in SPECS if not b.marker.startswith("error:"))


@pytest.mark.parametrize(
    "model",
    [m.Spec, m.InputSpec, m.BlockSpec, m.TrainSpec, MaskSpec, CarrySpec, FeedSpec,
     m.RefLong, m.LearnedQuery],
    ids=lambda x: x.__name__,
)
def test_every_structural_field_is_mentioned(model: type) -> None:
    """Fields of the spec, inputs, blocks, train, masks, carry and feed appear in the doc."""
    text = _text(DOC)
    missing = [f for f in _field_names(model) if f"`{f}`" not in text]
    assert not missing, f"{model.__name__}: fields not documented: {missing}"


def test_every_input_type_is_documented() -> None:
    """Each input type has a row in the input table."""
    text = _text(DOC)
    for t in m.INPUT_TYPES:
        assert re.search(rf"^\| `{t}` \|", text, re.M), t


def test_limits_in_the_doc_are_the_code_limits() -> None:
    """The numbers the reference gives for the guards are the ones the code uses."""
    from attngraph.guard import MAX_DIM, MAX_PARAMS
    from attngraph.source import MAX_BYTES, MAX_NODES

    text = _text(DOC)
    for n in (MAX_PARAMS, MAX_DIM, MAX_NODES, MAX_BYTES):
        assert f"{n:,}" in text, n


def test_editor_setup_examples() -> None:
    """The editor page's JSON parses, its spec validates, and it names the modeline."""
    found = blocks(EDITOR)
    text = _text(EDITOR)
    assert "# yaml-language-server: $schema=" in text
    assert '"yaml.schemas"' in text
    jsons = [b for b in found if b.lang in ("json", "jsonc")]
    assert jsons
    for b in jsons:
        data = json.loads(b.text)
        assert isinstance(data, dict)
    specs = [b for b in found if b.lang == "yaml"]
    assert specs
    for b in specs:
        assert is_spec(b.text)
        loads_spec(b.text, f"docs/editor-setup.md:{b.line}")


def test_schema_command_names_every_kind_and_scorer(tmp_path: Path, cli) -> None:
    """`attngraph schema -o FILE` (what the editor page tells users to run) writes a schema
    that knows every kind and scorer, so the editor completes them."""

    out = tmp_path / "attngraph.schema.json"
    cli("schema", "-o", out, code=0)
    schema = json.loads(out.read_text(encoding="utf-8"))
    text = json.dumps(schema)
    for kind in spec_kinds():
        assert f'"const": "{kind}"' in text or f'"enum": ["{kind}"]' in text, kind
    assert set(schema["$defs"]["ScorerSpec"]["properties"]["fn"]["enum"]) == set(SCORERS)


def test_every_import_the_docs_name_resolves() -> None:
    """Each ``from attngraph... import name`` written in README.md or docs/ imports."""
    import importlib

    root = Path(__file__).resolve().parents[1]
    texts = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    found = []
    for path in texts:
        for mod, names in re.findall(r"from ((?:attngraph|renderers)[\w.]*) import ([\w, ]+)",
                                     path.read_text(encoding="utf-8")):
            for name in (n.strip() for n in names.split(",") if n.strip()):
                found.append((path.name, mod, name))
                assert hasattr(importlib.import_module(mod), name), (path.name, mod, name)
    assert ("editor-setup.md", "attngraph.kinds.schema", "json_schema") in found
