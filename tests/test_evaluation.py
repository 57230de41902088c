"""Evaluation reports: loss, per-class scores, confusion matrix, decoder figures, BLEU.

A keyword classifier and a colour-reversal decoder are trained for a few steps
in the test; their reports are checked against independent computations:
scikit-learn on the labels ``predict`` gives, torch's cross-entropy of the
model's logits, token and sequence accuracy by hand from the logits, BLEU and
exact match of the text ``predict`` writes. BLEU itself is checked against
values worked out by hand from its definition.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support
from test_runs import SPECS, TEACHER_ONLY, make_texts, write_jsonl, write_pairs

from attngraph.train.data.vocab import tokenize
from attngraph.train.tasks.base import IGNORE, Task
from attngraph.train.trained.evaluation import (
    Report,
    class_scores,
    corpus_bleu,
    evaluate_model,
    report_of,
)


@pytest.fixture(scope="module")
def clean_cli(cli) -> Callable[..., Any]:
    """``clean_cli(*args, code=0)``: the command run, asserting its exit status and
    that it prints no traceback."""

    def run(*args: object, code: int = 0) -> Any:
        res = cli(*args, code=code)
        assert "Traceback" not in res.output
        return res

    return run


def _strict(text: str) -> Any:
    """JSON that refuses NaN and infinity (which Python's json reads by default)."""
    def refuse(name: str) -> None:
        msg = f"{name} in the JSON"
        raise AssertionError(msg)
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def texts(tmp_path_factory: pytest.TempPathFactory, clean_cli) -> tuple[Path, Path]:
    """(run, held-out data): a keyword classifier trained briefly, so it errs a little."""
    tmp = tmp_path_factory.mktemp("texts")
    data = write_jsonl(tmp / "t.jsonl", make_texts(120))
    held = write_jsonl(tmp / "h.jsonl", make_texts(60, seed=5))
    clean_cli("train", SPECS / "global_attention.yaml", "--data", data, "--out",
              tmp / "run", "--quiet", "--steps", "12", "--batch", "16")
    return tmp / "run", held


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory, clean_cli) -> tuple[Path, Path]:
    """(run, data): a colour-reversal decoder trained briefly."""
    tmp = tmp_path_factory.mktemp("pairs")
    data = write_pairs(tmp / "p.tsv", 96)
    clean_cli("train", SPECS / "bahdanau_translation.yaml", "--data", data, "--out",
              tmp / "run", "--quiet", "--steps", "80", "--batch", "32")
    return tmp / "run", data


# --- classifiers ---------------------------------------------------------------------

def test_class_scores_equal_scikit_learns_on_the_labels_predict_gives(
        texts: tuple[Path, Path]) -> None:
    """Per-class precision, recall, F1 and support, their averages, the accuracy and
    the confusion matrix of Run.evaluate equal scikit-learn's on the label names
    predict gives for the same records; the matrix sums to the number of examples."""
    from attngraph import load_run

    run_dir, held = texts
    run = load_run(run_dir)
    report = run.evaluate(held, batch=7)  # batches joined: the same as one batch
    rows = run.predict(held)
    true, pred = [r["label"] for r in rows], [r["prediction"] for r in rows]
    s = report.classes
    assert s is not None and set(s.labels) == set(true) | set(pred)
    p, r, f, n = precision_recall_fscore_support(true, pred, labels=list(s.labels),
                                                 zero_division=0)
    assert s.precision == pytest.approx(tuple(p)) and s.recall == pytest.approx(tuple(r))
    assert s.f1 == pytest.approx(tuple(f)) and s.support == tuple(n)
    for avg in ("macro", "weighted"):
        a = precision_recall_fscore_support(true, pred, average=avg, zero_division=0)
        assert report[f"{avg}_f1"] == pytest.approx(a[2])
        assert report[f"{avg}_precision"] == pytest.approx(a[0])
    assert report["accuracy"] == pytest.approx(accuracy_score(true, pred))
    assert np.array_equal(s.confusion, confusion_matrix(true, pred, labels=list(s.labels)))
    assert sum(map(sum, s.confusion)) == report["examples"] == len(rows) == 60
    assert 0 < report["accuracy"] < 1  # a run that errs, so the check has teeth


def test_the_loss_is_torch_cross_entropy_of_the_model_on_the_data(
        texts: tuple[Path, Path]) -> None:
    """The report's loss is F.cross_entropy of the model's eval-mode logits on all the
    records against their labels' class ids, as training defines the loss."""
    from attngraph import load_run

    run_dir, held = texts
    run = load_run(run_dir)
    recs = run.records(held)
    logits = run.outputs(run.batch_of(recs))["logits"]
    logits = logits.reshape(len(recs), -1)
    labels = run.encoding.labels  # type: ignore[union-attr]
    y = torch.tensor([labels.id(str(r.values["label"])) for r in recs])
    want = torch.nn.functional.cross_entropy(logits, y)
    assert run.evaluate(held, batch=16)["loss"] == pytest.approx(float(want), rel=1e-5)


