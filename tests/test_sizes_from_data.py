"""Sizes from the data: ``auto`` under ``dims`` is decided by the training data (the run
says what it chose and stores it), refused without data, and a size given by hand that
the data outgrows is refused (classes) or warned about (vocab) with the counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attngraph.errors import AttnGraphError, SpecError, TrainingError
from attngraph.frontend import loads_spec
from fuzz.seeds import blocks

torch = pytest.importorskip("torch")

import attngraph  # noqa: E402
from attngraph.train.data.vocab import tokenize  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOPICS = ROOT / "examples" / "data" / "topics.jsonl"
#: the spec-language reference's example of auto sizes
DOC_SPEC = next(b.text for b in blocks(ROOT / "docs" / "spec-language.md")
                if b.marker == "error: sized.yaml")


def _spec(tmp_path: Path, text: str = DOC_SPEC, name: str = "sized.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _counts(path: Path) -> tuple[int, int]:
    """(distinct word tokens, distinct labels) of a JSONL file's training split, counted
    here by hand."""
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]
    return (len({t for r in rows for t in tokenize(r["text"], "word")}),
            len({r["label"] for r in rows}))


def test_auto_sizes_are_the_datas_counts(tmp_path: Path, cli) -> None:
    """The reference's auto example trains on data: vocab is the distinct tokens of the
    training split plus the 4 reserved ids, classes the distinct labels; the CLI says so
    on stderr, and the run's checkpoint holds the spec with those numbers."""
    spec = _spec(tmp_path)
    res = cli("train", spec, "--data", TOPICS, "--valid",
              ROOT / "examples/data/topics-valid.jsonl", "--steps", "2",
              "--out", tmp_path / "run", "--quiet", code=0)
    tokens, labels = _counts(TOPICS)
    line = next(x for x in res.stderr.splitlines() if "sizes from the data" in x)
    assert f"vocab = {tokens + 4} (input 'tokens': {tokens} distinct tokens and 4 reserved)" \
        in line
    assert f"classes = {labels} ({labels} labels: food, sport, tech, weather)" in line
    run = attngraph.load_run(tmp_path / "run")
    assert (run.graph.dims["vocab"], run.graph.dims["classes"]) == (tokens + 4, labels)
    assert len(run.vocabs["tokens"]) == tokens + 4  # every token kept, none is <unk>
    text = run.checkpoint.spec_text
    assert "auto" not in text and f"vocab: {tokens + 4}," in text
    assert text.splitlines()[3:] == DOC_SPEC.splitlines()[3:]  # only the sizes changed


