"""Parameters shared between nodes (share) and a linear tied to an embedding table
(tie): counted once, one tensor in the module, and misuse located."""

from __future__ import annotations

import pytest

from attngraph.errors import ShapeError
from attngraph.frontend import loads_spec

SPEC = """attngraph: 1
name: t
dims: {vocab: 30, d: 8}
inputs:
  tok: {type: tokens, vocab: vocab}
  other: {type: tokens, vocab: vocab, length: M}
nodes:
  x:  {kind: items, from: tok, embed: d}
  e:  {kind: embedding, from: tok, dim: d}
  q:  {kind: queries, from: x}
  LINE
outputs: {o: x}
"""


@pytest.mark.parametrize(("line", "col", "message", "hint"), [
    ("y: {kind: items, from: other, embed: d, share: z}", 50,
     "node 'y': share names 'z', which is not a node here", "known: e, q, x"),
    ("y: {kind: queries, from: x, share: e}", 38,
     "node 'y': share: queries 'y' cannot use the parameters of embedding 'e'",
     "one kind"),
    ("y: {kind: queries, from: x, dim: 4, share: q}", 46,
     "node 'y': share: 'y' would have 36 parameters of its own, 'q' has 72", "one shape"),
    ("y: {kind: linear, from: q, out: 20, tie: x}", 44,
     "node 'y': tie: the table of 'x' is [30, 8], but this layer maps 8 features to 20",
     "out: 30"),
    ("y: {kind: linear, from: q, out: 30, tie: q}", 44,
     "node 'y': tie names 'q', which is not an embedding or items with embed", ""),
])
def test_misused_sharing_is_located(line: str, col: int, message: str, hint: str) -> None:
    """Each misuse: one error at the field's value, with a hint."""
    with pytest.raises(ShapeError) as e:
        loads_spec(SPEC.replace("LINE", line))
    d = e.value.diagnostics[0]
    assert (d.message, d.loc.line, d.loc.col) == (message, 11, col)
    assert hint in (d.hint or "")


def test_shared_and_tied_parameters_are_one_tensor_counted_once() -> None:
    """validate's count equals the module's; the sharing nodes use the owner's tensors,
    and training either place moves both."""
    torch = pytest.importorskip("torch")
    import attngraph

    text = SPEC.replace("LINE", "y: {kind: items, from: other, embed: d, share: x}\n"
                        "  out: {kind: linear, from: q, out: vocab, tie: x}").replace(
        "outputs: {o: x}", "outputs: {o: out, y: y}")
    graph = loads_spec(text)
    model = attngraph.compile(graph, seed=0)
    assert graph.params == sum(p.numel() for p in model.parameters())
    assert model.nodes["y"] is model.nodes["x"]
    assert model.nodes["out"].weight is model.nodes["x"].embed.weight
    tok = torch.randint(0, 30, (2, 4))
    out = model(tok=tok, other=tok)
    torch.testing.assert_close(out["y"], model.nodes["x"].embed(tok))
    out["o"].sum().backward()
    assert model.nodes["x"].embed.weight.grad is not None


def test_compile_counts_shared_parameters_once(tmp_path, cli) -> None:  # noqa: ANN001
    """`attngraph compile` lists a sharing node as sharing, and totals what validate does."""
    pytest.importorskip("torch")
    import re
    from pathlib import Path


    spec = Path(__file__).resolve().parent.parent / "mechanisms" / "perceiver.yaml"
    out = cli("compile", spec).output
    assert re.search(r"^  l2 +block +0  shares those of l1$", out, re.M), out
    total = re.search(r"^parameters: ([\d,]+)$", out, re.M).group(1)
    val = cli("validate", spec).output
    assert f"parameters: {total}" in val
