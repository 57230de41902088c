"""A repeat's ``inputs:``: block inputs bound to one value for every round (the
encoder's output each decoder layer reads), and the errors of binding them wrongly."""

from __future__ import annotations

import pytest
import torch

import attngraph
from attngraph.errors import AttnGraphError

SPEC = """\
attngraph: 1
name: rep
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
  m: {type: vectors, dim: d, length: M}
blocks:
  layer:
    inputs: [h, mem]
    nodes:
      q: {kind: queries, from: h}
      k: {kind: keys, from: mem}
      s: {kind: scorer, fn: dot, query: q, key: k}
      p: {kind: softmax, scores: s}
      z: {kind: readout, weights: p, values: mem}
      r: {kind: add, from: [h, z]}
    outputs: {h: r, cross: p}
nodes:
  dec: {kind: repeat, block: layer, times: 3, from: x, inputs: {mem: m}}
outputs: {y: dec, cross: dec.cross}
"""


def test_every_round_reads_the_bound_value() -> None:
    """Each round attends over the same memory (its padding masked) and feeds the
    next: the result is the rounds run one after another by hand."""
    model = attngraph.compile(SPEC, seed=0)
    x, m = torch.randn(2, 5, 8), torch.randn(2, 4, 8)
    mm = torch.tensor([[True] * 4, [True, True, False, False]])
    with torch.no_grad():
        out = model(x=x, m=m, m_mask=mm)
        h = x
        for i in range(3):
            r = model.nodes["dec"].rounds[i]
            q = r.nodes["q"].proj(h)
            k = r.nodes["k"].proj(m)
            s = (q @ k.transpose(1, 2)).masked_fill(~mm[:, None, :], float("-inf"))
            p = s.softmax(-1)
            torch.testing.assert_close(out["cross"][:, i], p, atol=1e-6, rtol=0)
            h = h + p @ m
    torch.testing.assert_close(out["y"], h, atol=1e-5, rtol=0)


@pytest.mark.parametrize(("old", "new", "col", "message"), [
    (", inputs: {mem: m}", "", 8, "its others bound under inputs: (0 here); 'layer' has 2"),
    ("inputs: {mem: m}", "inputs: {mem: m, h: m}", 64, "'h' is the input each round feeds"),
])
def test_binding_errors_are_located(old: str, new: str, col: int, message: str) -> None:
    """An input left unbound, or the fed input bound too, is one error at the repeat."""
    with pytest.raises(AttnGraphError) as err:
        attngraph.compile(SPEC.replace(old, new))
    d = err.value.diagnostics[0]
    assert message in d.message and d.hint
    assert (d.loc.line, d.loc.col) == (19, col)
