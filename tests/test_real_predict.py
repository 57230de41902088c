"""`attngraph predict` of an imported model: each record's text through the model's own
tokenizer (else read as ids), and the prediction `transformers` makes of it.

A classifier (BERT) gives the label its configuration names and every label's
probability, equal to the softmax of `transformers`' logits; a causal decoder (GPT-2)
the tokens `transformers`' greedy `generate` adds after the text, stopping at the end
id; an encoder–decoder (T5) the tokens it generates from the text. Records that do not
read are one error at the record."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

transformers = pytest.importorskip(
    "transformers", reason="the real-model tests need transformers (pip install -e '.[dev]')")

from attngraph.cli import main  # noqa: E402
from attngraph.errors import TrainingError  # noqa: E402
from attngraph.realmodels import import_model  # noqa: E402
from attngraph.train.trained.imported import predict_imported  # noqa: E402
from attngraph.train.trained.reloaded import load_run  # noqa: E402

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran"]


def _tokenizer(path: Path) -> None:
    """A word-level BERT tokenizer over WORDS, saved in ``path``."""
    (path / "vocab.txt").write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    transformers.BertTokenizer(str(path / "vocab.txt")).save_pretrained(path)


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A small BERT classifier with named labels and a tokenizer, imported."""
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32,
                                  max_position_embeddings=32, num_labels=3,
                                  id2label={0: "neg", 1: "neutral", 2: "pos"},
                                  label2id={"neg": 0, "neutral": 1, "pos": 2})
    model = transformers.BertForSequenceClassification(cfg).eval()
    src = tmp_path_factory.mktemp("bert")
    model.save_pretrained(src)
    _tokenizer(src)
    run = tmp_path_factory.mktemp("runs") / "bert"
    import_model(src, run)
    return run, model


