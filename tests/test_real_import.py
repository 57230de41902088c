"""`attngraph import`: a checkpoint through a spec's name map into a run directory.

Every refusal names the checkpoint's tensor and the spec's parameter with both shapes
(a missing, extra or wrongly-shaped tensor, an unfilled parameter), a configuration
the spec does not compute is refused at its key, and the run directory written is
read by load_run, drawn per layer and head over a text (with the model's tokenizer),
and trained on with --resume. Also: a repeat stacks its block's further outputs."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

transformers = pytest.importorskip(
    "transformers", reason="the real-model tests need transformers (pip install -e '.[dev]')")
from safetensors.torch import load_file, save_file  # noqa: E402

from attngraph.cli import main  # noqa: E402
from attngraph.errors import SpecError, TrainingError  # noqa: E402
from attngraph.frontend import loads_spec  # noqa: E402
from attngraph.realmodels import attend_text, import_model, load_model  # noqa: E402


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GPT-2 with random weights and a word-level tokenizer, saved."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=12, n_embd=16, n_layer=2, n_head=2, n_positions=16)
    path = tmp_path_factory.mktemp("gpt2")
    transformers.GPT2LMHeadModel(cfg).save_pretrained(path)
    words = ["<unk>", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "far", "and", "."]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>"
                                         ).save_pretrained(path)
    return path


def _edited(src: Path, dst: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    """A copy of the model directory with its tensors edited."""
    dst.mkdir()
    (dst / "config.json").write_text((src / "config.json").read_text())
    tensors = load_file(str(src / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def test_a_missing_tensor_names_it_and_the_parameter(gpt2_dir: Path, tmp_path: Path) -> None:
    """A tensor the name map reads that the checkpoint lacks: its name, the parameter
    and its shape."""
    src = _edited(gpt2_dir, tmp_path / "m", lambda t: t.pop("transformer.h.1.ln_2.bias"))
    with pytest.raises(TrainingError) as e:
        load_model(src)
    assert e.value.message == (
        "the checkpoint has no tensor 'h.1.ln_2.bias', which the name map reads into "
        "'nodes.stack.rounds.1.nodes.n2.bias' (16)")


def test_an_extra_tensor_is_refused(gpt2_dir: Path, tmp_path: Path) -> None:
    """A checkpoint tensor no rule reads (and ignore does not list) is refused by name."""
    src = _edited(gpt2_dir, tmp_path / "m",
                  lambda t: t.update({"transformer.h.0.adapter.weight": torch.zeros(4, 16)}))
    with pytest.raises(TrainingError) as e:
        load_model(src)
    assert e.value.message.startswith(
        "the checkpoint's tensor 'h.0.adapter.weight' (4, 16) is not read by the name map")


def test_a_wrongly_shaped_tensor_names_both_shapes(gpt2_dir: Path, tmp_path: Path) -> None:
    """A tensor of another shape than its parameter: both names, both shapes."""
    src = _edited(gpt2_dir, tmp_path / "m",
                  lambda t: t.update({"transformer.ln_f.weight": torch.ones(15)}))
    with pytest.raises(TrainingError) as e:
        load_model(src)
    assert e.value.message == ("tensor 'ln_f.weight' has shape (15), but parameter "
                               "'nodes.nf.weight' has (16)")
    assert str(e.value.loc).endswith("model.safetensors")


def test_a_setting_the_spec_does_not_compute_is_refused(gpt2_dir: Path, tmp_path: Path) -> None:
    """activation_function: relu is not GELU's tanh form: refused at the config key."""
    import json

    src = _edited(gpt2_dir, tmp_path / "m", lambda t: None)
    cfg = json.loads((src / "config.json").read_text())
    (src / "config.json").write_text(json.dumps({**cfg, "activation_function": "relu"}))
    with pytest.raises(SpecError, match="the model's activation_function is 'relu'; this spec "
                       "computes the model for 'gelu_new', 'gelu_pytorch_tanh' only"):
        load_model(src)
    llama = Path(__file__).resolve().parent.parent / "specs" / "real" / "llama.yaml"
    with pytest.raises(SpecError, match="model_type is 'gpt2', but the name map of llama.yaml"):
        load_model(gpt2_dir, spec=llama)


