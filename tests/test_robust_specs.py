"""Specs that validated and then failed or overflowed are refused when read: every id
(node, block, input, output, dims, port) has one form, an identifier, because it
becomes a module and attribute name; and the numerics guard bounds growth that
compounds through a repeat's rounds."""

from __future__ import annotations

from pathlib import Path

import pytest

import attngraph
from attngraph.analysis.sizes import ASSUMED_BATCH
from attngraph.errors import AttnGraphError, SpecError
from attngraph.frontend import loads_spec

ROOT = Path(__file__).resolve().parent.parent

BLOCK_SPEC = """attngraph: 1
name: t
inputs:
  src: {type: vectors, dim: 8}
blocks:
  b:
    inputs: [u]
    nodes:
      ID: {kind: linear, from: u, out: 8}
      y: {kind: linear, from: u, out: 8}
    outputs: {y: y}
nodes:
  x: {kind: items, from: src}
  r: {kind: block, block: b, from: {u: x}}
outputs: {p: r}
"""

TOP_SPEC = """attngraph: 1
name: t
inputs:
  src: {type: vectors, dim: 8}
nodes:
  x: {kind: items, from: src}
  ID: {kind: linear, from: x, out: 8}
outputs: {p: x}
"""

#: Ids torch refuses as module names ('.', empty) and others no reference can write.
BAD_IDS = ["w.port", "'a.b.c'", "'x-y'", "'has space'", "'1st'", "'é'", "'x/y'", "''"]


def _refused(text: str) -> list[tuple[int, int, str, str | None]]:
    with pytest.raises(SpecError) as info:
        loads_spec(text, "t.yaml")
    return [(d.loc.line, d.loc.col, d.message, d.hint) for d in info.value.diagnostics]


@pytest.mark.parametrize("bad", BAD_IDS)
def test_a_block_node_id_that_is_no_identifier_is_refused_at_its_key(bad: str) -> None:
    """A node id inside a block is checked as at the top level: at the key, with the
    rule and a suggestion (before: validated, then KeyError at compile)."""
    line, col, msg, hint = _refused(BLOCK_SPEC.replace("ID", bad))[0]
    assert (line, col) == (9, 7)
    assert msg == f"block 'b': node id {bad.strip(chr(39))!r} is not an identifier"
    assert hint is not None and "module name" in hint and "write e.g." in hint


@pytest.mark.parametrize("bad", [*BAD_IDS, "Upper", "_x"])
def test_a_top_level_node_id_that_is_no_identifier_is_refused(bad: str) -> None:
    """The same rule and message at the top level."""
    line, col, msg, _ = _refused(TOP_SPEC.replace("ID", bad))[0]
    assert (line, col, msg) == (7, 3, f"node id {bad.strip(chr(39))!r} is not an identifier")


def test_every_kind_of_name_has_the_rule() -> None:
    """Block, input, output and dims names and block-output ports are identifiers."""
    text = """attngraph: 1
name: t
dims: {D-1: 3}
inputs:
  Src: {type: vectors, dim: 8}
blocks:
  b.c:
    inputs: [u]
    nodes:
      y: {kind: linear, from: u, out: 8}
    outputs: {y.z: y}
nodes:
  x: {kind: items, from: Src}
outputs: {o.p: x}
"""
    got = {(line, msg) for line, _, msg, _ in _refused(text)}
    assert {(3, "dims name 'D-1' is not an identifier"),
            (5, "input name 'Src' is not an identifier"),
            (7, "block name 'b.c' is not an identifier"),
            (11, "block 'b.c': output name 'y.z' is not an identifier"),
            (14, "output name 'o.p' is not an identifier")} <= got


@pytest.mark.parametrize("good", ["w_port", "W", "__call__", "keys", "_modules"])
def test_a_valid_block_id_still_compiles(good: str) -> None:
    """In a block, any name a reference can write is an id (capitals, a leading _,
    the names of nn.Module attributes): only those are refused."""
    g = loads_spec(BLOCK_SPEC.replace("ID", good), "t.yaml")
    attngraph.compile(g, seed=0)