def test_the_cli_prints_the_table_and_writes_json_and_the_picture(
        texts: tuple[Path, Path], tmp_path: Path, clean_cli) -> None:
    """evaluate prints one row per class, both averages and the confusion matrix;
    -o writes the same JSON --json prints, with the old keys and no NaN; --picture
    draws the matrix as png or svg with the class names on the axes."""
    import matplotlib

    run_dir, held = texts
    out, png = tmp_path / "r" / "report.json", tmp_path / "cm.png"
    res = clean_cli("evaluate", run_dir, "--data", held, "-o", out,
                    "--picture", png)
    report = _strict(out.read_text(encoding="utf-8"))
    for name in report["per_class"]:
        assert any(line.split()[:1] == [name] for line in res.stdout.splitlines())
    assert "macro avg" in res.stdout and "weighted avg" in res.stdout
    assert "confusion matrix (rows: true, columns: predicted)" in res.stdout
    assert ["loss", f"{report['loss']:.4f}"] in [ln.split() for ln in res.stdout.splitlines()]
    printed = _strict(clean_cli("evaluate", run_dir, "--data", held, "--json").stdout)
    assert printed == report
    assert {"examples", "accuracy", "loss", "macro_f1", "confusion_matrix"} <= set(report)
    assert report["confusion_matrix"]["labels"] == list(report["per_class"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from attngraph import load_run
    from attngraph.train.pictures.confusion import confusion_picture

    scores = load_run(run_dir).evaluate(held).classes
    assert scores is not None
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text kept as text
        svg = confusion_picture(scores, tmp_path / "cm.svg").decode()
    assert svg.lstrip().startswith("<?xml") and all(f">{n}<" in svg for n in scores.labels)


def test_bad_pictures_are_one_error(texts: tuple[Path, Path], pairs: tuple[Path, Path],
                                    tmp_path: Path, clean_cli) -> None:
    """A suffix matplotlib cannot write, or --picture for a decoder run, is one error at
    the file with a hint, before anything is evaluated; nothing is written."""
    run_dir, held = texts
    res = clean_cli("evaluate", run_dir, "--data", held, "--picture",
                    tmp_path / "cm.xyz", code=1)
    assert "cannot draw a picture as '.xyz'" in res.stderr and "hint:" in res.stderr
    run_dir, data = pairs
    res = clean_cli("evaluate", run_dir, "--data", data, "--picture",
                    tmp_path / "cm.png", code=1)
    assert "not one" in res.stderr and "hint:" in res.stderr
    assert not list(tmp_path.iterdir())


def test_undefined_ratios_are_zero_and_the_json_has_no_nan() -> None:
    """A class predicted but never true (recall 0/0) and one true but never predicted
    (precision 0/0) read as 0, as scikit-learn's zero_division=0 gives, and say so."""
    s = class_scores([0, 0, 1, 1], [0, 2, 0, 2], ["a", "b", "c"].__getitem__)
    assert s.labels == ("a", "b", "c")
    assert s.precision[1] == 0.0 and s.recall[2] == 0.0 and s.f1[1] == s.f1[2] == 0.0
    assert s.support == (2, 2, 0) and s.confusion == ((1, 0, 1), (1, 0, 1), (0, 0, 0))
    data = Report({"examples": 4, "loss": 1.0}, s).to_dict()
    text = json.dumps(data, allow_nan=False)
    assert _strict(text)["zero_division"] == 0


def test_many_classes_print_their_rows_and_leave_the_matrix_to_the_files() -> None:
    """With more classes than the table can show across, every class still has its
    row (long names cut to fit) and the printed text says where the matrix is."""
    from attngraph.train.trained.evaluation_text import MATRIX_CLASSES, format_report

    k = MATRIX_CLASSES + 5
    names = [f"class number {i} with a long name" for i in range(k)]
    true = list(range(k)) * 2
    s = class_scores(true, true[1:] + true[:1], names.__getitem__)
    text = format_report(Report({"examples": 2 * k, "accuracy": 0.0}, s), "big")
    rows = [ln for ln in text.splitlines() if ln.startswith("  class number")]
    assert len(rows) == k and all("…" in r for r in rows)
    assert f"confusion matrix: {k} × {k} classes" in text and "rows: true" not in text


class _Tags(Task):
    """A per-item classification task (a tag per token) for reports of given outputs."""

    target = "target"


class _Values(Task):
    """A regression task for reports of given outputs."""

    metrics = ()
    objective = "regress"


def test_per_item_labels_are_scored_per_item_without_padding() -> None:
    """Tagging: each scored item counts once in the per-class scores and the matrix,
    IGNORE padding none; the loss is cross-entropy over the scored items."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 4, generator=gen)
    target = torch.randint(0, 4, (3, 5), generator=gen)
    target[0, 3:] = IGNORE
    target[2, 1:] = IGNORE
    report = report_of(_Tags(), {"logits": logits}, {"target": target})
    keep = target != IGNORE
    true, pred = target[keep].numpy(), logits.argmax(-1)[keep].numpy()
    assert report.classes is not None and sum(report.classes.support) == int(keep.sum()) == 9
    assert np.array_equal(report.classes.confusion,
                          confusion_matrix(true, pred, labels=list(report.classes.ids)))
    want = torch.nn.functional.cross_entropy(logits[keep], target[keep])
    assert report["loss"] == pytest.approx(float(want))
    assert report["accuracy"] == pytest.approx(accuracy_score(true, pred))
    assert report["examples"] == 3


def test_a_graph_model_is_scored_per_node() -> None:
    """A node classifier (the karate club) trained a few steps: its report over the
    task's test batch scores every labelled node, as scikit-learn does."""
    from attngraph.frontend import load_spec
    from attngraph.train.engine.loop import train

    graph = load_spec(SPECS / "graph_attention.yaml")
    res = train(graph, steps=20)
    report = evaluate_model(res.model, graph, res.task)
    batch = next(iter(res.task.test_batches(256)))
    target = batch[res.task.target]
    keep = target != IGNORE
    res.model.eval()
    from attngraph.train.tasks.lookup import bind_inputs

    with torch.no_grad():
        pred = res.model(**bind_inputs(graph, res.task, batch))["logits"].argmax(-1)
    true, got = target[keep].numpy(), pred.reshape(target.shape)[keep].numpy()
    p, r, f, n = precision_recall_fscore_support(true, got, zero_division=0)
    s = report.classes
    assert s is not None and s.precision == pytest.approx(tuple(p))
    assert s.recall == pytest.approx(tuple(r)) and s.support == tuple(n)
    assert report["accuracy"] == pytest.approx(accuracy_score(true, got))


def test_regression_gets_mse_and_mae_over_the_values_not_nan() -> None:
    """A regress objective's report has scikit-learn's MSE and MAE over the targets
    that are not NaN (padding), and its loss is that MSE, as training's."""
    pred = torch.tensor([[1.0, 2.0, 5.0], [0.0, 3.0, 1.0]])
    target = torch.tensor([[1.5, 2.0, float("nan")], [1.0, 1.0, float("nan")]])
    report = report_of(_Values(), {"prediction": pred}, {"target": target})
    assert report["mse"] == pytest.approx((0.25 + 0 + 1 + 4) / 4)
    assert report["mae"] == pytest.approx((0.5 + 0 + 1 + 2) / 4)
    assert report["loss"] == pytest.approx(report["mse"]) and report.classes is None


# --- decoders ------------------------------------------------------------------------

def test_a_decoder_gets_token_and_sequence_accuracy_bleu_and_exact_match(
        pairs: tuple[Path, Path]) -> None:
    """Token accuracy counts the target tokens (with <eos>) the eval-mode logits get
    right, padding not; sequence accuracy the examples with all right; BLEU and exact
    match score the text predict generates against each record's own target."""
    from attngraph import load_run
    from attngraph.train.data.batches import target_key
    from attngraph.train.tasks.lookup import bind_inputs

    run_dir, data = pairs
    run = load_run(run_dir)
    report = run.evaluate(data, batch=40)
    assert report.classes is None and "accuracy" not in report
    ds = run._dataset(run.records(data), need_label=True)
    batch = ds.collate(list(ds))
    target = batch[target_key(run.encoding)]  # type: ignore[arg-type]
    with torch.no_grad():
        pred = run.model(**bind_inputs(run.graph, run.task, batch))["logits"].argmax(-1)
    real = target != IGNORE
    assert int(real.sum()) < target.numel()  # padding there, and left out
    right = (pred == target) & real
    assert report["token_accuracy"] == pytest.approx(float(right.sum() / real.sum()))
    whole = (right | ~real).all(-1).float().mean()
    assert report["sequence_accuracy"] == pytest.approx(float(whole))
    rows = run.predict(data)
    hyps = [r["prediction"].split() for r in rows]
    refs = [tokenize(r["target"], "word") for r in rows]
    assert report["bleu"] == pytest.approx(corpus_bleu(hyps, refs))
    same = sum(h == r for h, r in zip(hyps, refs, strict=True))
    assert report["exact_match"] == pytest.approx(same / len(rows))
    assert 0 < report["bleu"] < 1
    assert report["loss"] > 0 and report["examples"] == 96


def test_a_decoder_that_cannot_generate_says_why_it_has_no_bleu(tmp_path: Path, clean_cli) -> None:
    """A decoder reading its target only by teacher forcing is scored, and its report
    (table and JSON) says why it has no BLEU instead of failing or inventing one."""
    spec = tmp_path / "t.yaml"
    spec.write_text(TEACHER_ONLY, encoding="utf-8")
    data = write_pairs(tmp_path / "p.tsv", 32)
    run = tmp_path / "run"
    clean_cli("train", spec, "--data", data, "--out", run, "--quiet", "--steps", "2")
    got = _strict(clean_cli("evaluate", run, "--data", data, "--json").stdout)
    assert "bleu" not in got and "token_accuracy" in got
    assert any("cannot generate" in n for n in got["notes"])
    assert "note: bleu, exact_match" in clean_cli("evaluate", run, "--data", data).stdout


# --- BLEU ----------------------------------------------------------------------------

def test_bleu_equals_hand_computed_values() -> None:
    """Corpus BLEU-4 as Papineni et al. define it, worked out by hand: clipped n-gram
    precisions summed over the corpus, their geometric mean, the brevity penalty."""
    hyps = [["the", "cat", "sat", "on", "the", "mat"], ["a", "b", "c", "d"]]
    refs = [["the", "cat", "is", "on", "the", "mat"], ["a", "b", "c", "d"]]
    # 1-grams 5/6 + 4/4, 2-grams 3/5 + 3/3, 3-grams 1/4 + 2/2, 4-grams 0/3 + 1/1;
    # 10 tokens each side: no brevity penalty
    want = (9 / 10 * 6 / 8 * 3 / 6 * 1 / 4) ** (1 / 4)
    assert corpus_bleu(hyps, refs) == pytest.approx(want)
    # the sentence alone has no matching 4-gram: 0, unsmoothed
    assert corpus_bleu(hyps[:1], refs[:1]) == 0.0
    # shorter than its reference: every n-gram matches, BP = exp(1 - 6/4)
    assert corpus_bleu([list("abcd")], [list("abcdef")]) == pytest.approx(math.exp(-0.5))
    # clipping: "the" counts at most twice, as often as the reference has it (2/7)
    seven = ["the"] * 7
    assert corpus_bleu([seven], [refs[0]], max_n=1) == pytest.approx(2 / 7)
    assert corpus_bleu([[]], [["a"]]) == 0.0
    assert corpus_bleu([list("abcd")], [list("abcd")]) == 1.0


# --- docs/data.md --------------------------------------------------------------------

def test_the_pages_evaluate_example_prints_what_it_shows(
        repo_copy, clean_cli) -> None:
    """docs/data.md, after its first training command: the evaluate command of "The
    evaluation report" prints the lines the page shows (digits aside, which depend on
    the machine's arithmetic) with the numbers of the JSON it writes, and draws the
    picture; the page's Python block runs and gives the same report."""
    import re
    import shlex

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "data.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)```", text, re.S)
    start = text.index("## Evaluate, predict, attend")
    section = text[start:text.index("\n## ", start + 1)]
    report_part = section[section.index("### The evaluation report"):]
    cmd = re.search(r"```sh\n(.*?)```", report_part, re.S)
    shown = re.search(r"```text\n(.*?)```", report_part, re.S)
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert first is not None and cmd is not None and shown is not None and code is not None
    train = shlex.split(first.group(1).split("\nattngraph evaluate")[0].replace("\\\n", " "))
    repo_copy("examples", "specs")
    clean_cli(*train[1:], "--quiet")
    argv = shlex.split(cmd.group(1))
    printed = clean_cli(*argv[1:]).stdout.splitlines()

    def digits(lines: list[str]) -> list[str]:
        return [re.sub(r"\d", "0", ln) for ln in lines]

    assert digits(printed) == digits(shown.group(1).splitlines())
    report = _strict(Path(argv[argv.index("-o") + 1]).read_text(encoding="utf-8"))
    for name, s in report["per_class"].items():
        row = f"{s['precision']:.4f}  {s['recall']:.4f}  {s['f1']:.4f}  {s['support']:7d}"
        assert any(ln.split()[:1] == [name] and ln.endswith(row) for ln in printed), name
    assert Path(argv[argv.index("--picture") + 1]).stat().st_size > 0
    space: dict[str, Any] = {"__name__": "docs_example"}
    exec(compile(code.group(1), "docs/data.md", "exec"), space)  # noqa: S102
    assert space["report"].to_dict() == report


def test_one_class_alone_scores_without_a_warning() -> None:
    """Every example of one class, all predicted right: the scores and a 1x1 confusion
    matrix, and no warning (scikit-learn warns about the shape, which labels= fixes;
    it reached the command line as 'attngraph: warning: ...')."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = class_scores([2, 2, 2], [2, 2, 2], lambda i: ["a", "b", "c"][i])
    assert scores.labels == ("c",) and scores.confusion == ((3,),)
