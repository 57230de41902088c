"""yaml-language-server shows each field's description on hover (docs/tools/hover_check.py).

The script starts the server editors run, loads the schema ``attngraph schema``
writes, and hovers every field key of some specs. Its walk over a spec's field keys
is checked here without a server; the hover itself needs ``node`` and
yaml-language-server (``$YAML_LANGUAGE_SERVER`` or on the PATH) and is skipped,
saying so, without them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from attngraph.kinds.schema import json_schema
from attngraph.train.tasks.lookup import task_lines
from fuzz.seeds import blocks

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "tools" / "hover_check.py"
SCHEMA = json_schema(task_lines())


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("hover_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["hover_check"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


HOVER = _script()
SERVER = HOVER.server_command(None)
needs_server = pytest.mark.skipif(
    SERVER is None, reason="needs node and yaml-language-server: set YAML_LANGUAGE_SERVER "
    "to its executable or put it on the PATH (npm install --prefix /tmp/yls "
    "yaml-language-server)")

SPEC = """\
attngraph: 1
name: walk
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
blocks:
  step:
    inputs: [h, e]
    nodes:
      s: {kind: scorer, fn: dot, query: h, key: e}
    output: s
nodes:
  items: {kind: items, from: {ref: x, detach: true}}
  s: {kind: scorer, fn: additive, query: {learned: d}, key: items}
  p:
    kind: softmax
    scores: s
    mask: {causal: true}
  loop:
    kind: loop
    body: step
    steps: 3
    inputs: {e: items}
    carry: {h: {zeros: d, next: h}}
outputs: {p: p}
train: {task: needle, target: {accuracy: 0.9}}
"""


def test_the_walk_finds_every_field_and_no_name(tmp_path: Path) -> None:
    """The script hovers exactly the field keys: the document's, a block's, every
    node's, nested ones (long reference, learned query, mask, carry entry, train),
    never a name the user chose (ids, dims, inputs, carried names, metrics)."""
    path = tmp_path / "walk.yaml"
    path.write_text(SPEC, encoding="utf-8")
    found = [(f.line + 1, f.name) for f in HOVER.fields(SCHEMA, path)]
    assert found == [
        (1, "attngraph"), (2, "name"), (3, "dims"), (4, "inputs"), (5, "type"), (5, "dim"),
        (6, "blocks"), (8, "inputs"), (9, "nodes"), (10, "kind"), (10, "fn"), (10, "query"),
        (10, "key"), (11, "output"), (12, "nodes"), (13, "kind"), (13, "from"), (13, "ref"),
        (13, "detach"), (14, "kind"), (14, "fn"), (14, "query"), (14, "learned"),
        (14, "key"), (16, "kind"), (17, "scores"), (18, "mask"), (18, "causal"),
        (20, "kind"), (21, "body"), (22, "steps"), (23, "inputs"), (24, "carry"),
        (24, "zeros"), (24, "next"), (25, "outputs"), (26, "train"), (26, "task"),
        (26, "target"),
    ]
    descriptions = {f.name: f.description for f in HOVER.fields(SCHEMA, path)}
    assert descriptions["detach"].startswith("Stop the gradient")
    assert descriptions["causal"].startswith("Query i attends only")


def test_every_field_document_holds_every_field(tmp_path: Path) -> None:
    """``--every-field`` writes a document in which the walk meets every property of
    every model of the schema (each kind, each nested model) at least once."""
    path = tmp_path / "every_field.yaml"
    path.write_text(HOVER.every_field_spec(SCHEMA), encoding="utf-8")
    met = {(f.owner, f.name) for f in HOVER.fields(SCHEMA, path)}
    every = {(name, p) for name, d in [("", SCHEMA), *SCHEMA["$defs"].items()]
             for p in d.get("properties", {})}
    assert met == every
    assert len(every) > 300


def test_hover_text_comparison() -> None:
    """A hover passes when it shows the description's words, escaped or rewrapped;
    an empty hover or another text fails."""
    desc = "Scores `[N]`, one\nper item."
    assert HOVER._shown(desc, "#### Scores\n\nScores \\`[N]\\`, one per\nitem.\n\nSource: s")
    assert not HOVER._shown(desc, "")
    assert not HOVER._shown(desc, "#### Query\n\nAn inline learned query vector")
    assert not HOVER._shown("", "anything")


def _run(specs: list[Path]) -> tuple[int, list[str]]:
    assert SERVER is not None
    return HOVER.check(specs, SCHEMA, SERVER)  # type: ignore[no-any-return]


@needs_server
def test_hover_shows_every_field_description(tmp_path: Path) -> None:
    """Over a catalog spec and the test spec above, every field's hover shows its
    description, and the server finds no schema error."""
    path = tmp_path / "walk.yaml"
    path.write_text(SPEC, encoding="utf-8")
    count, misses = _run([ROOT / "specs" / "intra_attention.yaml", path])
    assert not misses, "\n".join(misses)
    assert count > 90


@needs_server
@pytest.mark.slow
def test_hover_describes_every_field_of_every_model(tmp_path: Path) -> None:
    """In the document holding every field of every model (above), every field's
    hover shows its description (its sample values may be refused: not counted)."""
    path = tmp_path / "every_field.yaml"
    path.write_text(HOVER.every_field_spec(SCHEMA), encoding="utf-8")
    count, misses = HOVER.check([path], SCHEMA, SERVER, frozenset([path]))
    assert not misses, "\n".join(misses)
    assert count > 400


@needs_server
@pytest.mark.slow
def test_hover_over_the_catalog_and_the_reference_examples(tmp_path: Path) -> None:
    """Every catalog spec and every valid example of docs/spec-language.md (each kind
    appears in one): every field's hover shows its description."""
    examples = []
    for b in blocks(ROOT / "docs" / "spec-language.md"):
        if b.lang == "yaml" and b.marker in ("", "large"):
            examples.append(tmp_path / f"line{b.line}.yaml")
            examples[-1].write_text(b.text, encoding="utf-8")
    specs = sorted((ROOT / "specs").glob("*.yaml"))
    count, misses = _run(specs + examples)
    assert not misses, "\n".join(misses)
    assert count > 2000
