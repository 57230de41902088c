"""Rows read alone (attngraph/lower/runtime/rows.py): a value a formula reads at fixed
items alone (``take(h, 0, items)``, BERT's pooler) is made at those items alone, back
through the nodes that work on each item alone; the model computes what it computes
with every row made (outputs and gradients), on padded batches."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import attngraph
from attngraph.errors import AttnGraphError
from attngraph.frontend import loads_spec

SPEC = """
attngraph: 1
name: rows
dims: {{vocab: 20, d: 16, ff: 32}}
inputs:
  source: {{type: tokens, vocab: vocab}}
blocks:
  layer:
    inputs: [h]
    nodes:
      q: {{kind: queries, from: h, dim: d, heads: 2}}
      k: {{kind: keys, from: h, dim: d, heads: 2}}
      v: {{kind: values, from: h, dim: d, heads: 2}}
      s: {{kind: scorer, fn: scaled_dot, query: q, key: k}}
      p: {{kind: softmax, scores: s{mask}}}
      a: {{kind: readout, weights: p, values: v, out: d}}
      r: {{kind: add, from: [h, a]}}
      n: {{kind: norm, from: r}}
      f: {{kind: mlp, from: n, hidden: ff, out: d}}
      o: {{kind: add, from: [n, f]}}
    outputs: {{h: o, attention: p}}
nodes:
  x: {{kind: items, from: source, embed: d}}
  enc: {{kind: repeat, block: layer, times: 2, from: x}}
  first: {{kind: expr, formula: "{formula}"}}
  logits: {{kind: linear, from: first, out: vocab}}