def test_python_states_and_stores_the_sizes(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``attngraph.train`` on records decides the same sizes and says them on stderr."""
    records = [{"text": "a b c", "label": "x"}, {"text": "c d", "label": "y"},
               {"text": "e", "label": "z"}] * 4
    run = attngraph.fit(DOC_SPEC, records, steps=1, valid=records[:3], quiet=True)
    assert (run.graph.dims["vocab"], run.graph.dims["classes"]) == (5 + 4, 3)
    assert "vocab = 9 (input 'tokens': 5 distinct tokens and 4 reserved); classes = 3" \
        in capsys.readouterr().err


def test_a_resumed_run_takes_its_sizes_from_its_data(tmp_path: Path, cli) -> None:
    """``--resume`` of an auto run reads its sizes from the run's data.json (the data
    need not be given again) and continues the same spec."""
    spec = _spec(tmp_path)
    out = tmp_path / "run"
    base = ["train", str(spec), "--out", str(out), "--quiet"]
    cli(*base, "--data", TOPICS, "--steps", "2", code=0)
    res = cli(*base, "--resume", "--steps", "4", code=0)
    assert f"sizes from the run's {out / 'data.json'}: vocab = 33" in res.stderr
    assert attngraph.load_run(out).checkpoint.step == 4


def test_without_data_auto_is_an_error_at_the_entry() -> None:
    """Read alone, each auto entry is one located error with a hint to train on data."""
    with pytest.raises(SpecError) as err:
        loads_spec(DOC_SPEC, "sized.yaml")
    found = [(d.loc.line, d.loc.col, d.message) for d in err.value.diagnostics]
    assert found == [
        (3, 15, "dims 'vocab' is auto: the training data decides it, and no data is read here"),
        (3, 37, "dims 'classes' is auto: the training data decides it, and no data is read "
         "here")]
    assert "attngraph train SPEC --data FILE" in (err.value.diagnostics[0].hint or "")
    with pytest.raises(SpecError, match="is auto"):
        attngraph.compile(DOC_SPEC)


def test_a_built_in_task_cannot_decide_auto(tmp_path: Path, cli) -> None:
    """Training an auto spec without --data is refused at the entry, before anything runs."""
    spec = _spec(tmp_path, DOC_SPEC + "train: {task: needle}\n")
    res = cli("train", spec, "--out", tmp_path / "r", code=1)
    assert res.stderr.startswith(f"{spec}:3:15: error: dims 'vocab' is auto: only training on "
                                 "data decides it")
    assert not (tmp_path / "r").exists()


def test_too_few_classes_by_hand_is_refused_with_the_count(tmp_path: Path, cli) -> None:
    """Fewer classes than the data's labels is refused at the classes entry, with the count
    the data needs, before the run directory is made; the spec is shown as written."""
    spec = _spec(tmp_path, DOC_SPEC.replace("classes: auto", "classes: 3"))
    res = cli("train", spec, "--data", TOPICS, "--steps", "1",
              "--out", tmp_path / "r", code=1)
    first = res.stderr.splitlines()
    assert first[0] == (f"{spec}:3:37: error: the data in {TOPICS} has 4 labels (food, sport, "
                        "tech, weather), the spec's logits give 3 classes")
    assert "dims: {vocab: auto, d: 32, classes: 3}" in first[1]  # not a stand-in number
    assert "make classes at least 4, or write classes: auto" in res.stderr
    assert not (tmp_path / "r").exists()


def test_a_capped_vocab_trains_with_a_warning_of_what_reads_as_unk(tmp_path: Path, cli) -> None:
    """A vocab below the data's tokens is a choice: it trains, and the warning says how
    many distinct tokens (and what share of the text) read as <unk>."""
    tokens, _ = _counts(TOPICS)
    spec = _spec(tmp_path, DOC_SPEC.replace("vocab: auto", "vocab: 20"))
    with pytest.warns(UserWarning) as got:
        attngraph.fit(spec, str(TOPICS), steps=1, quiet=True)
    text = str(got[0].message)
    assert f"its vocab of 20 keeps 16 of the {tokens} distinct tokens of the training split; " \
        f"the {tokens - 16} rarest (" in text
    assert f"read as <unk> (to keep them all: a vocab of at least {tokens + 4}, or auto" in text
    res = cli("train", spec, "--data", TOPICS, "--steps", "1",
              "--out", tmp_path / "r", "--quiet", code=0)
    assert "attngraph: warning: " in res.stderr and "read as <unk>" in res.stderr


def test_a_vocab_that_fits_gives_no_warning(tmp_path: Path) -> None:
    """No warning when every training token fits (the warning is not always on)."""
    import warnings

    tokens, _ = _counts(TOPICS)
    spec = _spec(tmp_path, DOC_SPEC.replace("vocab: auto", f"vocab: {tokens + 4}"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        attngraph.dataset(spec, str(TOPICS))


def test_auto_that_the_data_cannot_decide_is_an_error_at_it(tmp_path: Path) -> None:
    """An auto entry used as, say, an embedding width is refused at the entry."""
    spec = _spec(tmp_path, DOC_SPEC.replace("d: 32", "d: auto"))
    with pytest.raises(TrainingError) as err:
        attngraph.dataset(spec, str(TOPICS))
    d = err.value.diagnostics[0]
    assert (d.loc.line, d.loc.col) == (3, 24)
    assert d.message.startswith("dims 'd' is auto, but the data decides only vocabularies")


def test_the_own_loop_dataset_decides_auto_sizes(tmp_path: Path) -> None:
    """``attngraph.dataset`` sizes the spec from its data: ``ds.graph`` compiles, and its
    vocabulary and labels are the data's."""
    tokens, labels = _counts(TOPICS)
    ds = attngraph.dataset(_spec(tmp_path), str(TOPICS))
    assert (ds.graph.dims["vocab"], ds.graph.dims["classes"]) == (tokens + 4, labels)
    model = attngraph.compile(ds.graph, seed=0)
    out = model(**ds.inputs(ds.collate([ds[0], ds[1]])))
    assert out["logits"].shape == (2, labels)


def test_spec_errors_show_the_spec_as_written(tmp_path: Path) -> None:
    """An error in a spec with auto entries points into the text as written (columns
    after an auto entry unshifted by the number read in its place)."""
    bad = DOC_SPEC.replace("dims: {vocab: auto, d: 32, classes: auto}",
                           "dims: {vocab: auto, d: 32, classes: auto, e: 0}")
    with pytest.raises(AttnGraphError) as err:
        attngraph.dataset(_spec(tmp_path, bad), str(TOPICS))
    d = err.value.diagnostics[0]
    assert (d.loc.line, d.loc.col, d.loc.text) == (3, 46, bad)


@pytest.mark.parametrize("command", [["validate"], ["render", "--format", "mermaid"],
                                     ["compile"]])
def test_commands_without_data_refuse_auto_at_its_line(tmp_path: Path,
                                                       command: list[str], cli) -> None:
    """validate, render and compile read no data: each refuses the auto entries with the
    located error, exit status 1 and no traceback."""
    spec = _spec(tmp_path)
    res = cli(command[0], spec, *command[1:], code=1)
    assert res.stderr.startswith(f"{spec}:3:15: error: dims 'vocab' is auto")
    assert "Traceback" not in res.output
