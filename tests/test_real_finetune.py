"""Fine-tuning an imported model on your own records (`attngraph train RUN/spec.yaml
--out RUN --resume --data FILE`): each record's text read by the run's tokenizer (else
as ids), and what the model learns following from its spec.

The objective is transformers' own: on the same records, the loss of a padded batch
equals the loss `transformers` computes with `labels=` (BERT's class, GPT-2's next
token, T5's target) to 1e-5. A few steps on a small pattern teach each family what
predict then gives back; a classifier whose configuration names no classes takes the
data's names, kept for predict, evaluate and the next resume. Records that do not fit
are one error at the record, the run untouched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip(
    "transformers", reason="the real-model tests need transformers (pip install -e '.[dev]')")

from attngraph.errors import TrainingError  # noqa: E402
from attngraph.realmodels import import_model  # noqa: E402
from attngraph.train.data.tokenized import tokenized_task  # noqa: E402
from attngraph.train.engine.step import task_loss  # noqa: E402
from attngraph.train.tasks.lookup import bind_inputs  # noqa: E402
from attngraph.train.trained.reloaded import load_run  # noqa: E402

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran"]
TEXTS = ["the cat sat on the mat", "a dog ran", "the dog sat", "a cat ran on the mat",
         "the cat", "a dog sat on a mat", "dog ran", "the mat"]


def _data(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _bert(src: Path, **labels: Any) -> Any:
    """A small BERT classifier (no dropout) with a word-level tokenizer, saved in ``src``."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=16, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0, **labels)
    model = transformers.BertForSequenceClassification(cfg).eval()
    model.save_pretrained(src)
    (src / "vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    transformers.BertTokenizer(str(src / "vocab.txt")).save_pretrained(src)
    return model


def _saved(src: Path, cls: Any, cfg: Any) -> Any:
    """A model of ``cls`` with random weights (seed 0) for ``cfg``, saved in ``src``."""
    torch.manual_seed(0)
    model = cls(cfg).eval()
    model.save_pretrained(src)
    return model


def _gpt2(src: Path, eos: int = 3) -> Any:
    """GPT-2 of 16 positions; ``eos`` 99 lies outside its vocabulary (no end id)."""
    return _saved(src, transformers.GPT2LMHeadModel, transformers.GPT2Config(
        vocab_size=40, n_embd=16, n_layer=2, n_head=2, n_positions=16, eos_token_id=eos,
        bos_token_id=eos, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))


def _llama(src: Path) -> Any:
    return _saved(src, transformers.LlamaForCausalLM, transformers.LlamaConfig(
        vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16,
        bos_token_id=1, eos_token_id=3))


def _t5(src: Path) -> Any:
    return _saved(src, transformers.T5ForConditionalGeneration, transformers.T5Config(
        vocab_size=40, d_model=16, d_kv=8, num_heads=2, d_ff=32, num_layers=2,
        num_decoder_layers=2, dropout_rate=0.0, eos_token_id=1, pad_token_id=0,
        decoder_start_token_id=0))


def _imported(tmp: Path, make: Any, *, lr: float = 1e-4, **kw: Any) -> tuple[Path, Any]:
    src = tmp / "src"
    model = make(src, **kw)
    run = tmp / "run"
    import_model(src, run, lr=lr)
    return run, model


def _train(cli: Any, run: Path, data: Path, *extra: object, code: int = 0) -> Any:
    return cli("train", run / "spec.yaml", "--out", run, "--resume", "--data", data,
               "--quiet", *extra, code=code)


def _our_loss(run: Path, data: Path, n: int) -> tuple[float, dict[str, torch.Tensor]]:
    """The loss of the imported model on the first ``n`` records of ``data`` (one padded
    batch), as training computes it, and that batch."""
    r = load_run(run)
    task = tokenized_task(r.graph, run, str(data), valid=str(data), seed=0)
    batch = task.batch(n, split="valid")
    with torch.no_grad():
        out = r.model(**bind_inputs(r.graph, task, batch))
    loss = task_loss(out, batch[task.target], graph=r.graph, objective=task.objective)
    return float(loss), batch


@pytest.mark.parametrize("by", ["name", "id"])
def test_a_classifiers_loss_is_transformers_with_labels(tmp_path: Path, by: str) -> None:
    """BERT with named classes: records of text and label (a name of its id2label, or
    a class id), through its tokenizer and padded, have transformers' loss with
    labels= (1e-5)."""
    names = {0: "neg", 1: "neutral", 2: "pos"}
    run, model = _imported(tmp_path, _bert, num_labels=3, id2label=names,
                           label2id={v: k for k, v in names.items()})
    rows = [{"text": t, "label": names[i % 3] if by == "name" else i % 3}
            for i, t in enumerate(TEXTS)]
    ours, _ = _our_loss(run, _data(tmp_path / "d.jsonl", rows), len(rows))
    tok = transformers.AutoTokenizer.from_pretrained(run / "tokenizer")
    enc = tok(TEXTS, padding=True, return_tensors="pt")
    with torch.no_grad():
        theirs = model(**enc, labels=torch.tensor([i % 3 for i in range(len(TEXTS))])).loss
    assert abs(ours - float(theirs)) < 1e-5


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_causal_decoders_loss_is_transformers_next_token_loss(tmp_path: Path,
                                                                family: str) -> None:
    """GPT-2 and Llama (runs without a tokenizer: ids): every token predicts the next,
    the text ending in the configuration's end id; padding scores nothing.
    transformers' loss with labels= the same ids (padding -100) is the same (1e-5)."""
    run, model = _imported(tmp_path, _gpt2 if family == "gpt2" else _llama)
    texts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14], [20, 21, 22, 23, 24, 25, 26]]
    rows = [{"text": " ".join(map(str, t))} for t in texts]
    ours, batch = _our_loss(run, _data(tmp_path / "d.jsonl", rows), len(rows))
    ids = [[*t, 3] for t in texts]  # the end id closes each text
    n = max(map(len, ids))
    x = torch.tensor([t + [0] * (n - len(t)) for t in ids])
    mask = torch.tensor([[1] * len(t) + [0] * (n - len(t)) for t in ids])
    assert torch.equal(batch["tokens"], x)
    with torch.no_grad():
        theirs = model(input_ids=x, attention_mask=mask, labels=x.masked_fill(mask == 0, -100))
    assert abs(ours - float(theirs.loss)) < 1e-5


