"""Messages and descriptions found wanting while writing mechanisms from papers:
each is one located error with a hint (or a true description), pinned here."""

from __future__ import annotations

import re

import pytest

from attngraph.errors import AttnGraphError
from attngraph.frontend import loads_spec

HEAD = ("attngraph: 1\nname: t\ninputs:\n  src: {type: vectors, dim: 8}\n"
        "  h: {type: vector, dim: 8}\n")


def _error(text: str) -> AttnGraphError:
    with pytest.raises(AttnGraphError) as e:
        loads_spec(text)
    return e.value


@pytest.mark.parametrize(("nodes", "line", "col", "message", "hint"), [
    ("  s: {kind: scorer, fn: additive, query: {learned: 0}, key: src}\n", 7, 52,
     "node 's': learned: input should be greater than 0", "above 0"),
    ("  x: {kind: items, from: src, dim: N}\n", 7, 36,
     "node 'x': dim: 'N' is a length, known only when a batch arrives, not a fixed size",
     "dims name"),
    ("  s: {kind: scorer, fn: mlp, key: src}\n  p: {kind: softmax, scores: s}\n"
     "  x: {kind: items, from: p}\n", 9, 26,
     "node 'x': items need tokens, vectors [N, d], an image or a graph, got [N]",
     "kind conv"),
    ("  s: {kind: scorer, fn: mlp, key: src}\n  p: {kind: softmax, scores: s}\n"
     "  l: {kind: linear, from: p, out: 4}\n", 9, 27,
     "node 'l': the feature size of 'from' must be a fixed number, found the length N",
     "N is a length"),
])
def test_message_is_located_with_a_hint(nodes: str, line: int, col: int, message: str,
                                        hint: str) -> None:
    """Each mistake gives one error at its line and column, and a hint that helps."""
    d = _error(HEAD + "nodes:\n" + nodes + "outputs: {o: src}\n").diagnostics[0]
    assert (d.message, d.loc.line, d.loc.col) == (message, line, col)
    assert hint in (d.hint or "")


LOOP = HEAD + """dims: {k: 3}
blocks:
  b:
    inputs: [c]
    nodes:
      n: {kind: add, from: [c, c]}
    OUT
nodes:
  l: {kind: loop, body: b, steps: k, carry: {c: {CARRY, next: n}}}
outputs: {l: l}
"""


def test_carry_zeros_over_a_length_says_zeros_over() -> None:
    """carry zeros: N says N is a length and points to zeros_over."""
    d = _error(LOOP.replace("OUT", "outputs: {n: n}").replace("CARRY", "zeros: N")
               ).diagnostics[0]
    assert d.message == ("node 'l': zeros: 'N' is a length, known only when a batch arrives, "
                         "not a fixed size")
    assert d.hint == "start the carry with zeros_over: <items of length N> for zeros [N]"


def test_loop_steps_may_be_a_dims_name() -> None:
    """steps: k with k under dims runs k steps (it was taken for a missing node)."""
    g = loads_spec(LOOP.replace("OUT", "outputs: {n: n}").replace("CARRY", "zeros: 4"))
    assert g.node("l").types[""].dims == (3, 4)


def test_carry_of_an_unnamed_output_says_how_to_name_it() -> None:
    """A body with one unnamed output: the hint says to name it."""
    d = _error(LOOP.replace("OUT", "output: n").replace("CARRY", "zeros: 4")).diagnostics[0]
    assert d.message == "node 'l': carry 'c': body 'b' has no output 'n'"
    assert d.hint == "the body gives one unnamed 'output:'; name it: outputs: {n: <node>}"


def test_learned_location_scores_past_max_len_fail_located() -> None:
    """A forward longer than a learned location scorer's max_len names the node."""
    torch = pytest.importorskip("torch")
    import attngraph
    from attngraph.errors import LoweringError

    spec = (HEAD + "nodes:\n  s: {kind: scorer, fn: location, key: src, max_len: 4}\n"
            "outputs: {s: s}\n")
    model = attngraph.compile(spec, seed=0)
    with pytest.raises(LoweringError) as e:
        model(src=torch.randn(2, 6, 8), h=torch.randn(2, 8))
    assert "node 's' (scorer)" in str(e.value)
    assert "cover max_len 4 positions, but this input has 6 items" in str(e.value)


NO_CARRY = HEAD + """  q: {type: vectors, dim: 8, length: T}
blocks:
  b:
    inputs: [y, enc]
    nodes:
      s: {kind: scorer, fn: dot, query: y, key: enc}
      p: {kind: softmax, scores: s}
      z: {kind: readout, weights: p, values: enc}
    outputs: {z: z}
nodes:
  l: {kind: loop, body: b, steps: q, inputs: {enc: src}, feed: {y: {from: q}}}
  lq: {kind: linear, from: h, out: 8}
  s2: {kind: scorer, fn: dot, query: lq, key: src}
  p2: {kind: softmax, scores: s2}
  z2: {kind: readout, weights: p2, values: src}
outputs: {z: l.z, z2: z2}
"""


def test_loop_without_carry_is_not_recurrent(spec_file, cli) -> None:
    """describe: steps that pass nothing on are not recurrent; the unrolled view draws no
    visible arrow between them; a linear query is named as such."""
    path = spec_file(NO_CARRY)
    out = cli("describe", path).output
    assert "not recurrent  run once per step of loop 'l'" in out
    assert "a linear projection 'lq' of input 'h' (vector)" in out
    dot = cli("render", path, "--view", "unrolled").output
    steps = [ln for ln in dot.splitlines() if re.match(r'\s*"l\[[^]]*\]" -> "l\[', ln)]
    assert steps and all("invis" in ln for ln in steps)