outputs: {{logits: logits{outputs}}}
"""

B, N = 3, 7
ROOT = Path(__file__).resolve().parents[1]


def _model(formula: str = "take(enc, 0, items)", *, mask: str = "", outputs: str = "",
           fuse: bool = True) -> torch.nn.Module:
    text = SPEC.format(formula=formula, mask=mask, outputs=outputs)
    model = attngraph.compile(loads_spec(text), seed=0, fuse=fuse)
    model.eval()
    return model


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    mask = torch.ones(B, N, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, 2:] = False
    return {"source": torch.randint(1, 20, (B, N), generator=g), "source_mask": mask}


def _run(model: torch.nn.Module, rows: bool) -> tuple[dict[str, torch.Tensor],
                                                      dict[str, torch.Tensor]]:
    """Outputs and gradients, with the rows plan or with every row made."""
    plan = model.rows_plan
    if not rows:
        model.rows_plan = None
    try:
        model.zero_grad(set_to_none=True)
        out = model(**_batch())
        loss = sum((v.float() ** 2).sum() for v in out.values())
        loss.backward()
    finally:
        model.rows_plan = plan
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return {k: v.detach() for k, v in out.items()}, grads


def _same(model: torch.nn.Module) -> None:
    out, grads = _run(model, rows=True)
    ref, ref_grads = _run(model, rows=False)
    assert out.keys() == ref.keys()
    for k in ref:
        torch.testing.assert_close(out[k], ref[k], atol=1e-5, rtol=1e-5)
    assert grads.keys() == ref_grads.keys()
    for k in ref_grads:
        torch.testing.assert_close(grads[k], ref_grads[k], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("outputs", ["", ", heads: enc.attention"])
@pytest.mark.parametrize("row", [0, 3])
def test_the_last_layer_runs_on_the_row_read(row: int, outputs: str, fuse: bool) -> None:
    model = _model(f"take(enc, {row}, items)", outputs=outputs, fuse=fuse)
    plan = model.rows_plan
    assert plan is not None and plan.rows == (row,) and plan.sym == "N"
    assert "enc" in plan.on_rows
    last = plan.inner["enc"]
    # the residual, norm and MLP after the attention work on the row alone
    assert {"r", "n", "f", "o"} <= last.on_rows
    _same(model)


def test_two_rows() -> None:
    model = _model("take(enc, 0, items) + take(enc, 2, items)")
    assert model.rows_plan is not None and model.rows_plan.rows == (0, 2)
    _same(model)


def test_a_causal_softmax_runs_whole_and_the_rest_on_the_row() -> None:
    model = _model(mask=", mask: {causal: true}", outputs=", heads: enc.attention")
    last = model.rows_plan.inner["enc"]
    assert "p" not in last.on_rows and "s" not in last.on_rows
    assert {"a", "f"} <= last.on_rows  # the readout reads the causal weights' row
    _same(model)


@pytest.mark.parametrize("formula", ["take(enc, N - 1, items)",
                                     "take(enc, max(N - 3, 0), items)"])
def test_a_position_per_example_from_the_lengths(formula: str) -> None:
    """Each example's last real item (as a GPT-style classifier reads it), or one before
    it: a row per example, worked out from the lengths before the layers run."""
    model = _model(formula, outputs=", heads: enc.attention")
    plan = model.rows_plan
    assert plan is not None and plan.index is not None and plan.rows == ()
    assert {"a", "r", "n", "f", "o"} <= plan.inner["enc"].on_rows
    _same(model)


def test_a_position_per_example_outside_an_example_is_the_formulas_error() -> None:
    """An example without a real item has no last one: the take's own error, as when
    every row is made."""
    model = _model("take(enc, N - 1, items)")
    batch = _batch()
    batch["source_mask"][2] = False
    with pytest.raises(AttnGraphError, match="outside the table's axis") as rows:
        model(**batch)
    model.rows_plan = None
    with pytest.raises(AttnGraphError) as whole:
        model(**batch)
    assert str(rows.value) == str(whole.value)


def test_positions_read_from_values_are_no_rows() -> None:
    """A position a node's values decide is not known before the layers run: every row
    is made."""
    model = _model("take(enc, clamp(floor(sum(sum(x, items), features)), 0, 0), items)")
    assert model.rows_plan is None
    model(**_batch())


def test_a_value_also_read_whole_is_made_whole() -> None:
    model = _model(outputs=", h: enc")
    assert model.rows_plan is None or "enc" not in model.rows_plan.on_rows
    _same(model)


def test_a_row_past_the_batch_is_the_formulas_error() -> None:
    model = _model("take(enc, 9, items)")
    with pytest.raises(AttnGraphError, match="outside the table's axis") as rows:
        model(**_batch())
    model.rows_plan = None
    with pytest.raises(AttnGraphError) as whole:
        model(**_batch())
    assert str(rows.value) == str(whole.value)


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning",
                            "ignore::DeprecationWarning")
def test_tracing_runs_every_row() -> None:
    model = _model()
    batch = _batch()
    traced = torch.jit.trace(model, (batch["source"], batch["source_mask"]), strict=False)
    torch.testing.assert_close(traced(batch["source"], batch["source_mask"])["logits"],
                               model(**batch)["logits"], atol=1e-5, rtol=1e-5)


def test_bert_pools_the_first_row_of_its_last_layer() -> None:
    model = attngraph.compile(ROOT / "specs" / "real" / "bert.yaml", seed=0)
    plan = model.rows_plan
    assert plan is not None and plan.rows == (0,) and "stack" in plan.on_rows
    assert {"mlp", "n2"} <= plan.inner["stack"].on_rows


def _cut_at_the_stack(family: str, heads: bool,
                      formula: str = "take({stack}, 1, items) + take({stack}, 6, items)",
                      ) -> tuple[str, dict[str, int], dict[str, dict]]:
    """The real spec of ``family`` at a small size, up to its first repeat, whose rows 1
    and 6 a formula reads (6 is padding in two examples of the batch); with its
    weights an output, or out of the block's outputs."""
    import yaml

    doc = yaml.safe_load((ROOT / "specs" / "real" / f"{family}.yaml").read_text())
    kept: dict[str, dict] = {}
    for nid, node in doc["nodes"].items():
        kept[nid] = node
        if node.get("kind") == "repeat":
            stack = nid
            break
    kept["first"] = {"kind": "expr", "formula": formula.format(stack=stack)}
    kept["out"] = {"kind": "linear", "from": "first", "out": 5}
    doc["nodes"] = kept
    block = doc["blocks"][kept[stack]["block"]]
    doc["outputs"] = {"out": "out"}
    if heads:
        doc["outputs"]["heads"] = f"{stack}.attention"
    else:
        block["outputs"].pop("attention")
    doc.pop("train", None)
    read = " ".join(str(v) for node in kept.values() for v in node.values())
    doc["inputs"] = {k: v for k, v in doc["inputs"].items() if k in read}
    small = {"vocab": 50, "d": 32, "heads": 4, "ff": 64, "layers": 2, "n": 16, "inner": 32,
             "kv": 2, "kvd": 16}
    doc["dims"].update({k: v for k, v in small.items() if k in doc["dims"]})
    return yaml.safe_dump(doc, sort_keys=False), doc["dims"], doc["inputs"]