def test_an_encoder_decoders_loss_is_transformers_with_labels(tmp_path: Path) -> None:
    """T5: the text is the encoder's, the target is learnt behind the decoder start id;
    transformers' loss with labels= the target's ids (padding -100) is the same (1e-5)."""
    run, model = _imported(tmp_path, _t5)
    pairs = [([5, 6, 7, 1], [7, 6, 5, 1]), ([9, 1], [9, 9, 9, 8, 1]), ([4, 4, 4, 1], [2, 1])]
    rows = [{"text": " ".join(map(str, s)), "target": " ".join(map(str, t))} for s, t in pairs]
    ours, batch = _our_loss(run, _data(tmp_path / "d.jsonl", rows), len(rows))
    assert batch["target"][1].tolist() == [0, 9, 9, 9, 8]  # shifted behind the start id
    bare = [{**r, "target": r["target"].removesuffix(" 1")} for r in rows]
    again, _ = _our_loss(run, _data(tmp_path / "bare.jsonl", bare), len(rows))
    assert again == ours  # ids without the end id: it is added, as the tokenizer adds it

    def padded(seqs: list[list[int]], fill: int) -> torch.Tensor:
        n = max(map(len, seqs))
        return torch.tensor([s + [fill] * (n - len(s)) for s in seqs])

    src = padded([s for s, _ in pairs], 0)
    with torch.no_grad():
        theirs = model(input_ids=src, attention_mask=(padded([s for s, _ in pairs], -1) >= 0),
                       labels=padded([t for _, t in pairs], -100)).loss
    assert abs(ours - float(theirs)) < 1e-5


