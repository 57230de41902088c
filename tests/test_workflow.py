"""The Python workflow (``attngraph.fit``, ``Run.export``, ``attngraph.dataset`` and
``attngraph.save``): one training path whatever form the data takes, runs that predict,
evaluate and export, and models of one's own loop saved as runs the CLI reads."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pd = pytest.importorskip("pandas")

import attngraph  # noqa: E402
from attngraph.errors import TrainingError  # noqa: E402
from attngraph.train.run.ownloop import TrainingData  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPEC = """attngraph: 1
name: tiny
dims: {vocab: 16, d: 8, classes: 3}
inputs:
  tokens: {type: tokens, vocab: vocab}
nodes:
  x:      {kind: items, from: tokens, embed: d}
  score:  {kind: scorer, fn: dot, query: {learned: d}, key: x}
  p:      {kind: softmax, scores: score}
  z:      {kind: readout, weights: p, values: x}
  logits: {kind: linear, from: z, out: classes}
outputs: {logits: logits, attention: p}
"""
WORDS = {"sun": "weather", "rain": "weather", "goal": "sport", "team": "sport",
         "cake": "food", "soup": "food"}
RECORDS = [{"text": f"the {w} and a {w}", "label": lab}
           for i in range(4) for w, lab in WORDS.items()]


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(SPEC, encoding="utf-8")
    return path


def _same_parameters(a: object, b: object) -> bool:
    sa, sb = a.model.state_dict(), b.model.state_dict()  # type: ignore[attr-defined]
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_csv_records_and_dataframe_give_the_same_run(spec: Path, tmp_path: Path) -> None:
    """The same rows as a CSV file, a list of records and a DataFrame train to the same
    parameters and labels for a seed (one training path, however the data comes)."""
    df = pd.DataFrame(RECORDS)
    df.to_csv(tmp_path / "d.csv", index=False)
    runs = [attngraph.fit(spec, data, steps=6, seed=3, quiet=True)
            for data in (str(tmp_path / "d.csv"), RECORDS, df)]
    assert all(r.labels == ["food", "sport", "weather"] for r in runs)
    assert _same_parameters(runs[0], runs[1]) and _same_parameters(runs[0], runs[2])
    other = attngraph.fit(spec, df, steps=6, seed=4, quiet=True)
    assert not _same_parameters(runs[0], other)  # the seed matters, so the check has teeth


def test_the_run_predicts_evaluates_and_reloads(spec: Path, tmp_path: Path, cli) -> None:
    """A trained run predicts a label per record, scores labelled records, and reloads
    from its directory to the same predictions, which the CLI also gives."""
    out = tmp_path / "run"
    run = attngraph.fit(spec, RECORDS, steps=40, lr=0.05, seed=0, out=out, quiet=True)
    preds = run.predict(RECORDS)
    assert [p["prediction"] for p in preds] == [r["label"] for r in RECORDS]
    assert run.evaluate(RECORDS)["accuracy"] == 1.0
    again = attngraph.load_run(out)
    assert again.predict(RECORDS) == preds
    (tmp_path / "new.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS),
                                        encoding="utf-8")

    res = cli("predict", out, "--data", tmp_path / "new.jsonl", code=0)
    cli = [json.loads(x)["prediction"] for x in res.stdout.splitlines()]
    assert cli == [p["prediction"] for p in preds]
    assert (out / "data-train.jsonl").is_file()  # the run holds what it trained on
    # the records as a DataFrame, or as texts alone, predict the same
    rows = [{k: p[k] for k in ("prediction", "probabilities")} for p in preds]
    for given in (pd.DataFrame(RECORDS), [r["text"] for r in RECORDS]):
        got = again.predict(given)
        assert [{k: p[k] for k in ("prediction", "probabilities")} for p in got] == rows
    for wrong in (None, RECORDS[0], b"text"):  # not a list of records: one error
        with pytest.raises(TrainingError, match="data is a path, a list of records"):
            again.predict(wrong)  # type: ignore[arg-type]


def test_a_temporary_run_goes_with_its_run(spec: Path) -> None:
    """Without ``out`` the run lives in a temporary directory, removed once the Run is gone."""
    run = attngraph.fit(spec, RECORDS, steps=2, quiet=True)
    where = run.path
    assert (where / "checkpoint.pt").is_file()
    del run
    gc.collect()
    assert not where.exists()


def test_spec_as_text_or_graph(spec: Path, tmp_path: Path) -> None:
    """Spec text is stored in the run as spec.yaml; a graph read from a file trains from
    that file; both give the run of the file itself."""
    by_text = attngraph.fit(SPEC, RECORDS, steps=3, out=tmp_path / "t", quiet=True)
    assert (tmp_path / "t" / "spec.yaml").read_text(encoding="utf-8") == SPEC
    by_graph = attngraph.fit(attngraph.load_spec(spec), RECORDS, steps=3, quiet=True)
    assert by_graph.checkpoint.spec_file == str(spec)
    assert _same_parameters(by_text, by_graph)


def test_a_run_that_cannot_start_writes_nothing(spec: Path, tmp_path: Path) -> None:
    """Data that does not fit is one error at the record, and the run directory (and the
    records written for it) is not left behind."""
    bad = [*RECORDS, {"text": "x"}]
    with pytest.raises(TrainingError, match="has no column 'label'") as err:
        attngraph.fit(spec, bad, steps=2, out=tmp_path / "run", quiet=True)
    assert str(err.value.diagnostics[0].loc) == f"<records>:{len(bad)}:1"
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("options", "said"), [
    ({"steps": 0}, "steps must be a whole number >= 1, not 0"),
    ({"steps": "3"}, "steps must be a whole number >= 1, not '3'"),
    ({"batch": 2.5}, "batch must be a whole number >= 1, not 2.5"),
    ({"epochs": 0}, "epochs must be a whole number >= 1, not 0"),
    ({"patience": -1}, "patience must be a whole number >= 0, not -1"),
    ({"lr": float("nan")}, "lr must be a number > 0, not nan"),
    ({"lr": 0}, "lr must be a number > 0, not 0"),
    ({"valid_fraction": 1.5}, "valid_fraction must be a number between 0 and 1"),
    ({"seed": "x"}, "seed 'x' is not a whole number"),
])
def test_a_setting_of_the_wrong_kind_is_one_error(spec: Path, tmp_path: Path,
                                                  options: dict[str, object], said: str) -> None:
    """What the command line's option types refuse, fit refuses too, naming the setting
    (a number of steps given as text, a learning rate of NaN), before it writes."""
    with pytest.raises(TrainingError) as err:
        attngraph.fit(spec, RECORDS, out=tmp_path / "run", quiet=True, **options)  # type: ignore[arg-type]
    assert said in err.value.diagnostics[0].message and err.value.diagnostics[0].hint
    assert not (tmp_path / "run").exists()


def test_the_python_api_refuses_arguments_of_the_wrong_kind(spec: Path, tmp_path: Path) -> None:
    """A seed, a run path, generation inputs or a batch size of the wrong kind is one
    error naming it, not a TypeError from deep inside."""
    from attngraph.errors import AttnGraphError

    run = attngraph.fit(spec, RECORDS, steps=2, out=tmp_path / "run", quiet=True)
    for call, said in (
        (lambda: attngraph.compile(spec, seed="x"), "seed must be a whole number"),
        (lambda: attngraph.load_run(None), "load_run takes a run directory's path"),  # type: ignore[arg-type]
        (lambda: run.predict(RECORDS, batch=0), "batch must be a whole number >= 1, not 0"),
        (lambda: run.evaluate(RECORDS, batch="4"), "batch must be a whole number >= 1"),
        (lambda: attngraph.finetune(tmp_path / "run", RECORDS, steps=0), "steps must be"),
        (lambda: attngraph.loads_spec(spec.read_bytes()), "YAML text (a str), not bytes"),  # type: ignore[arg-type]
        (lambda: attngraph.fit(spec, RECORDS, out=5), "out is the run directory's path"),  # type: ignore[arg-type]
        (lambda: attngraph.fit(spec, RECORDS, fields=["text"]), "fields maps each input"),  # type: ignore[arg-type]
        (lambda: run.export(None), "but path is None"),  # type: ignore[arg-type]
        (lambda: run.export(tmp_path / "m.pt2", format=None), "but format is None"),  # type: ignore[arg-type]
        (lambda: attngraph.dataset(spec, RECORDS, fields=["text"]), "fields maps each"),  # type: ignore[arg-type]
        (lambda: attngraph.save(run.model, None, data=RECORDS), "out is the run directory"),  # type: ignore[arg-type]
        # switches are True or False (a tensor's truth is ambiguous), names are strings
        (lambda: attngraph.compile(spec, fuse=torch.ones(2)), "fuse must be True or False"),
        (lambda: attngraph.compile(spec, allow_large="no"), "allow_large must be True or"),
        (lambda: attngraph.compile(spec, block={}), "block names a block of the spec"),  # type: ignore[arg-type]
        (lambda: attngraph.compile(3), "compile takes a spec path"),  # type: ignore[arg-type]
        (lambda: attngraph.compile(""), "the path of the spec is empty"),
        (lambda: run.predict(RECORDS, attention=None), "attention must be True or False"),  # type: ignore[arg-type]
        (lambda: run.evaluate(RECORDS, truncate=torch.zeros(0)), "truncate must be True"),  # type: ignore[arg-type]
        (lambda: run.predict(torch.tensor(1.0)), "not Tensor"),  # type: ignore[arg-type]
        (lambda: run.predict("x" * 10_000), "cannot read the data path"),
        (lambda: attngraph.load_run("x" * 10_000), "cannot read the run directory"),
        (lambda: attngraph.fit(spec, RECORDS, quiet=torch.ones(2)), "quiet must be True or"),
        (lambda: attngraph.fit(spec, torch.tensor(1.0)), "not Tensor"),
    ):
        with pytest.raises(AttnGraphError) as err:
            call()
        assert said in str(err.value) and err.value.diagnostics[0].hint
    assert attngraph.load_run(tmp_path / "run").checkpoint.step == 2  # nothing trained on


@pytest.mark.parametrize(("data", "said"), [
    (42, "not int"), ([], "no records given"), ([{"text": "a"}, "b"], "record 2 is a str"),
    ({"text": "a", "label": "b"}, "not dict"),
])
def test_data_of_another_kind_is_one_error(spec: Path, data: object, said: str) -> None:
    """Data that is neither a path, records nor a DataFrame is one TrainingError."""
    with pytest.raises(TrainingError, match=said):
        attngraph.fit(spec, data, steps=1, quiet=True)


def test_a_missing_value_in_a_dataframe_names_its_row(spec: Path) -> None:
    """A NaN cell is refused at its row and column, with how to drop it."""
    df = pd.DataFrame(RECORDS)
    df.loc[2, "label"] = float("nan")
    with pytest.raises(TrainingError) as err:
        attngraph.fit(spec, df, steps=1, quiet=True)
    d = err.value.diagnostics[0]
    assert (d.loc.file, d.loc.line) == ("<DataFrame>", 3)
    assert "column 'label' holds a missing value (NaN)" in d.message and "dropna" in d.hint


def test_overwrite_keeps_the_new_runs_data(spec: Path, tmp_path: Path) -> None:
    """Training over an earlier run with overwrite moves that run aside, and the new run
    still holds the records it was trained on where its checkpoint says."""
    out = tmp_path / "run"
    attngraph.fit(spec, RECORDS, steps=2, out=out, quiet=True)
    with pytest.raises(TrainingError, match="already holds a run"):
        attngraph.fit(spec, RECORDS, steps=2, out=out, quiet=True)
    run = attngraph.fit(spec, RECORDS[:12], steps=2, out=out, overwrite=True, quiet=True)
    kept = (out / "data-train.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(kept) == 12
    assert run.checkpoint.config["data"]["data"] == str(out / "data-train.jsonl")
    assert len(list(tmp_path.glob("run.old-*"))) == 1


def test_epochs_and_steps_together_are_refused(spec: Path) -> None:
    """Giving both is an error, as on the command line."""
    with pytest.raises(TrainingError, match="epochs or steps, not both"):
        attngraph.fit(spec, RECORDS, steps=2, epochs=1)


def test_export_writes_a_program_that_gives_the_runs_outputs(spec: Path, tmp_path: Path) -> None:
    """``run.export`` writes a torch.export program whose logits are the run's model's;
    an unknown format is one error with the formats."""
    run = attngraph.fit(spec, RECORDS, steps=3, quiet=True)
    path = run.export(tmp_path / "m.pt2")
    batch = run.batch_of(run.records(RECORDS[:4]))
    prog = torch.export.load(str(path)).module()
    got = prog(batch["tokens"], batch["tokens_mask"])
    want = run.model(tokens=batch["tokens"], tokens_mask=batch["tokens_mask"])["logits"]
    logits = got["logits"] if isinstance(got, dict) else got[0]
    assert torch.allclose(logits, want, atol=1e-5)
    run.export(tmp_path / "m.py", format="python")
    assert (tmp_path / "m.safetensors").is_file()
    with pytest.raises(TrainingError, match="unknown export format 'onxx'") as err:
        run.export(tmp_path / "m.x", format="onxx")
    assert "did you mean 'onnx'" in (err.value.hint or "")


def _own_loop(ds: TrainingData, steps: int = 30) -> torch.nn.Module:
    from torch.utils.data import DataLoader

    torch.manual_seed(0)
    model = attngraph.compile(ds.graph, seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    done = 0
    while done < steps:
        for batch in DataLoader(ds, batch_size=8, shuffle=True, collate_fn=ds.collate):
            loss = torch.nn.functional.cross_entropy(model(**ds.inputs(batch))["logits"],
                                                     batch[ds.target])
            opt.zero_grad()
            loss.backward()
            opt.step()
            done += 1
    return model.eval()


def test_an_own_loop_model_saves_and_reloads_predicting_the_same(spec: Path,
                                                                 tmp_path: Path, cli) -> None:
    """A model trained in one's own loop on ``attngraph.dataset`` saves as a run whose
    predictions are the model's own probabilities, and the CLI evaluates it."""
    ds = attngraph.dataset(spec, RECORDS)
    model = _own_loop(ds)
    out = attngraph.save(model, tmp_path / "own", data=ds)
    run = attngraph.load_run(out)
    batch = ds.collate([ds[i] for i in range(len(ds))])
    with torch.no_grad():
        probs = model(**ds.inputs(batch))["logits"].softmax(-1)
    got = run.predict(RECORDS)
    names = run.labels
    assert names == ["food", "sport", "weather"]
    for i, row in enumerate(got):
        assert [row["probabilities"][n] for n in names] == pytest.approx(probs[i].tolist(),
                                                                         abs=1e-5)

    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS),
                                      encoding="utf-8")
    cli("evaluate", out, "--data", tmp_path / "d.jsonl", code=0)
    assert (out / "data-train.jsonl").is_file()  # records saved with the run