@pytest.mark.parametrize("heads", [True, False])
@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_causal_stack_classified_at_its_last_token(family: str, heads: bool) -> None:
    """GPT-2 and Llama read at each example's last real token (a sequence classifier's
    pooling): outputs and gradients as with every row made."""
    text, dims, inputs = _cut_at_the_stack(family, heads, "take({stack}, N - 1, items)")
    model = attngraph.compile(loads_spec(text), seed=0)
    plan = model.rows_plan
    assert plan is not None and plan.index is not None
    assert {"r1", "r2"} <= next(iter(plan.inner.values())).on_rows
    _equal_on_rows(model, dims, inputs)


@pytest.mark.parametrize("heads", [True, False])
@pytest.mark.parametrize("family", ["gpt2", "llama", "bert", "t5"])
def test_the_real_families_on_rows_equal_them_whole(family: str, heads: bool) -> None:
    """Causal attention (GPT-2, Llama) runs whole, its readout and the rest on the rows;
    T5's scores plus its bias run whole, its softmax on the rows when the weights are
    no output; rotary queries, grouped heads, SwiGLU's formula, RMS norms."""
    text, dims, inputs = _cut_at_the_stack(family, heads)
    model = attngraph.compile(loads_spec(text), seed=0)
    model.eval()
    plan = model.rows_plan
    assert plan is not None and plan.rows == (1, 6)
    last = next(iter(plan.inner.values()))
    assert {"r1", "r2"} <= last.on_rows
    if family in ("gpt2", "llama"):  # the readout of causal weights; not a fused one
        assert "p" not in last.on_rows and ("a" in last.on_rows) == heads
    if family == "t5":
        assert "sb" not in last.on_rows and ("p" in last.on_rows) == (not heads)
    _equal_on_rows(model, dims, inputs)


def _equal_on_rows(model: torch.nn.Module, dims: dict[str, int],
                   inputs: dict[str, dict]) -> None:
    """Outputs and gradients with the model's rows plan and without, on a padded batch
    of 9 items."""
    model.eval()
    plan = model.rows_plan
    g = torch.Generator().manual_seed(0)
    mask = torch.ones(B, 9, dtype=torch.bool)
    mask[1, 5:] = False
    mask[2, 4:] = False
    batch: dict[str, torch.Tensor] = {}
    for name, spec in inputs.items():
        high = dims[spec["vocab"]]
        batch[name] = torch.randint(0, high, (B, 9), generator=g)
        batch[f"{name}_mask"] = mask

    def run(rows: bool) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        model.rows_plan = plan if rows else None
        model.zero_grad(set_to_none=True)
        out = model(**batch)
        sum((v ** 2).sum() for v in out.values()).backward()
        return out, {n: p.grad.clone() for n, p in model.named_parameters()
                     if p.grad is not None}

    (out, grads), (ref, ref_grads) = run(True), run(False)
    for k in ref:
        torch.testing.assert_close(out[k], ref[k], atol=1e-5, rtol=1e-5)
    assert grads.keys() == ref_grads.keys()
    for k in ref_grads:
        torch.testing.assert_close(grads[k], ref_grads[k], atol=1e-5, rtol=1e-5)


def test_a_block_runs_its_body_on_the_rows() -> None:
    """A block (used once, not repeated) whose first output a formula reads at a row:
    its body runs on it, its weights output whole."""
    text = SPEC.format(formula="take(enc, 1, items)", mask="",
                       outputs=", heads: enc.attention").replace(
        "{kind: repeat, block: layer, times: 2, from: x}", "{kind: block, block: layer, from: x}")
    model = attngraph.compile(loads_spec(text), seed=0)
    model.eval()
    plan = model.rows_plan
    assert plan is not None and "enc" in plan.on_rows
    assert {"a", "r", "n", "f", "o"} <= plan.inner["enc"].on_rows
    _same(model)