def test_a_classifier_takes_the_datas_own_label_names(tmp_path: Path, cli: Any) -> None:
    """A configuration that names its classes only LABEL_0, LABEL_1: the data's own names
    become the classes' (sorted). A few steps teach them; predict and evaluate give the
    names; the next resume (its records again, from the checkpoint) keeps them; no
    data.json is written (the run reads records with its tokenizer)."""
    run, _ = _imported(tmp_path, _bert, num_labels=2)
    rows = [{"text": t, "label": "cats" if "cat" in t else "dogs"}
            for t in ["the cat sat on the mat", "a dog ran"] * 10]
    data = _data(tmp_path / "d.jsonl", rows)
    _train(cli, run, data, "--steps", "30", "--lr", "0.003")
    assert not (run / "data.json").exists()
    assert load_run(run).checkpoint.config["options"] == {"labels": ["cats", "dogs"]}
    got = load_run(run).predict([{"text": "the cat sat"}, {"text": "a dog ran"}])
    assert [r["prediction"] for r in got] == ["cats", "dogs"]
    assert set(got[0]["probabilities"]) == {"cats", "dogs"}
    report = load_run(run).evaluate(data)
    assert report["accuracy"] == 1.0
    cli("train", run / "spec.yaml", "--out", run, "--resume", "--steps", "32", "--quiet",
        code=0)
    assert load_run(run).checkpoint.step == 32
    assert load_run(run).checkpoint.config["options"] == {"labels": ["cats", "dogs"]}
    card = (run / "README.md").read_text(encoding="utf-8")
    assert "text read by the model's own tokenizer" in card and "data.json" not in card
    assert f"brought in by `attngraph import` from `{tmp_path / 'src'}` (a `bert`" in card


def test_a_causal_decoder_learns_to_go_on_and_stop(tmp_path: Path, cli: Any) -> None:
    """GPT-2 fine-tuned on a counting text: given its start, predict gives the rest
    and stops (the end id was learnt after each text)."""
    run, _ = _imported(tmp_path, _gpt2)
    rows = [{"text": "5 6 7 8 9"}, {"text": "20 21 22"}] * 10
    _train(cli, run, _data(tmp_path / "d.jsonl", rows), "--steps", "60", "--lr", "0.01")
    (row,) = load_run(run).predict([{"text": "5 6 7"}])
    assert row["prediction"] == "8 9" and row["generated"] == ["8", "9", "3"]


def test_an_encoder_decoder_learns_its_targets(tmp_path: Path, cli: Any) -> None:
    """T5 fine-tuned on text -> target pairs: predict gives each target, and evaluate
    scores an exact match of 1."""
    run, _ = _imported(tmp_path, _t5)
    rows = [{"text": "5 6 7 1", "target": "7 6 5 1"}, {"text": "9 8 1", "target": "8 9 1"}] * 10
    data = _data(tmp_path / "d.jsonl", rows)
    _train(cli, run, data, "--steps", "60", "--lr", "0.01")
    got = load_run(run).predict(rows[:2])
    assert [r["prediction"] for r in got] == ["7 6 5", "8 9"]
    assert load_run(run).evaluate(data)["exact_match"] == 1.0


def test_the_lr_given_to_an_import_is_taken(tmp_path: Path, cli: Any) -> None:
    """An import has trained no step: --lr (and --batch) given to its first training win
    over the import's, in the settings kept and in the optimizer."""
    run, _ = _imported(tmp_path, _gpt2)
    data = _data(tmp_path / "d.jsonl", [{"text": "5 6 7"}] * 10)
    _train(cli, run, data, "--steps", "2", "--lr", "0.02", "--batch", "4")
    ck = load_run(run).checkpoint
    assert ck.config["lr"] == 0.02 and ck.config["batch"] == 4
    assert ck.optimizer["param_groups"][0]["lr"] == 0.02