REPEAT = """attngraph: 1
name: t
inputs:
  src: {type: vectors, dim: 8}
blocks:
  grow:
    inputs: [u]
    nodes:
      BODY
    output: y
nodes:
  x: {kind: items, from: src}
  r: {kind: repeat, block: grow, times: TIMES, from: x}
outputs: {r: r}
"""


def _repeat(body: str, times: int) -> str:
    return REPEAT.replace("BODY", body).replace("TIMES", str(times))


def test_130_rounds_of_a_doubling_block_are_refused_at_times() -> None:
    """add [u, u] doubles each round: 2^128 passes float32 (before: valid, ±inf out)."""
    got = _refused(_repeat("y: {kind: add, from: [u, u]}", 130))
    line, col, msg, hint = got[0]
    assert (line, col) == (13, 41)
    assert msg.startswith("node 'r': 130 rounds of block 'grow' would grow values to about ")
    assert "by round 128 (×2 in the first round), past the float32 range" in msg
    assert hint is not None and "kind: norm" in hint and "at most about 126 rounds" in hint


@pytest.mark.parametrize("body", [
    "y: {kind: mul, from: [v, v]}\n      v: {kind: add, from: [u, u]}",  # squares
    "y: {kind: gain, from: u, init: 4}",
    "h: {kind: linear, from: u, out: 8}\n      y: {kind: add, from: [u, h, u]}",
])
def test_growth_through_other_kinds_is_refused(body: str) -> None:
    """mul, gain and a residual sum compound the same way: refused at the repeat."""
    msg = _refused(_repeat(body, 200))[0][2]
    assert "past the float32 range" in msg


@pytest.mark.parametrize(("body", "times"), [
    ("y: {kind: add, from: [u, u]}", 6),
    ("n: {kind: norm, from: u}\n      h: {kind: linear, from: n, out: 8}\n"
     "      y: {kind: add, from: [u, h]}", 1000),  # pre-norm residual: linear growth
    ("n: {kind: add, from: [u, u]}\n      y: {kind: norm, from: n}", 1000),
])
def test_bounded_repeats_pass(body: str, times: int) -> None:
    """A modest repeat, and a block that renormalises, are accepted."""
    loads_spec(_repeat(body, times), "t.yaml")


def test_allow_large_lets_it_through() -> None:
    """--allow-large (allow_large=True) is the escape hatch, as for the other limits."""
    loads_spec(_repeat("y: {kind: add, from: [u, u]}", 130), "t.yaml", allow_large=True)


def test_catalog_residual_repeats_are_accepted() -> None:
    """Every catalog spec with a repeat still passes the guard."""
    specs = [p for p in sorted((ROOT / "specs").glob("*.yaml"))
             if "kind: repeat" in p.read_text(encoding="utf-8")]
    assert specs
    for p in specs:
        attngraph.load_spec(p)


def _graphs_of_every_seed() -> list[tuple[str, object]]:
    from fuzz.seeds import seeds

    out = []
    for s in seeds():
        try:
            out.append((s.name, loads_spec(s.text, s.name, allow_large=True)))
        except AttnGraphError:
            continue
    return out


def test_every_builtin_work_rule_gives_whole_numbers_at_or_above_zero() -> None:
    """Built-in work rules are exempt from the plugin check of their results, so each
    is checked here on every seed: a tied embedding once counted negative work."""
    from attngraph.analysis.sizes import _Acc, _work
    from attngraph.kinds import KINDS
    from attngraph.kinds.base import WorkCtx, dense_work

    bad = []
    for name, graph in _graphs_of_every_seed():
        stack = [graph]
        while stack:
            g = stack.pop()
            acc = _Acc(ASSUMED_BATCH, {})
            for n in g.nodes:
                if n.body is not None:
                    stack.append(n.body)
                if not n.types:
                    continue
                kind = KINDS.get(n.kind)
                rule = (kind.work if kind is not None else None) or dense_work
                problem = _work(rule(WorkCtx(n, g, acc.size)))
                if problem is not None:
                    bad.append(f"{name}: {n.id} ({n.kind})")
    assert not bad, bad