def _data(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_classifier_gives_its_labels_and_transformers_probabilities(
        bert: tuple[Path, object], tmp_path: Path) -> None:
    """Each text through the run's tokenizer: the label of the largest logit by the
    configuration's id2label, and probabilities equal to transformers' softmax (1e-5);
    the record's own label is kept beside them."""
    run, model = bert
    texts = ["the cat sat on the mat", "a dog ran", "the dog"]
    data = _data(tmp_path / "d.jsonl", [{"text": t, "label": "pos"} for t in texts])
    rows = load_run(run).predict(data, batch=2)
    tok = transformers.AutoTokenizer.from_pretrained(run / "tokenizer")
    for t, row in zip(texts, rows, strict=True):
        enc = tok(t, return_tensors="pt")
        with torch.no_grad():
            want = model(**enc).logits[0].softmax(-1)
        got = torch.tensor([row["probabilities"][k] for k in ("neg", "neutral", "pos")])
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        assert row["prediction"] == ("neg", "neutral", "pos")[int(want.argmax())]
        assert row["label"] == "pos" and row["line"] == texts.index(t) + 1


def test_attention_is_every_layers_weights_heads_averaged(
        bert: tuple[Path, object], tmp_path: Path) -> None:
    """--attention: [layers, N, N] over the text's tokens, transformers' attentions
    averaged over the heads, with the tokens the tokenizer made."""
    run, model = bert
    data = _data(tmp_path / "d.jsonl", [{"text": "the cat sat"}, {"text": "a dog"}])
    rows = load_run(run).predict(data, attention=True)
    tok = transformers.AutoTokenizer.from_pretrained(run / "tokenizer")
    src = tmp_path / "eager"
    model.save_pretrained(src)  # the same weights, with the eager attention that gives them
    eager = transformers.BertForSequenceClassification.from_pretrained(
        src, attn_implementation="eager").eval()
    for text, row in zip(("the cat sat", "a dog"), rows, strict=True):
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            atts = eager(**enc, output_attentions=True).attentions
        want = torch.stack([a[0].mean(0) for a in atts])  # (layers, N, N)
        torch.testing.assert_close(torch.tensor(row["attention"]), want, atol=1e-5, rtol=0)
        assert row["tokens"] == tok.convert_ids_to_tokens(enc["input_ids"][0])


def test_the_cli_writes_one_json_line_per_record(bert: tuple[Path, object],
                                                 tmp_path: Path) -> None:
    """attngraph predict RUN --data FILE on an imported run, and the same texts given
    by --input; one of the two, not both."""
    run, _ = bert
    data = _data(tmp_path / "d.jsonl", [{"text": "the cat"}, {"text": "a dog ran"}])
    res = CliRunner().invoke(main, ["predict", str(run), "--data", str(data)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert [r["index"] for r in rows] == [0, 1]
    assert all(set(r["probabilities"]) == {"neg", "neutral", "pos"} for r in rows)
    given = CliRunner().invoke(main, ["predict", str(run), "--input", "the cat",
                                      "--input", "a dog ran"])
    assert given.exit_code == 0, given.output
    assert [json.loads(line) for line in given.output.splitlines()] == rows
    for args in ([], ["--data", str(data), "--input", "the cat"]):
        res = CliRunner().invoke(main, ["predict", str(run), *args])
        assert res.exit_code == 2 and "--data FILE, or one or more --input TEXT" in res.output
    # from Python, texts are records too; anything else is one error at it
    texts = load_run(run).predict(["the cat", {"text": "a dog ran"}])
    assert [{k: r[k] for k in ("prediction", "probabilities")} for r in texts] == \
        [{k: r[k] for k in ("prediction", "probabilities")} for r in rows]
    with pytest.raises(TrainingError) as e:
        load_run(run).predict(["the cat", 5])
    assert e.value.diagnostics[0].loc.line == 2 and "of type int" in str(e.value)


def test_a_record_without_text_is_one_error_at_it(bert: tuple[Path, object],
                                                  tmp_path: Path) -> None:
    """A record with neither a 'tokens' nor a 'text' column (and more than one column):
    an error at its line naming the columns it has."""
    run, _ = bert
    data = _data(tmp_path / "d.jsonl", [{"text": "the cat"}, {"words": "a dog", "y": 1}])
    with pytest.raises(TrainingError) as e:
        load_run(run).predict(data)
    d = e.value.diagnostics[0]
    assert d.loc.line == 2 and "columns: words, y" in d.message and d.hint


def _gpt2(tmp_path: Path, eos: int) -> tuple[Path, object]:
    torch.manual_seed(1)
    cfg = transformers.GPT2Config(vocab_size=20, n_embd=16, n_layer=2, n_head=2, n_positions=24,
                                  eos_token_id=eos, bos_token_id=eos)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    model.save_pretrained(tmp_path / "gpt2")
    import_model(tmp_path / "gpt2", tmp_path / "run")
    return tmp_path / "run", model


def test_a_causal_decoder_continues_each_text_as_transformers_does(tmp_path: Path) -> None:
    """GPT-2 without a tokenizer reads ids; its prediction is the tokens transformers'
    greedy generate adds after them (the end id dropped from the text)."""
    run, model = _gpt2(tmp_path, eos=3)
    prompts = [[5, 6, 7], [8, 9], [11, 12, 13, 14]]
    data = _data(tmp_path / "d.jsonl", [{"text": " ".join(map(str, p))} for p in prompts])
    rows = load_run(run).predict(data, max_length=6, batch=3)
    for p, row in zip(prompts, rows, strict=True):
        ids = torch.tensor([p])
        want = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6,
                              do_sample=False, eos_token_id=3, pad_token_id=3)[0, len(p):]
        want = want.tolist()
        if 3 in want:
            want = want[:want.index(3) + 1]
        assert row["generated"] == [str(t) for t in want]
        assert row["prediction"] == " ".join(str(t) for t in want if t != 3)


def test_generation_stays_within_the_models_positions(tmp_path: Path) -> None:
    """A causal decoder's text and what it adds share its 24 positions: the default
    budget (twice the text, plus 2) is cut to what is left, and a text that fills
    them is refused at its record."""
    run, _ = _gpt2(tmp_path, eos=19)
    data = _data(tmp_path / "d.jsonl", [{"text": " ".join(["5"] * 10)}])
    (row,) = load_run(run).predict(data)
    assert len(row["generated"]) <= 24 - 10
    full = _data(tmp_path / "f.jsonl", [{"text": "5 6"}, {"text": " ".join(["5"] * 24)}])
    with pytest.raises(TrainingError) as e:
        load_run(run).predict(full)
    assert "no room is left" in e.value.diagnostics[0].message
    assert e.value.diagnostics[0].loc.line == 2  # the record that fills them


def test_a_texts_prediction_does_not_depend_on_its_batch(tmp_path: Path) -> None:
    """The default budget is each text's own (twice it, plus 2, within the positions):
    a short text gives the same tokens alone as in a batch beside a long one."""
    run, _ = _gpt2(tmp_path, eos=19)  # (an end id these weights do not reach)
    recs = [{"text": "5"}, {"text": " ".join(map(str, range(5, 15)))}]
    for beam in (1, 2):
        alone = [load_run(run).predict([r], beam=beam)[0] for r in recs]
        both = load_run(run).predict(recs, batch=2, beam=beam)
        budgets = [2 * 1 + 2, 24 - 10]
        assert all(len(r["generated"]) <= n for r, n in zip(alone, budgets, strict=True))
        if beam == 1:  # (greedy does not reach the end id on these weights)
            assert [len(r["generated"]) for r in alone] == budgets
        for a, b in zip(alone, both, strict=True):
            assert a["generated"] == b["generated"]
            assert a["score"] == pytest.approx(b["score"], abs=1e-5)


def _t5(tmp_path: Path, seed: int) -> object:
    """A tiny T5 (end id 1, padding and decoder start 0) at ``seed``, imported into
    ``tmp_path / "run"``; transformers' model."""
    torch.manual_seed(seed)
    cfg = transformers.T5Config(vocab_size=24, d_model=16, d_kv=8, d_ff=32, num_layers=2,
                                num_decoder_layers=2, num_heads=2,
                                relative_attention_num_buckets=8,
                                relative_attention_max_distance=16, decoder_start_token_id=0,
                                eos_token_id=1, pad_token_id=0)
    model = transformers.T5ForConditionalGeneration(cfg).eval()
    model.save_pretrained(tmp_path / "t5")
    import_model(tmp_path / "t5", tmp_path / "run")
    return model


def test_an_encoder_decoder_generates_from_each_text(tmp_path: Path) -> None:
    """T5 from ids: the tokens transformers' greedy generate gives for the source."""
    model = _t5(tmp_path, seed=2)
    sources = [[5, 6, 7, 1], [9, 10, 1]]
    data = _data(tmp_path / "d.jsonl", [{"text": " ".join(map(str, s))} for s in sources])
    rows = load_run(tmp_path / "run").predict(data, max_length=5)
    for s, row in zip(sources, rows, strict=True):
        ids = torch.tensor([s])
        want = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5,
                              do_sample=False)[0, 1:].tolist()  # after the start id
        if 1 in want:
            want = want[:want.index(1) + 1]
        want = [t for t in want if t != 0]  # (transformers pads finished rows)
        assert row["generated"] == [str(t) for t in want]


def test_evaluate_scores_a_classifier_against_the_records_labels(
        bert: tuple[Path, object], tmp_path: Path) -> None:
    """Labels by name or id: the loss is the mean cross-entropy of transformers'
    probabilities at them, the accuracy the share where its argmax is the label; a
    label the model does not name is one error at its record."""
    run, model = bert
    recs = [{"text": "the cat sat", "label": "pos"}, {"text": "a dog ran", "label": 0},
            {"text": "the mat", "label": "neutral"}]
    report = load_run(run).evaluate(_data(tmp_path / "d.jsonl", recs))
    tok = transformers.AutoTokenizer.from_pretrained(run / "tokenizer")
    want_loss, right = 0.0, 0
    for rec, k in zip(recs, (2, 0, 1), strict=True):
        with torch.no_grad():
            p = model(**tok(rec["text"], return_tensors="pt")).logits[0].softmax(-1)
        want_loss -= float(p[k].log()) / 3
        right += int(p.argmax()) == k
    assert report["examples"] == 3
    assert report["loss"] == pytest.approx(want_loss, abs=1e-4)
    assert report["accuracy"] == pytest.approx(right / 3)
    assert report.classes is not None and sum(report.classes.support) == 3
    res = CliRunner().invoke(main, ["evaluate", str(run), "--data",
                                    str(_data(tmp_path / "e.jsonl", recs))])
    assert res.exit_code == 0 and "accuracy" in res.output, res.output
    with pytest.raises(TrainingError) as e:
        load_run(run).evaluate(_data(tmp_path / "b.jsonl", [{"text": "a", "label": "happy"}]))
    assert "'happy' is not one of the model's (neg, neutral, pos)" in e.value.diagnostics[0].message


def test_evaluate_gives_a_language_models_loss_and_perplexity(tmp_path: Path) -> None:
    """Texts without a target: a causal decoder's report is its loss on them, the mean
    cross-entropy of every next token (the end id closing each text), which is
    transformers' labels= loss weighted by the tokens each text scores, and
    exp(loss); the same at any batch size. With targets, the generation figures too;
    a target on some records only is an error at the first without."""
    run, model = _gpt2(tmp_path, eos=3)
    texts = [[5, 6, 7, 8], [9, 10], [11, 12, 13]]
    data = _data(tmp_path / "d.jsonl", [{"text": " ".join(map(str, t))} for t in texts])
    total, tokens = 0.0, 0
    for t in texts:
        ids = torch.tensor([[*t, 3]])
        with torch.no_grad():
            total += float(model(input_ids=ids, labels=ids).loss) * len(t)
        tokens += len(t)
    want = total / tokens
    for batch in (1, 16):
        report = load_run(run).evaluate(data, batch=batch)
        assert report["loss"] == pytest.approx(want, abs=1e-5)
        assert report["perplexity"] == pytest.approx(math.exp(want), rel=1e-5)
        assert report["tokens"] == tokens and "exact_match" not in report
    recs = [{"text": "5 6", "target": "7"}, {"text": "9 10", "target": "11 12"}]
    both = load_run(run).evaluate(_data(tmp_path / "t.jsonl", recs), max_length=2)
    assert {"loss", "perplexity", "exact_match", "bleu"} <= set(both)
    with pytest.raises(TrainingError) as e:
        load_run(run).evaluate(_data(tmp_path / "m.jsonl", [*recs, {"text": "5 6"}]))
    assert e.value.diagnostics[0].loc.line == 3
    assert "no 'target'" in e.value.diagnostics[0].message


def test_evaluate_gives_an_encoder_decoders_loss_of_each_target(tmp_path: Path) -> None:
    """T5: the loss is the cross-entropy of each target (the end id closing it) given
    its source, transformers' labels= loss weighted by the target's tokens; a record
    without a target is an error (the loss reads it)."""
    model = _t5(tmp_path, seed=3)
    pairs = [([5, 6, 7], [8, 9]), ([10, 11], [12, 13, 14])]
    recs = [{"text": " ".join(map(str, s)), "target": " ".join(map(str, t))} for s, t in pairs]
    report = load_run(tmp_path / "run").evaluate(_data(tmp_path / "d.jsonl", recs),
                                                 max_length=4)
    total = 0.0
    for src, tgt in pairs:
        with torch.no_grad():
            total += float(model(input_ids=torch.tensor([src]),
                                 labels=torch.tensor([[*tgt, 1]])).loss) * (len(tgt) + 1)
    assert report["tokens"] == 2 + 1 + 3 + 1
    assert report["loss"] == pytest.approx(total / report["tokens"], abs=1e-5)
    assert "exact_match" in report
    with pytest.raises(TrainingError) as e:
        load_run(tmp_path / "run").evaluate(_data(tmp_path / "n.jsonl", [{"text": "5 6"}]))
    assert "no 'target'" in e.value.diagnostics[0].message


def test_evaluate_scores_generated_text_against_the_target(tmp_path: Path) -> None:
    """A generating model's records give the text it should generate: the exact match
    counts the records whose generated tokens (the end one left out) are the target's."""
    run, _ = _gpt2(tmp_path, eos=3)
    prompts = [[5, 6, 7], [8, 9]]
    data = _data(tmp_path / "d.jsonl", [{"text": " ".join(map(str, p))} for p in prompts])
    got = [r["generated"] for r in load_run(run).predict(data, max_length=4)]
    targets = [" ".join(t for t in got[0] if t != "3"), "1 2"]  # right, then wrong
    recs = [{"text": " ".join(map(str, p)), "target": t}
            for p, t in zip(prompts, targets, strict=True)]
    report = load_run(run).evaluate(_data(tmp_path / "t.jsonl", recs), max_length=4)
    assert report["exact_match"] == pytest.approx(0.5) and "bleu" in report


def test_the_python_api_of_a_reloaded_import_reads_with_its_tokenizer(
        bert: tuple[Path, object]) -> None:
    """load_run(RUN).predict on an imported run is predict_imported's (it pointed at it
    with an error before)."""
    run = load_run(bert[0])
    recs = [{"text": "the cat"}, {"text": "a dog ran"}]
    assert run.imported
    assert run.predict(recs) == predict_imported(run, recs)


def test_a_damaged_import_json_is_one_error_at_it(bert: tuple[Path, object],
                                                   tmp_path: Path) -> None:
    """import.json that is not JSON: one error at the file saying to import again."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(bert[0], run)
    (run / "import.json").write_text('{"eos": ', encoding="utf-8")
    with pytest.raises(TrainingError) as e:
        load_run(run).predict([{"text": "the cat"}])
    d = e.value.diagnostics[0]
    assert d.loc.file == str(run / "import.json") and "import the model again" in d.hint