@pytest.mark.parametrize(("rows", "extra", "said", "where"), [
    ([{"text": "the cat", "label": "neg"}] * 9 + [{"text": "a dog", "label": "x"}], (),
     "label 'x' is not one of the model's classes (neg, pos)", ":10:"),
    ([{"text": "the cat", "label": "neg"}] * 9 + [{"text": "a dog"}], (),
     "this record has no column 'label' (its class)", ":10:"),
    ([{"text": "the cat", "label": str(i)} for i in range(10)], (),
     "but this classifier has 2 classes", ":1:"),
    ([{"text": "the cat " * 9, "label": "neg"}] * 10, (),
     "this model reads at most 16", ":1:"),
    ([{"words": "the cat", "y": "neg", "other": 1}] * 10, (),
     "the data has no column 'tokens' or 'text' for the model's text", ":1:"),
    ([{"text": "the cat", "label": "neg"}] * 10, ("--field", "source=text"),
     "--field source=text: this model reads no column as 'source'", "--field"),
    ([{"text": "the cat", "label": "neg"}] * 10, ("--tokenize", "char"),
     "reads text with its own tokenizer, not by --tokenize", "--tokenize"),
])
def test_records_that_do_not_fit_are_one_error_and_the_run_is_untouched(
        tmp_path: Path, cli: Any, rows: list[dict[str, Any]], extra: tuple[str, ...],
        said: str, where: str) -> None:
    """A label not among the model's named classes, a record without its label (fuzz
    surfaces data 3112/61), more labels than classes, a text
    longer than the model's positions, no text column, a --field the model does not
    read, --tokenize: one error, located, no traceback; the checkpoint as it was."""
    names = {0: "neg", 1: "pos"}
    run, _ = _imported(tmp_path, _bert, num_labels=2, id2label=names,
                       label2id={v: k for k, v in names.items()})
    if "classifier has 2" in said:  # a configuration that names no classes
        shutil.rmtree(run)
        run, _ = _imported(tmp_path / "plain", _bert, num_labels=2)
    before = (run / "checkpoint.pt").read_bytes()
    data = _data(tmp_path / "d.jsonl", rows)
    res = _train(cli, run, data, "--steps", "2", *extra, code=1)
    assert said in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert where in res.stderr.splitlines()[0]
    assert (run / "checkpoint.pt").read_bytes() == before


def test_an_encoder_decoder_needs_a_target_column(tmp_path: Path) -> None:
    """T5's records without a target: an error naming the decoder's column."""
    run, _ = _imported(tmp_path, _t5)
    data = _data(tmp_path / "d.jsonl", [{"text": "5 6 1"}] * 10)
    with pytest.raises(TrainingError, match="no 'target' column for the text the decoder"):
        tokenized_task(load_run(run).graph, run, str(data))


def test_blocks_of_one_token_are_refused(tmp_path: Path) -> None:
    """--blocks over records of one token and no end id: the held-out record makes no
    block of two, one error at it (not an empty validation set)."""
    run, _ = _imported(tmp_path, _gpt2, eos=99)
    data = _data(tmp_path / "d.jsonl", [{"text": "7"}] * 10)
    with pytest.raises(TrainingError, match="make 1 token: no block of two to learn"):
        tokenized_task(load_run(run).graph, run, str(data), blocks=4)


def test_a_one_token_text_without_an_end_id_is_refused(tmp_path: Path) -> None:
    """A causal decoder whose configuration's end id is outside its vocabulary (so no
    end closes a text): a text of one token has no next token, one error at it."""
    run, _ = _imported(tmp_path, _gpt2, eos=99)
    data = _data(tmp_path / "d.jsonl", [{"text": "5 6"}] * 9 + [{"text": "7"}])
    with pytest.raises(TrainingError, match="no next token to learn") as e:
        tokenized_task(load_run(run).graph, run, str(data), valid=str(data))
    assert e.value.diagnostics[0].loc.line == 10


def test_finetune_from_python_on_records_and_on_again(tmp_path: Path) -> None:
    """attngraph.finetune(RUN, records): the records are kept in the run (named by the
    step they start from) and read by its tokenizer; a later finetune without data
    trains on them again; records that do not fit are an error at <records>:N and
    leave no file behind."""
    import attngraph

    run, _ = _imported(tmp_path, _bert, num_labels=2)
    rows = [{"text": t, "label": "cats" if "cat" in t else "dogs"}
            for t in ["the cat sat on the mat", "a dog ran"] * 10]
    with pytest.raises(TrainingError) as e:
        attngraph.finetune(run, [*rows, {"text": "a cat", "label": "birds"}], steps=2)
    assert e.value.diagnostics[0].loc.file == "<records>"
    assert not list(run.glob("data-*.jsonl"))
    done = attngraph.finetune(run, rows, steps=30, lr=0.003, quiet=True)
    assert (run / "data-train-step0.jsonl").is_file()
    assert done.checkpoint.config["options"] == {"labels": ["cats", "dogs"]}
    assert done.labels == ["cats", "dogs"]
    more = attngraph.finetune(run, steps=34, quiet=True)
    assert more.checkpoint.step == 34
    assert more.checkpoint.config["data"]["data"] == str(run / "data-train-step0.jsonl")
    got = load_run(run).predict([{"text": "the cat sat"}, {"text": "a dog ran"}])
    assert [r["prediction"] for r in got] == ["cats", "dogs"]


