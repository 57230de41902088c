"""`attngraph attend RUN --input TEXT` on an imported model: the picture is every
layer's and head's weights over the text's tokens (the run's tokenizer, else ids), and
the weights drawn are `transformers`' own (output_attentions) for that text; bad input
(words without a tokenizer, ids outside the vocabulary, a text longer than the model
reads, a layer or head the model lacks, no text) is one located error."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import pytest
import torch
from click.testing import CliRunner

transformers = pytest.importorskip(
    "transformers", reason="the real-model tests need transformers (pip install -e '.[dev]')")

from attngraph.cli import main  # noqa: E402
from attngraph.errors import TrainingError  # noqa: E402
from attngraph.realmodels import import_model  # noqa: E402
from attngraph.train.pictures.layers import heads_figure, text_attention  # noqa: E402

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
         "a", "dog", "ran", "far", "and", "."]
TEXT = "the cat sat on the mat and a dog ran far ."


def _gpt2(path: Path) -> transformers.PreTrainedModel:
    """A tiny GPT-2 (random weights, eager attention) with a word-level tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=len(WORDS), n_embd=16, n_layer=3, n_head=2,
                                  n_positions=16, attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.save_pretrained(path)
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]"
                                         ).save_pretrained(path)
    return model


def _bert(path: Path) -> transformers.PreTrainedModel:
    """A tiny BERT (random weights, eager attention) with a WordPiece tokenizer."""
    torch.manual_seed(1)
    cfg = transformers.BertConfig(vocab_size=len(WORDS), hidden_size=32, intermediate_size=48,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  max_position_embeddings=32, num_labels=2,
                                  attn_implementation="eager")
    model = transformers.BertForSequenceClassification(cfg).eval()
    model.save_pretrained(path)
    (path / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    transformers.BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(path)
    return model


@pytest.fixture(scope="module", params=["gpt2", "bert"])
def imported(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[str, object, Path]:
    """(family, the transformers model, its imported run with the tokenizer)."""
    src = tmp_path_factory.mktemp(request.param)
    model = (_gpt2 if request.param == "gpt2" else _bert)(src)
    run = tmp_path_factory.mktemp("run") / "run"
    import_model(src, run)
    return request.param, model, run


def _reference(model: object, run: Path) -> tuple[list[int], torch.Tensor]:
    """The text's ids by the model directory's own tokenizer, and transformers' weights
    over them, ``(heads, layers, N, N)``."""
    tok = transformers.AutoTokenizer.from_pretrained(str(run / "tokenizer"))
    ids = tok(TEXT, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        ref = model(input_ids=ids, output_attentions=True).attentions  # type: ignore[operator]
    return ids[0].tolist(), torch.stack(ref, 2)[0]


def _panels(fig: object) -> list:
    """The picture's heatmaps (its colour bar aside)."""
    return [ax for ax in fig.axes if ax.images and ax.get_title()]  # type: ignore[attr-defined]


def test_the_pictures_weights_are_transformers_own(imported: tuple) -> None:
    """Every panel of the picture (layer row, head column) holds transformers'
    output_attentions for that layer and head over the text's tokens, to 1e-5, on one
    colour scale up to the largest weight; the axes show the tokenizer's tokens."""
    family, model, run = imported
    ids, ref = _reference(model, run)
    att = text_attention(run, TEXT)
    assert att.ids == ids
    assert att.weights.shape == ref.shape
    assert (att.weights - ref).abs().max() < 1e-5
    if family == "bert":
        assert att.tokens[0] == "[CLS]" and att.tokens[-1] == "[SEP]"
    fig = heads_figure(att)
    axes = _panels(fig)
    assert len(axes) == att.layers * att.heads
    for ax in axes:
        layer, head = (int(w) for w in ax.get_title().split()[1::2])
        drawn = torch.as_tensor(ax.images[0].get_array())
        assert (drawn - ref[head, layer]).abs().max() < 1e-5, ax.get_title()
        assert ax.images[0].get_clim() == pytest.approx((0.0, float(ref.max())), abs=1e-5)
    assert [t.get_text() for t in axes[-1].get_xticklabels()] == att.tokens


def test_cli_attend_draws_the_imported_run_over_the_text(imported: tuple,
                                                         tmp_path: Path) -> None:
    """`attngraph attend RUN --input TEXT -o FILE` writes the picture and names its view;
    --layer and --head pick the panels drawn."""
    _, _, run = imported
    out = tmp_path / "heads.png"
    res = CliRunner().invoke(main, ["attend", str(run), "--input", TEXT, "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == f"{out} (layers)"
    assert out.stat().st_size > 0
    att = text_attention(run, TEXT)
    fig = heads_figure(att, layers=[1], heads=[0, att.heads - 1])
    assert [ax.get_title() for ax in _panels(fig)] == ["layer 1 head 0",
                                                   f"layer 1 head {att.heads - 1}"]
    one = tmp_path / "one.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # titles as text, to read back
        res = CliRunner().invoke(main, ["attend", str(run), "--input", TEXT, "--layer", "1",
                                        "--head", "0", "-o", str(one)])
    assert res.exit_code == 0, res.output
    titles = re.findall(r">(layer \d+ head \d+)<", one.read_text())
    assert titles == ["layer 1 head 0"]  # the one panel asked for


def _error(args: list[str]) -> str:
    """The output of a command that must fail with one located error (no traceback)."""
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    assert "Traceback" not in res.output
    return res.output


def test_a_layer_or_head_the_model_lacks_is_refused(imported: tuple) -> None:
    """--layer 7 of a model of fewer layers: the error gives the layers it has."""
    _, _, run = imported
    att = text_attention(run, TEXT)
    out = _error(["attend", str(run), "--input", TEXT, "--layer", "7"])
    assert f"--layer 7 is not a layer of this model (it has {att.layers}, 0 to " in out
    out = _error(["attend", str(run), "--input", TEXT, "--head", "9"])
    assert f"--head 9 is not a head of this model (it has {att.heads}" in out


def test_an_imported_run_needs_a_text(imported: tuple, tmp_path: Path) -> None:
    """Without --input an imported run says to give one; --layer on a run that is not an
    import is refused rather than ignored."""
    _, _, run = imported
    assert "is drawn over one text (no --input given)" in _error(["attend", str(run)])
    assert "--input" in _error(["attend", str(run)])
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "the cat"}\n', encoding="utf-8")
    assert "both --input and --data" in _error(["attend", str(run), "--input", TEXT,
                                                "--data", str(data)])
    assert "--example 3: the data has 1 records" in _error(["attend", str(run), "--data",
                                                            str(data), "--example", "3"])
    plain = tmp_path / "plain"
    plain.mkdir()
    assert "picks a layer or head of an imported model" in _error(
        ["attend", str(plain), "--layer", "0"])


def test_a_record_of_a_data_file_is_drawn_as_its_text(imported: tuple, tmp_path: Path) -> None:
    """--data FILE --example N draws record N's text: the same picture as --input of it."""
    _, _, run = imported
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a dog"}\n{"text": "%s", "label": 1}\n' % TEXT, encoding="utf-8")
    for args in (["--data", str(data), "--example", "1", "-o", str(tmp_path / "rec.png")],
                 ["--input", TEXT, "-o", str(tmp_path / "own.png")]):
        res = CliRunner().invoke(main, ["attend", str(run), *args])
        assert res.exit_code == 0, res.output
    assert (tmp_path / "rec.png").read_bytes() == (tmp_path / "own.png").read_bytes()


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An imported GPT-2 run without a tokenizer (16 positions, vocabulary 16)."""
    src = tmp_path_factory.mktemp("bare")
    _gpt2(src)
    for f in src.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            f.unlink()
    run = tmp_path_factory.mktemp("run") / "run"
    import_model(src, run)
    assert not (run / "tokenizer").exists()
    return run


def test_without_a_tokenizer_the_text_is_ids(bare: Path) -> None:
    """A run without tokenizer/ reads the text as ids, shown as themselves; words, ids
    outside the vocabulary and a text longer than the model's positions are refused."""
    att = text_attention(bare, "3 1 4 1 5")
    assert att.ids == [3, 1, 4, 1, 5] and att.tokens == ["3", "1", "4", "1", "5"]
    assert "its input is token ids, not 'the cat'" in _error(
        ["attend", str(bare), "--input", "the cat"])
    assert "token ids must lie in 0 … 15, but the input has 99" in _error(
        ["attend", str(bare), "--input", "3 99"])
    long = " ".join(["1"] * 17)
    with pytest.raises(TrainingError, match="the input is 17 tokens long, but this model "
                       "reads at most 16") as e:
        text_attention(bare, long)
    assert e.value.loc.file == "--input"