def test_save_refuses_a_model_of_another_spec(spec: Path, tmp_path: Path) -> None:
    """A model compiled from another spec, or into a directory holding a run, is refused."""
    other = attngraph.compile(str(ROOT / "specs" / "global_attention.yaml"), seed=0)
    with pytest.raises(TrainingError, match="compiled from another spec"):
        attngraph.save(other, tmp_path / "a", data=RECORDS, spec=spec)
    wrong = attngraph.compile(SPEC.replace("d: 8", "d: 4"), seed=0)
    with pytest.raises(TrainingError, match="compiled from another spec"):
        attngraph.save(wrong, tmp_path / "a", data=RECORDS, spec=spec)
    model = attngraph.compile(spec, seed=0)
    attngraph.save(model, tmp_path / "b", data=RECORDS)
    with pytest.raises(TrainingError, match="already holds a run"):
        attngraph.save(model, tmp_path / "b", data=RECORDS)
    assert not (tmp_path / "a").exists()


def test_import_attngraph_still_does_not_import_torch() -> None:
    """``attngraph.fit``, ``save`` and ``dataset`` load lazily."""
    code = ("import sys, attngraph; f = attngraph.fit; assert callable(f); "
            "assert 'torch' not in sys.modules, 'torch'; print('ok')")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=False)
    assert res.stdout.strip() == "ok", res.stderr
    assert {"fit", "save", "dataset"} <= set(attngraph.__all__)


def test_finetune_trains_a_run_on_to_a_straight_runs_weights(spec: Path, tmp_path: Path) -> None:
    """attngraph.finetune(RUN, steps=N) is train --resume: a run fitted 3 steps and then
    trained on to 6 has the parameters of one fitted 6 steps straight; a directory
    without a run is one error at it."""
    half = attngraph.fit(spec, RECORDS, steps=3, seed=2, out=tmp_path / "a", quiet=True)
    on = attngraph.finetune(half.path, steps=6, quiet=True)
    straight = attngraph.fit(spec, RECORDS, steps=6, seed=2, out=tmp_path / "b", quiet=True)
    assert on.checkpoint.step == 6 and on.path == half.path
    assert _same_parameters(on, straight)
    (tmp_path / "empty").mkdir()
    with pytest.raises(TrainingError, match="holds no run to train on"):
        attngraph.finetune(tmp_path / "empty", steps=2)