@pytest.mark.parametrize("damage", ["json", "fifo", "link", "folder", "vocab"])
def test_a_damaged_tokenizer_is_one_error_at_it(tmp_path: Path, cli: Any, damage: str) -> None:
    """A tokenizer file that does not parse, a FIFO (never opened: no hang), a link, a
    folder, or a vocabulary without its unknown token (it loads, and fails on a word it
    lacks: fuzz rundir 3114/163): train --data and predict say so at the tokenizer (or
    the record), with the hint to import again (these were errors blamed on a plugin)."""
    import os

    run, _ = _imported(tmp_path, _bert, num_labels=2)
    f = run / "tokenizer" / ("vocab.txt" if damage == "vocab" else "tokenizer_config.json")
    if damage == "vocab":
        f.write_text(f.read_text(encoding="utf-8").replace("[UNK]\n", ""), encoding="utf-8")
    else:
        f.unlink()
    if damage == "json":
        f.write_text("{", encoding="utf-8")
    elif damage == "fifo":
        os.mkfifo(f)
    elif damage == "link":
        f.symlink_to(tmp_path / "src" / "config.json")
    elif damage == "folder":
        f.mkdir()
    data = _data(tmp_path / "d.jsonl", [{"text": "the zebra", "label": "a"}] * 10)
    for args in (["train", run / "spec.yaml", "--out", run, "--resume", "--data", data,
                  "--steps", "2"], ["predict", run, "--data", data]):
        res = cli(*args, code=1)
        first = res.stderr.splitlines()[0]
        at = str(data) + ":1:1" if damage == "vocab" else str(run / "tokenizer")
        assert first.startswith(at) and "tokenizer" in first, res.stderr
        assert "import the model again" in res.stderr and "Traceback" not in res.stderr


def test_truncate_reads_a_long_text_as_transformers_truncates(tmp_path: Path, cli: Any) -> None:
    """--truncate: a text longer than BERT's 16 positions is read by the ids transformers'
    tokenizer gives with truncation=True (its closing [SEP] kept), with transformers'
    loss; training says how many were cut, a resume keeps reading them so, predict marks
    its row and gives transformers' probabilities, evaluate notes it."""
    names = {0: "neg", 1: "pos"}
    run, model = _imported(tmp_path, _bert, num_labels=2, id2label=names,
                           label2id={v: k for k, v in names.items()})
    texts = ["the cat sat on the mat " * 4, "a dog ran", "the dog sat on a mat " * 3, "a cat"]
    rows = [{"text": t, "label": names[i % 2]} for i, t in enumerate(texts)]
    data = _data(tmp_path / "d.jsonl", rows * 3)
    r = load_run(run)
    with pytest.warns(UserWarning, match=r"12 of the 24 records .* first 16 are read"):
        task = tokenized_task(r.graph, run, str(data), valid=str(data), truncate=True)
    batch = task.batch(4, split="valid")
    tok = transformers.AutoTokenizer.from_pretrained(run / "tokenizer")
    enc = tok(texts, truncation=True, max_length=16, padding=True, return_tensors="pt")
    assert torch.equal(batch["tokens"], enc["input_ids"])
    with torch.no_grad():
        ours = task_loss(r.model(**bind_inputs(r.graph, task, batch)), batch[task.target],
                         graph=r.graph)
        theirs = model(**enc, labels=torch.tensor([0, 1, 0, 1])).loss
    assert abs(float(ours) - float(theirs)) < 1e-5
    res = _train(cli, run, data, "--steps", "2", "--truncate")
    assert "6 of the 12 records read" in res.stderr
    assert load_run(run).checkpoint.config["data"]["truncate"] is True
    _train(cli, run, data, "--steps", "3")  # the stored setting: cut again, not refused
    (row, short) = load_run(run).predict(rows[:2], truncate=True)
    assert row["truncated"] is True and "truncated" not in short
    with torch.no_grad():
        tuned = load_run(run).model
        one = tok(texts[0], truncation=True, max_length=16, return_tensors="pt")
        want = tuned(tokens=one["input_ids"], segments=one["token_type_ids"],
                     tokens_mask=one["attention_mask"].bool(),
                     segments_mask=one["attention_mask"].bool())["logits"][0].softmax(-1)
    got = torch.tensor([row["probabilities"][k] for k in ("neg", "pos")])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    with pytest.raises(TrainingError, match="reads at most 16"):
        load_run(run).predict(rows[:1])
    report = load_run(run).evaluate(data, truncate=True)
    assert any("6 of 12 records were longer" in n for n in report.notes)


