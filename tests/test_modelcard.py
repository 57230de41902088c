"""A run directory explains itself: its README.md model card, for real small runs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from attngraph.train.run.modelcard import MARK

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"
DATA = ROOT / "examples" / "data"


@pytest.fixture(scope="session")
def train_quiet(cli) -> Callable[..., str]:
    """``train_quiet(*args)``: what ``attngraph train *args --quiet`` prints; it exits 0."""

    def run(*args: object) -> str:
        return cli("train", *args, "--quiet", code=0).stdout

    return run


def _block(card: str, lang: str) -> str:
    found = re.search(rf"```{lang}\n(.*?)```", card, re.S)
    assert found is not None, card
    return found.group(1)


def test_a_builtin_task_run_has_a_card(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       train_quiet) -> None:
    """The card of a run on a built-in task names the spec (name, title, summary), the
    task and its split sizes, the settings, the validation metrics as summary.json has
    them against the target, links the attention picture the run drew, and its Python
    block loads the run."""
    from attngraph.frontend import load_spec

    out = tmp_path / "ga"
    train_quiet(GA, "--steps", "4", "--batch", "8", "--out", out)
    card = (out / "README.md").read_text(encoding="utf-8")
    graph = load_spec(GA)
    assert card.startswith(MARK + "\n")
    assert f"# {graph.name}: {graph.title}" in card
    assert " ".join((graph.summary or "").split()) in card
    assert "the built-in task `needle`" in card
    assert "fixed held-out set of 256 examples" in card and "batch of 8 examples" in card
    summary = json.loads((out / "summary.json").read_text())
    for k, v in summary["metrics"].items():
        assert re.search(rf"\| `{k}` \| {v:.4f} \| ≥ ", card), k
    assert "| steps | 4 |" in card and "| early stopping | off |" in card
    assert "![" in card and "](attention.png)" in card and (out / "attention.png").is_file()
    assert f"attngraph attend {out} --example 3" in _block(card, "sh")
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {}
    exec(_block(card, "python"), scope)  # the card's own example runs
    assert sum(p.numel() for p in scope["run"].model.parameters()) > 0  # type: ignore[attr-defined]


def test_a_data_run_card_tells_the_split_labels_and_the_best_step(tmp_path: Path,
                                                                   train_quiet) -> None:
    """A data run's card gives the data file, the sizes of the training and validation
    splits, the labels, the step early stopping kept; its picture is example 0 of the
    validation file."""
    from attngraph import load_run

    out = tmp_path / "topics"
    train, valid = DATA / "topics.jsonl", DATA / "topics-valid.jsonl"
    train_quiet(GA, "--data", train, "--valid", valid, "--steps", "6",
                "--batch", "16", "--eval-every", "1", "--patience", "1", "--out", out)
    card = (out / "README.md").read_text(encoding="utf-8")
    n_train = sum(1 for ln in train.read_text().splitlines() if ln.strip())
    n_valid = sum(1 for ln in valid.read_text().splitlines() if ln.strip())
    assert f"{n_train} training examples; {n_valid} validation examples" in card
    labels = load_run(out).labels or []
    assert f"labels ({len(labels)}): " + ", ".join(f"`{n}`" for n in labels) in card
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_step"] is not None
    assert f"Early stopping kept the weights of step {summary['best_step']}" in card
    assert f"kept weights (step {summary['best_step']})" in card
    assert f"example 0 of {valid}](attention.png)" in card
    assert f"attngraph predict {out} --data new.jsonl" in _block(card, "sh")


def test_a_spec_without_attention_output_says_so(tmp_path: Path, train_quiet) -> None:
    """A spec that declares no attention output gets no picture; the card says why."""
    spec = tmp_path / "plain.yaml"
    spec.write_text(GA.read_text().replace("outputs: {logits: logits, attention: p}",
                                           "outputs: {logits: logits}"))
    assert "attention: p}" not in spec.read_text()
    out = tmp_path / "r"
    train_quiet(spec, "--steps", "2", "--batch", "8", "--out", out)
    card = (out / "README.md").read_text(encoding="utf-8")
    assert not (out / "attention.png").exists()
    assert "No attention picture: global_attention declares no attention output" in card


def test_the_users_own_readme_is_left_alone(tmp_path: Path, cli, train_quiet) -> None:
    """Training into a folder holding the user's own README.md leaves it as it was,
    with a note; a resume rewrites the run's own card."""
    out = tmp_path / "r"
    out.mkdir()
    (out / "README.md").write_text("my notes\n")
    res = cli("train", GA, "--steps", "2", "--batch", "8",
              "--out", out, "--quiet", code=0)
    assert (out / "README.md").read_text() == "my notes\n"
    assert "left this README.md as it is" in res.stderr
    other = tmp_path / "o"
    train_quiet(GA, "--steps", "2", "--batch", "8", "--out", other)
    train_quiet(GA, "--steps", "4", "--out", other, "--resume")
    assert "| steps | 4 |" in (other / "README.md").read_text(encoding="utf-8")


def test_the_runs_doc_example_reads_a_real_run(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               train_quiet) -> None:
    """docs/runs.md's Python example runs on a run trained with early stopping: the
    table's valid rows and the checkpoint's best step are there."""
    pytest.importorskip("pandas")
    doc = (ROOT / "docs" / "runs.md").read_text(encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    train_quiet(GA, "--steps", "6", "--batch", "8", "--eval-every", "2", "--patience", "2",
                "--out", "runs/ga")
    scope: dict[str, object] = {}
    exec(_block(doc, "python"), scope)
    assert list(scope["valid"]["step"]) == [2, 4, 6]  # type: ignore[index]
    assert scope["run"].checkpoint.best["step"] in (2, 4, 6)  # type: ignore[attr-defined]


@pytest.mark.parametrize("what", ["a symbolic link", "a directory", "not a regular file"])
def test_a_readme_that_is_no_file_of_the_run_is_left_with_a_note(tmp_path: Path,
                                                                  what: str) -> None:
    """A README.md that is a link (to a file outside the run), a directory or a FIFO is
    neither written through nor opened: the card is not written, a note says why, and
    the run does not fail at its end (a link's target stays as it was)."""
    import io
    import os

    from attngraph.train.run.modelcard import write_card

    out = tmp_path / "run"
    out.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs\n", encoding="utf-8")
    card = out / "README.md"
    if what == "a symbolic link":
        card.symlink_to(outside)
    elif what == "a directory":
        card.mkdir()
    else:
        os.mkfifo(card)
    note = io.StringIO()
    assert write_card(out, MARK + "\nthe card\n", note) is None
    assert f"left this README.md as it is ({what})" in note.getvalue()
    assert outside.read_text(encoding="utf-8") == "theirs\n"
    assert card.is_symlink() if what == "a symbolic link" else not card.is_file()