def test_cli_import_writes_a_run_that_commands_read(gpt2_dir: Path, tmp_path: Path) -> None:
    """`attngraph import` writes a run: load_run reads it with the imported weights, a
    second import into it is refused, attend_text draws it over the tokenizer's tokens,
    and training resumes from it."""
    import attngraph
    from attngraph.train.pictures.layers import token_ids

    out = tmp_path / "run"
    res = CliRunner().invoke(main, ["import", str(gpt2_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "gpt2 (vocab=12, d=16, heads=2, ff=64, layers=2, n=16)" in res.output
    run = attngraph.load_run(out)
    ref = load_model(gpt2_dir).model.state_dict()
    assert all(torch.equal(v, ref[k]) for k, v in run.model.state_dict().items())
    again = CliRunner().invoke(main, ["import", str(gpt2_dir), "--out", str(out)])
    assert again.exit_code == 1 and "holds a run already" in again.output
    assert token_ids(out, "the cat sat") == ([1, 2, 3], ["the", "cat", "sat"])
    assert attend_text(out, "the cat sat on the mat").stat().st_size > 0
    res = CliRunner().invoke(main, ["train", str(out / "spec.yaml"), "--out", str(out),
                                    "--resume", "--steps", "2", "--quiet"])
    assert res.exit_code == 0, res.output
    assert attngraph.load_run(out).checkpoint.step == 2
    # compile, describe, diff and render take the run directory for its spec
    res = CliRunner().invoke(main, ["compile", str(out), "--length", "4"])
    assert res.exit_code == 0 and res.output.startswith(f"{out}: gpt2"), res.output
    assert "outputs: logits (2, 4, 12)" in res.output, res.output
    res = CliRunner().invoke(main, ["describe", str(out)])
    assert res.exit_code == 0 and res.output.startswith(f"gpt2 ({out / 'spec.yaml'})"), \
        res.output
    real = Path(__file__).resolve().parents[1] / "specs" / "real" / "gpt2.yaml"
    res = CliRunner().invoke(main, ["diff", str(out), str(real)])
    assert res.exit_code == 0 and "vocab 12 vs 50257" in res.output, res.output
    res = CliRunner().invoke(main, ["render", str(out), "-o", str(tmp_path / "g.svg")])
    assert res.exit_code == 0 and (tmp_path / "g.svg").stat().st_size > 0, res.output


def test_a_run_without_tokenizer_reads_ids(gpt2_dir: Path, tmp_path: Path) -> None:
    """Without a tokenizer the text is ids; words are refused with a hint."""
    from attngraph.train.pictures.layers import token_ids

    src = _edited(gpt2_dir, tmp_path / "m", lambda t: None)
    import_model(src, tmp_path / "run")
    assert token_ids(tmp_path / "run", "3 1 4") == ([3, 1, 4], ["3", "1", "4"])
    with pytest.raises(TrainingError, match="its input is token ids"):
        token_ids(tmp_path / "run", "the cat")


REPEAT = """
attngraph: 1
name: stacked
dims: {d: 8}
inputs:
  x: {type: vectors, dim: d}
blocks:
  layer:
    inputs: [h]
    outputs: {h: r, attention: p}
    nodes:
      q: {kind: queries, from: h, heads: 2}
      k: {kind: keys, from: h, heads: 2}
      v: {kind: values, from: h, heads: 2}
      s: {kind: scorer, fn: scaled_dot, query: q, key: k}
      p: {kind: softmax, scores: s}
      a: {kind: readout, weights: p, values: v, out: d}
      r: {kind: add, from: [h, a]}
nodes:
  stack: {kind: repeat, block: layer, times: 3, from: x, share: SHARE}
outputs: {h: stack, weights: stack.attention}
"""


@pytest.mark.parametrize("share", ["false", "true"])
def test_a_repeat_stacks_its_blocks_further_outputs(share: str) -> None:
    """A repeat feeds the block's first output on and stacks the others over the
    rounds: [3, N, N] per head, each round's weights a distribution."""
    graph = loads_spec(REPEAT.replace("SHARE", share), "stacked.yaml")
    stack = graph.node("stack")
    assert str(stack.types["attention"]) == "[3, N, N] ×2"
    import attngraph

    model = attngraph.compile(graph)
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    out = model(x=x, x_mask=mask)
    assert out["weights"].shape == (2, 2, 3, 5, 5)
    assert torch.allclose(out["weights"][0].sum(-1), torch.ones(2, 3, 5))