def test_truncate_cuts_a_language_models_text_without_an_end(tmp_path: Path) -> None:
    """GPT-2 (16 positions), --truncate: a long text's first 16 ids, the last learnt as
    predicting nothing (no end id: the text goes on); a short text still ends in it."""
    run, _ = _imported(tmp_path, _gpt2)
    long = list(range(4, 24))
    data = _data(tmp_path / "d.jsonl", [{"text": " ".join(map(str, long))},
                                        {"text": "5 6 7"}] * 5)
    with pytest.warns(UserWarning, match="10 of the 20 records"):
        task = tokenized_task(load_run(run).graph, run, str(data), valid=str(data),
                              truncate=True)
    batch = task.batch(2, split="valid")
    assert batch["tokens"][0].tolist() == long[:16]
    assert batch["target"][0].tolist() == [*long[1:16], -100]
    assert batch["tokens"][1].tolist()[:4] == [5, 6, 7, 3]  # the end id closes it


def test_truncate_is_refused_for_a_run_that_is_not_an_import(tmp_path: Path, cli: Any) -> None:
    """A data run reads by its vocabulary: --truncate is one error at the option."""
    spec = Path(__file__).resolve().parents[1] / "specs" / "global_attention.yaml"
    data = _data(tmp_path / "d.jsonl", [{"text": "a b c", "label": "x"},
                                        {"text": "b c", "label": "y"}] * 5)
    res = cli("train", spec, "--data", data, "--out", tmp_path / "run", "--steps", "1",
              "--truncate", code=1)
    assert res.stderr.startswith("--truncate: error: --truncate reads texts by the positions")
    assert not (tmp_path / "run").exists()
    res = cli("train", spec, "--data", data, "--out", tmp_path / "run", "--steps", "1",
              "--blocks", "8", code=1)
    assert res.stderr.startswith("--blocks: error: --blocks reads texts by the positions")


def test_blocks_read_a_language_models_records_as_a_corpus(tmp_path: Path, cli: Any) -> None:
    """--blocks 8 (GPT-2 of 16 positions): the texts joined, each closed by the end id 3,
    cut into blocks of 8 (the last shorter), every token but a block's last learning the
    next; a text longer than the model reads is no error; the resume keeps the blocks;
    a classifier, or blocks longer than the positions, are refused at --blocks."""
    run, _ = _imported(tmp_path, _gpt2)
    texts = [list(range(4, 24)), [5, 6, 7]]
    data = _data(tmp_path / "d.jsonl", [{"text": " ".join(map(str, t))} for t in texts])
    task = tokenized_task(load_run(run).graph, run, str(data), valid=str(data), blocks=8)
    stream = [*texts[0], 3, *texts[1], 3]  # 25 ids: blocks of 8, 8, 8 and one left over
    assert len(task.train) == 3
    for i in range(3):
        item = task.train[i]
        assert item["tokens"].tolist() == stream[8 * i:8 * i + 8]
        assert item["y"].tolist() == [*stream[8 * i + 1:8 * i + 8], -100]
    rows = [{"text": " ".join(map(str, texts[0]))}] * 10
    _train(cli, run, _data(tmp_path / "c.jsonl", rows), "--steps", "2", "--blocks", "16")
    assert load_run(run).checkpoint.config["data"]["blocks"] == 16
    _train(cli, run, tmp_path / "c.jsonl", "--steps", "3")
    with pytest.raises(TrainingError, match=r"--blocks 17: a block must hold 2 to 16"):
        tokenized_task(load_run(run).graph, run, str(data), valid=str(data), blocks=17)
    bert, _ = _imported(tmp_path / "bert", _bert, num_labels=2)
    labelled = _data(tmp_path / "l.jsonl", [{"text": "the cat", "label": "a"}] * 10)
    with pytest.raises(TrainingError, match="joins a language model's texts, but this model "
                       "is a classifier"):
        tokenized_task(load_run(bert).graph, bert, str(labelled), blocks=8)
