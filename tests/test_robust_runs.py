"""Robustness of everything around the spec: the run directory, resume, a run's stored
state, the seed, and predict's class names.

- A spec and data that do not train together (a per-item output on per-example
  labels) are refused before the run directory is touched; ``--overwrite`` leaves the
  earlier run byte for byte.
- ``--resume`` trains on to the total asked for (``--steps`` or ``--epochs``), and a
  total already reached is one error with a hint, not a silent run that trains nothing.
- A damaged optimiser or RNG state, a ``data.json`` that parses but does not fit, and a
  seed out of range are one located error naming the file, never a traceback.
- ``predict`` names a class the data never named ``<class K>``, which no label (not
  even the label ``"3"``) can be: every class shows exactly once.
- Every entry of a checkpoint is checked whole on load (its type, each setting's
  range), a parameter holding NaN or infinity is refused, and predictions or metrics
  that overflow are an error at the example: never a traceback or a NaN written.
- A run's files are its own: a link, FIFO or folder among them is refused before
  anything is read or written, and the run writer never writes through a link.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from click.testing import Result
from robust_support import refused

from attngraph.train.data.vocab import LabelMap
from attngraph.train.run.runner import RunConfig, run
from attngraph.train.store import checkpoints as ck

ROOT = Path(__file__).resolve().parents[1]
GA = ROOT / "specs" / "global_attention.yaml"
#: global_attention with its logits read per word: a per-item output.
PER_ITEM = GA.read_text(encoding="utf-8").replace(
    "logits: {kind: linear, from: z, out: classes}",
    "logits: {kind: linear, from: x, out: classes}")


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _failed(res: Result, code: int = 1) -> str:
    assert res.exit_code == code, res.output
    assert "Traceback" not in res.output
    return res.output


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Texts labelled 1, 2, 3 (integers as text) for the 4-class global_attention."""
    d = tmp_path_factory.mktemp("data")
    rows = [{"text": f"key{w} the a of", "label": w} for w in (1, 2, 3) * 6]
    path = d / "texts.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _data_run(out: Path, data: Path, **kw: Any) -> Any:
    cfg = {"spec": str(GA), "data": str(data), "valid": str(data), "batch": 8,
           "eval_size": 8, "out": str(out), "quiet": True}
    return run(RunConfig(**{**cfg, **kw}))


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory: pytest.TempPathFactory, data: Path) -> Path:
    """A data run of one epoch (18 examples, batch 8: 3 steps)."""
    out = tmp_path_factory.mktemp("epoch") / "run"
    _data_run(out, data, epochs=1)
    return out


def _copy(run_dir: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(run_dir, tmp_path / "run"))


# --- 1. a misfit is found before the run directory is touched ---------------------------

def test_a_per_item_output_on_per_example_labels_writes_nothing(
        tmp_path: Path, data: Path, cli) -> None:
    """A spec whose logits are per word, trained on one label per text, is one error at
    the spec's output (the dry step, before step 1), and no run directory is made."""
    spec = tmp_path / "per_item.yaml"
    spec.write_text(PER_ITEM, encoding="utf-8")
    out = tmp_path / "run"
    exc = refused(lambda: _data_run(out, data, spec=str(spec), steps=2))
    assert exc.loc.file == str(spec) and exc.loc.line > 0 and exc.hint
    assert "output 'logits' has shape" in exc.message
    assert not out.exists()
    res = cli("train", spec, "--data", data, "--out", out, "--steps", "2")
    assert f"{spec}:{exc.loc.line}:{exc.loc.col}: error: " in _failed(res)
    assert not out.exists()


def test_overwrite_keeps_the_old_run_when_the_new_one_cannot_start(
        tmp_path: Path, data: Path, one_epoch: Path, cli) -> None:
    """--overwrite with a spec that does not fit the data leaves the earlier run exactly
    as it was, where it was: nothing is moved aside."""
    run_dir = _copy(one_epoch, tmp_path)
    before = _files(run_dir)
    spec = tmp_path / "per_item.yaml"
    spec.write_text(PER_ITEM, encoding="utf-8")
    res = cli("train", spec, "--data", data, "--out", run_dir, "--steps",
              "2", "--overwrite")
    assert "output 'logits' has shape" in _failed(res)
    assert _files(run_dir) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["per_item.yaml", "run"]


def test_the_dry_step_leaves_no_trace(tmp_path: Path) -> None:
    """The dry forward pass draws from a private RNG and restores buffers: a run's
    parameters are those of the step loop alone (a straight 4-step run twice agree, and
    the caller's RNG is untouched)."""
    state = torch.get_rng_state()
    a = run(RunConfig(spec=str(GA), steps=2, batch=8, eval_size=8, out=str(tmp_path / "a"),
                      quiet=True))
    assert torch.equal(torch.get_rng_state(), state)
    b = run(RunConfig(spec=str(GA), steps=2, batch=8, eval_size=8, out=str(tmp_path / "b"),
                      quiet=True))
    assert a.metrics == b.metrics
    ma, mb = ck.load_checkpoint(tmp_path / "a").model, ck.load_checkpoint(tmp_path / "b").model
    assert all(torch.equal(ma[k], mb[k]) for k in ma)


# --- 2. --resume trains on to the total asked for ----------------------------------------

def _steps(run_dir: Path) -> list[int]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(ln)["step"] for ln in lines if '"train"' in ln]


def test_resume_with_more_epochs_trains_on_to_them(tmp_path: Path, one_epoch: Path, cli) -> None:
    """--resume --epochs 2 on a finished one-epoch run trains epoch 2: steps 4-6 in the
    log, the checkpoint and the summary; then --steps 8 trains on to step 8."""
    run_dir = _copy(one_epoch, tmp_path)
    assert _steps(run_dir) == [1, 2, 3]
    cli("train", GA, "--out", run_dir, "--resume", "--epochs", "2", "--quiet", code=0)
    assert _steps(run_dir) == [1, 2, 3, 4, 5, 6]
    assert ck.load_checkpoint(run_dir).step == 6
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 6
    cli("train", GA, "--out", run_dir, "--resume", "--steps", "8", "--quiet", code=0)
    assert _steps(run_dir) == list(range(1, 9)) and ck.load_checkpoint(run_dir).step == 8


@pytest.mark.parametrize(("args", "at", "says"), [
    (["--epochs", "1"], "--epochs", "--epochs 1 (3 steps) is no more than that"),
    (["--steps", "3"], "--steps", "--steps 3 is no more than that"),
    (["--steps", "2"], "--steps", "--steps 2 is no more than that"),
    ([], "checkpoint.pt", "its own total of 3 steps is no more than that"),
], ids=["epochs-done", "steps-done", "steps-fewer", "finished"])
def test_resume_to_a_total_already_reached_is_refused(
        tmp_path: Path, one_epoch: Path, args: list[str], at: str, says: str, cli) -> None:
    """--resume with a total at or below the steps done (or none, on a finished run) is
    one error with a hint giving a larger total; the run's files keep their bytes."""
    run_dir = _copy(one_epoch, tmp_path)
    before = _files(run_dir)
    text = _failed(cli("train", GA, "--out", run_dir, "--resume", *args))
    first = text.strip().splitlines()[0]
    assert first.split(": error: ")[0].endswith(at), text
    assert "already trained 3 steps" in first and says in first
    assert "hint: give a larger total, e.g. --steps 6 or --epochs 2" in text
    assert _files(run_dir) == before


def test_resume_without_a_total_finishes_the_run_as_asked(tmp_path: Path) -> None:
    """A run asked for 4 steps whose last checkpoint is at step 2 (as a kill leaves it)
    continues to 4 on a bare --resume: its stored total, not the spec's 300 steps."""
    out = tmp_path / "run"
    run(RunConfig(spec=str(GA), steps=2, batch=8, eval_size=8, out=str(out), quiet=True))
    data = torch.load(out / ck.CHECKPOINT, weights_only=True)
    assert data["config"]["steps"] == 2  # the total asked for is stored
    data["config"]["steps"] = 4
    torch.save(data, out / ck.CHECKPOINT)
    summary = run(RunConfig(spec=str(GA), out=str(out), resume=True, quiet=True))
    assert summary.steps == 4 and _steps(out) == [1, 2, 3, 4]


def test_epochs_on_a_builtin_task_resume_is_refused(tmp_path: Path, cli) -> None:
    """--resume --epochs on a run of a built-in task (no data to count passes over) is
    one error at --epochs, not ignored."""
    out = tmp_path / "run"
    run(RunConfig(spec=str(GA), steps=2, batch=8, eval_size=8, out=str(out), quiet=True))
    text = _failed(cli("train", GA, "--out", out, "--resume", "--epochs", "3"))
    assert text.startswith("--epochs: error: --epochs counts passes over --data")


# --- 3. a damaged optimiser or RNG state -------------------------------------------------

def _moment(d: dict[str, Any]) -> dict[str, Any]:
    return next(iter(d["optimizer"]["state"].values()))


def _scalar_moment(d: dict[str, Any]) -> None:
    _moment(d)["exp_avg"] = torch.tensor(0.5)


def _nan_moment(d: dict[str, Any]) -> None:
    m = _moment(d)["exp_avg_sq"]
    m.view(-1)[0] = float("nan")


def _lr_text(d: dict[str, Any]) -> None:
    d["optimizer"]["param_groups"][0]["lr"] = "0.005"


def _no_betas(d: dict[str, Any]) -> None:
    del d["optimizer"]["param_groups"][0]["betas"]


def _bad_beta(d: dict[str, Any]) -> None:
    d["optimizer"]["param_groups"][0]["betas"] = (1.5, 0.999)


def _moment_shape(d: dict[str, Any]) -> None:
    _moment(d)["exp_avg"] = torch.zeros(3, 5, 7)


def _step_int(d: dict[str, Any]) -> None:
    _moment(d)["step"] = torch.tensor(2, dtype=torch.int64)


def _no_moment(d: dict[str, Any]) -> None:
    del _moment(d)["exp_avg_sq"]


def _rng_zeros(d: dict[str, Any]) -> None:
    d["rng"]["torch"] = torch.zeros_like(d["rng"]["torch"])


@pytest.mark.parametrize(("damage", "says"), [
    (_scalar_moment, "exp_avg has shape (), not ("),
    (_nan_moment, "exp_avg_sq holds NaN or infinity"),
    (_lr_text, "lr is text ('0.005'), not a number"),
    (_no_betas, "parameter group 0 lacks betas"),
    (_bad_beta, "parameter group 0: Invalid beta parameter at index 0: 1.5"),
    (_moment_shape, "exp_avg has shape (3, 5, 7), not ("),
    (_step_int, "step is torch.int64, not torch.float32"),
    (_no_moment, "lacks exp_avg_sq"),
    (_rng_zeros, "damaged rng"),
], ids=["scalar-moment", "nan-moment", "lr-text", "no-betas", "beta-range", "moment-shape",
        "step-dtype", "missing-moment", "rng-state"])
def test_a_damaged_optimizer_or_rng_state_is_refused_on_resume(
        tmp_path: Path, damage: Callable[[dict[str, Any]], None], says: str, cli) -> None:
    """A checkpoint whose optimiser state (or torch RNG state) loads but cannot train on
    is one error naming the checkpoint and what is wrong, with a hint; nothing is
    trained and the run's files keep their bytes (also through the CLI, exit 1)."""
    out = tmp_path / "run"
    run(RunConfig(spec=str(GA), steps=2, batch=8, eval_size=8, out=str(out), quiet=True))
    path = out / ck.CHECKPOINT
    data = torch.load(path, weights_only=True)
    damage(data)
    torch.save(data, path)
    before = _files(out)
    exc = refused(lambda: run(RunConfig(spec=str(GA), steps=4, out=str(out), resume=True,
                                        quiet=True)))
    assert exc.loc.file == str(path) and says in exc.message, exc.message
    assert exc.hint and ("--resume" in exc.hint or "--overwrite" in exc.hint)
    text = _failed(cli("train", GA, "--steps", "4", "--out", out, "--resume"))
    assert text.startswith(f"{path}: error: ")
    assert _files(out) == before


# --- 4. a data.json that parses but does not fit ----------------------------------------

def _edit(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        *path, last = key.split(".")
        for k in path:
            d = d[k]
        if value is _DROP:
            del d[last]
        else:
            d[last] = value
    return edit


_DROP = object()


def _both(*edits: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        for e in edits:
            e(d)
    return edit


@pytest.mark.parametrize(("edit", "says"), [
    (_edit("fields", {}), "'fields': Dictionary should have at least 1 item"),
    (_edit("fields.tokens", 3), "'fields.tokens': Input should be a valid string"),
    (_edit("types.tokens", "pixels"), "'types.tokens': Input should be 'tokens'"),
    (_edit("kind", _DROP), "it lacks 'kind'"),
    (_edit("tokenize", 2), "'tokenize': Input should be 'word' or 'char'"),
    (_edit("vocabs.tokens.tokens", ["<bos>", "<pad>", "<unk>", "<eos>", 7]),
     "'vocabs.tokens.tokens.4': Input should be a valid string"),
    (_edit("vocabs.tokens.tokens", "the a of"), "'vocabs.tokens.tokens': Input should be a "
     "valid list"),
    (_edit("vocabs", {}), "one vocabulary per text input"),
    (_edit("labels.names", ["1", "1"]), "label '1' appears twice"),
    (_edit("labels", None), "a classify run has a label column and labels"),
    (_edit("extra", 1), "'extra' is not a data.json key"),
    (_both(_edit("types.tokens", "image"), _edit("vocabs", {})),
     "does not fit spec 'global_attention': input 'tokens' is image here, tokens in the spec"),
    (_edit("labels.names", [str(i) for i in range(9)]), "9 labels, the spec's logits give 4"),
    (_edit("vocabs.tokens.tokens", ["<bos>", "<pad>", "<unk>", "<eos>",
                                    *(f"w{i}" for i in range(40))]),
     "the vocabulary of 'tokens' has 44 tokens, the spec's input takes 32 ids"),
], ids=["empty-fields", "field-kind", "type-kind", "no-kind", "tokenize-kind",
        "vocab-not-text", "vocab-not-list", "no-vocab", "labels-twice", "no-labels",
        "extra-key", "other-type", "too-many-labels", "vocab-too-large"])
def test_a_data_json_that_does_not_fit_is_one_located_error(
        tmp_path: Path, data: Path, one_epoch: Path,
        edit: Callable[[dict[str, Any]], None], says: str, cli) -> None:
    """A data.json that parses but has a wrong structure, or does not fit the run's spec,
    is one error at data.json (at its key's line when there is one) with a hint, from
    load_run and from predict and evaluate (exit 1), never a KeyError or ValueError."""
    from attngraph import load_run

    run_dir = _copy(one_epoch, tmp_path)
    path = run_dir / "data.json"
    d = json.loads(path.read_text(encoding="utf-8"))
    edit(d)
    path.write_text(json.dumps(d, indent=1) + "\n", encoding="utf-8")
    exc = refused(lambda: load_run(run_dir))
    assert exc.loc.file == str(path) and says in exc.message, exc.message
    assert exc.hint and "train the run again" in exc.hint
    for cmd in ("predict", "evaluate"):
        text = _failed(cli(cmd, run_dir, "--data", data))
        assert text.startswith(f"{exc.loc}: error: this run's data.json")


def test_a_data_json_error_points_at_its_key(tmp_path: Path, one_epoch: Path) -> None:
    """The error of a wrong value stands at the line and column of its key."""
    from attngraph import load_run

    run_dir = _copy(one_epoch, tmp_path)
    path = run_dir / "data.json"
    text = path.read_text(encoding="utf-8").replace('"tokenize": "word"', '"tokenize": 5')
    path.write_text(text, encoding="utf-8")
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if '"tokenize"' in ln)
    exc = refused(lambda: load_run(run_dir))
    assert (exc.loc.line, exc.loc.col) == (line, 2)
    assert "^" in exc.diagnostics[0].format()


# --- 5. the seed's range --------------------------------------------------------------

@pytest.mark.parametrize("seed", ["-1", "99999999999999999999"])
def test_a_seed_out_of_range_is_refused_by_the_option(seed: str, tmp_path: Path, cli) -> None:
    """train --seed and compare --seeds outside 0..2**32-1 exit 2 with the range (click's
    usage error), before anything is loaded or written."""
    text = _failed(cli("train", GA, "--seed", seed, "--out", tmp_path / "r"), 2)
    assert "Invalid value for '--seed'" in text and "4294967295" in text
    text = _failed(cli("compare", GA, "--seeds", f"0,{seed}", "--out",
                       tmp_path / "c"), 2)
    assert "Invalid value for '--seeds'" in text and "4294967295" in text
    assert not any(tmp_path.iterdir())


def test_a_seed_out_of_range_through_the_api_is_refused(tmp_path: Path) -> None:
    """RunConfig(seed=-1) and compare(seeds=[2**40]) are one error at the seed option."""
    from attngraph.train.report.compare import compare

    exc = refused(lambda: run(RunConfig(spec=str(GA), seed=-1, out=str(tmp_path / "r"))))
    assert str(exc.loc) == "--seed" and "seed -1 is out of range" in exc.message
    exc = refused(lambda: compare([str(GA)], seeds=[2**40], out=str(tmp_path / "c")))
    assert str(exc.loc) == "--seeds" and exc.hint
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("seed", [-1, 2**64, "0"], ids=["negative", "huge", "text"])
def test_a_stored_seed_out_of_range_is_one_error_naming_the_checkpoint(
        tmp_path: Path, data: Path, one_epoch: Path, seed: Any, cli) -> None:
    """A checkpoint whose stored seed is out of range (or not a number) is one error
    naming it, from predict, evaluate, export and --resume alike."""
    run_dir = _copy(one_epoch, tmp_path)
    path = run_dir / ck.CHECKPOINT
    d = torch.load(path, weights_only=True)
    d["config"]["seed"] = seed
    torch.save(d, path)
    for args in (["predict", str(run_dir), "--data", str(data)],
                 ["evaluate", str(run_dir), "--data", str(data)],
                 ["export", str(run_dir), "-o", str(tmp_path / "m.py"), "--format", "python"],
                 ["train", str(GA), "--out", str(run_dir), "--resume", "--epochs", "2"]):
        text = _failed(cli(*args))
        assert text.startswith(f"{path}: error: this checkpoint's"), text
        assert "seed" in text.splitlines()[0]


# --- 6. class names in predictions ----------------------------------------------------

def test_labels_map_never_collides_with_an_unlabelled_class() -> None:
    """An unlabelled class is <class K>, distinct from every label, also from a label
    written <class K>; every class has its own name."""
    assert LabelMap(["1", "2", "3"]).names_for(4) == ["1", "2", "3", "<class 3>"]
    labels = LabelMap(["<class 2>", "<<class 2>>"])
    names = labels.names_for(4)
    assert names[2] == "<<<class 2>>>" and len(set(names)) == 4


def test_predict_shows_every_class_once(tmp_path: Path, data: Path, one_epoch: Path, cli) -> None:
    """A run trained on labels 1, 2, 3 of a 4-class spec predicts with probabilities for
    1, 2, 3 and <class 3>: four entries, each class's own softmax figure, summing to 1;
    label "3"'s figure is not overwritten by class 3's."""
    from attngraph import load_run

    r = load_run(one_epoch)
    rows = r.predict(data)
    recs = r.records(data)
    logits = r.outputs(r.batch_of(recs))["logits"].reshape(len(recs), -1)
    for row, lg in zip(rows, logits, strict=True):
        probs = row["probabilities"]
        assert list(probs) == ["1", "2", "3", "<class 3>"]
        want = lg.softmax(-1).tolist()
        assert [probs[k] for k in ("1", "2", "3", "<class 3>")] == pytest.approx(want, abs=2e-6)
        assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-5)
        assert row["prediction"] == max(probs, key=probs.__getitem__)
    res = cli("predict", one_epoch, "--data", data, code=0)
    first = json.loads(res.output.splitlines()[0])
    assert len(first["probabilities"]) == 4 and first["label"] == "1"


# --- 7. a checkpoint's plain data, checked whole (fuzz rundir 48, 2797, 1559) -----------

def _cfg_edit(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        *path, last = key.split(".")
        for k in path:
            d = d[k]
        d[last] = value
    return edit


@pytest.mark.parametrize(("edit", "says"), [
    (_cfg_edit("config", True), "damaged config (not a dict of the run's settings; found True"),
    (_cfg_edit("config", torch.zeros(0)), "damaged config (not a dict of the run's settings; "
     "found a tensor of shape (0,)"),
    (_cfg_edit("config.seconds", "a" * 300), "config lacks valid seconds: Input should be a "
     "valid number (found 'aaaa"),
    (_cfg_edit("config.seconds", float("nan")), "config lacks valid seconds"),
    (_cfg_edit("config.batch", True), "config lacks valid batch"),
    (_cfg_edit("config.data.valid_fraction", 1.5), "config lacks valid data.valid_fraction"),
    (_cfg_edit("config.data.fields", [1, 2]), "config lacks valid data.fields"),
    (_cfg_edit("config.extra", 1), "config holds 'extra', which is not a run's setting"),
    (_cfg_edit("step", torch.tensor(2)), "damaged step (not a step number; found a tensor"),
    (_cfg_edit("metrics", {"accuracy": "high"}), "damaged metrics"),
    (_cfg_edit("spec_hash", "zz"), "damaged spec_hash"),
    (_cfg_edit("rng.extra", 1), "damaged rng"),
], ids=["config-true", "config-tensor", "seconds-text", "seconds-nan", "batch-flag",
        "valid-fraction", "fields-list", "config-extra", "step-tensor", "metric-text",
        "spec-hash", "rng-extra"])
def test_a_checkpoint_entry_of_another_type_is_one_error_naming_it(
        tmp_path: Path, data: Path, one_epoch: Path,
        edit: Callable[[dict[str, Any]], None], says: str) -> None:
    """Any entry of a checkpoint of another type or out of range (the settings as True
    or an empty tensor, the seconds as text) is one error at checkpoint.pt naming the
    entry, with a hint, from load_run (predict, evaluate, export) and from --resume,
    never a TypeError or ValueError; the run's files keep their bytes."""
    from attngraph import load_run

    run_dir = _copy(one_epoch, tmp_path)
    path = run_dir / ck.CHECKPOINT
    d = torch.load(path, weights_only=True)
    edit(d)
    torch.save(d, path)
    before = _files(run_dir)
    for call in (lambda: load_run(run_dir),
                 lambda: _data_run(run_dir, data, resume=True, epochs=2)):
        exc = refused(call)
        assert exc.loc.file == str(path) and says in exc.message, exc.message
        assert exc.message.startswith("this checkpoint") and "train again" in exc.hint
    assert _files(run_dir) == before


# --- 8. non-finite weights and predictions (fuzz rundir 1585, 3704) -------------------

@pytest.mark.parametrize("fill", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_a_non_finite_parameter_is_refused_naming_it(
        tmp_path: Path, data: Path, one_epoch: Path, fill: float, cli) -> None:
    """A checkpoint parameter holding NaN or infinity is one error at checkpoint.pt
    naming the tensor, from load_run and predict (exit 1, no prediction printed)."""
    from attngraph import load_run

    run_dir = _copy(one_epoch, tmp_path)
    path = run_dir / ck.CHECKPOINT
    d = torch.load(path, weights_only=True)
    d["model"]["nodes.score.query"].fill_(fill)
    torch.save(d, path)
    exc = refused(lambda: load_run(run_dir))
    assert exc.loc.file == str(path) and exc.hint and "--lr" in exc.hint
    assert "parameter nodes.score.query holds " + ("NaN" if fill != fill else "infinity") \
        in exc.message
    text = _failed(cli("predict", run_dir, "--data", data))
    assert text.startswith(f"{path}: error: ") and "probabilities" not in text


def _huge(run_dir: Path) -> None:
    """Parameters that are finite but overflow: the logits are infinite."""
    path = run_dir / ck.CHECKPOINT
    d = torch.load(path, weights_only=True)
    d["model"]["nodes.logits.weight"].fill_(3e38)
    torch.save(d, path)


def test_an_overflowing_prediction_is_an_error_at_its_example(
        tmp_path: Path, data: Path, one_epoch: Path, cli) -> None:
    """Finite parameters whose predictions overflow to NaN give one error at the
    example's line of the data file, never a NaN: predict -o leaves the earlier output
    file as it was (no invalid JSON is written), and nothing is printed."""
    from attngraph import load_run

    run_dir = _copy(one_epoch, tmp_path)
    _huge(run_dir)
    exc = refused(lambda: load_run(run_dir).predict(data))
    assert (exc.loc.file, exc.loc.line) == (str(data), 1)
    assert "NaN or infinity for this example (its probabilities." in exc.message
    assert exc.hint and "train it again" in exc.hint
    out = tmp_path / "preds.jsonl"
    out.write_text("an earlier file\n", encoding="utf-8")
    text = _failed(cli("predict", run_dir, "--data", data, "-o", out))
    assert text.startswith(f"{data}:1:1: error: ")
    assert out.read_text(encoding="utf-8") == "an earlier file\n"


def test_a_non_finite_metric_is_an_error_naming_the_example(
        tmp_path: Path, data: Path, one_epoch: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """evaluate never returns (or prints, with --json) a NaN metric: it is an error at
    the first example whose outputs are not finite, else at the data file."""
    from attngraph import load_run
    from attngraph.train.tasks import lookup as tasks

    monkeypatch.setattr(tasks, "compute_metrics", lambda *a, **k: {"accuracy": float("nan")})
    exc = refused(lambda: load_run(one_epoch).evaluate(data))
    assert (exc.loc.file, exc.loc.line) == (str(data), 0)
    assert "for these records (the run's accuracy on these records is nan)" in exc.message
    run_dir = _copy(one_epoch, tmp_path)
    _huge(run_dir)
    exc = refused(lambda: load_run(run_dir).evaluate(data))
    assert (exc.loc.file, exc.loc.line) == (str(data), 1)
    text = _failed(cli("evaluate", run_dir, "--data", data, "--json"))
    assert "NaN" not in text.replace("NaN or infinity", "") and "error:" in text


# --- 9. a run's files are its own: no link, FIFO or folder (fuzz rundir 1769, 270) -----

def _special(path: Path, kind: str, outside: Path) -> None:
    path.unlink()
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()


@pytest.mark.parametrize("kind", ["link", "fifo", "dir"])
@pytest.mark.parametrize("name", ["summary.json", "metrics.jsonl", "checkpoint.pt",
                                  "data.json"])
def test_a_run_file_that_is_not_its_own_is_refused_before_anything(
        tmp_path: Path, data: Path, one_epoch: Path, name: str, kind: str, cli) -> None:
    """A run whose summary.json (or other file) is a link (here to a good copy outside
    the run), a FIFO or a folder is refused at that file with a hint by --resume,
    predict, evaluate and export, before anything is read or written: the run's files
    and the file the link points to keep their bytes (a resume used to train, rewrite
    checkpoint.pt and metrics.jsonl, then fail at the summary, or write through the
    link)."""
    from attngraph import load_run

    run_dir = _copy(one_epoch, tmp_path)
    outside = tmp_path / f"outside-{name}"
    outside.write_bytes((run_dir / name).read_bytes())
    _special(run_dir / name, kind, outside)
    before, kept = _files(run_dir), outside.read_bytes()
    exc = refused(lambda: _data_run(run_dir, data, resume=True, epochs=2))
    assert exc.loc.file == str(run_dir / name) and exc.hint
    says = {"link": f"this run's {name} is a symbolic link (to {outside})",
            "fifo": "is a FIFO (named pipe)", "dir": "is a directory"}[kind]
    assert says in exc.message
    assert refused(lambda: load_run(run_dir)).message == exc.message
    for args in (["predict", str(run_dir), "--data", str(data)],
                 ["evaluate", str(run_dir), "--data", str(data)],
                 ["export", str(run_dir), "-o", str(tmp_path / "m.py"), "--format", "python"]):
        assert _failed(cli(*args)).startswith(f"{run_dir / name}: error: ")
    assert _files(run_dir) == before and outside.read_bytes() == kept
    assert not (tmp_path / "m.py").exists()


@pytest.mark.parametrize("kind", ["link", "fifo", "dir"])
def test_a_metrics_table_that_is_not_its_own_stops_a_resume_before_anything(
        tmp_path: Path, data: Path, one_epoch: Path, kind: str) -> None:
    """metrics.csv, which a resume writes anew, as a link, a FIFO or a folder: the
    resume is refused at it before anything is written (it rewrote metrics.jsonl, a
    log with a line past the checkpoint cut back, then failed at the table; fuzz
    rundir seed 3103 case 949). Reading the run (predict, evaluate) does not need it."""
    from attngraph import load_run

    run_dir = _copy(one_epoch, tmp_path)
    with (run_dir / "metrics.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"step": 999, "split": "train", "loss": 1.0}\n')  # past the checkpoint
    outside = tmp_path / "outside.csv"
    outside.write_bytes((run_dir / "metrics.csv").read_bytes())
    _special(run_dir / "metrics.csv", kind, outside)
    before, kept = _files(run_dir), outside.read_bytes()
    exc = refused(lambda: _data_run(run_dir, data, resume=True, epochs=2))
    assert exc.loc.file == str(run_dir / "metrics.csv") and exc.hint
    says = {"link": "this run's metrics.csv is a symbolic link", "fifo": "is a FIFO",
            "dir": "is a directory"}[kind]
    assert says in exc.message
    assert _files(run_dir) == before and outside.read_bytes() == kept
    assert load_run(run_dir).predict(data)


def test_the_run_writer_never_writes_through_a_link(tmp_path: Path, data: Path) -> None:
    """atomic_write refuses a run file that is a link (the target keeps its bytes), and
    a fresh run into a folder holding only a dangling summary.json link is refused as
    holding a run, so it never creates the file the link points to."""
    from attngraph.train.store import directory as rundir

    target = tmp_path / "elsewhere.json"
    target.write_text("mine\n", encoding="utf-8")
    link = tmp_path / "run" / "summary.json"
    link.parent.mkdir()
    link.symlink_to(target)
    exc = refused(lambda: rundir.atomic_write(link, b"{}\n"))
    assert exc.loc.file == str(link) and "symbolic link" in exc.message
    assert target.read_text(encoding="utf-8") == "mine\n"
    target.unlink()  # dangling now
    exc = refused(lambda: _data_run(link.parent, data, steps=1))
    assert "already holds a run (summary.json)" in exc.message
    assert not target.exists()


@pytest.mark.parametrize(("key", "value", "says"), [
    ("options", {"zzz": 1}, "task 'needle' has no option 'zzz'"),
    ("eval_size", 10**12, "would make a tensor of"),
    ("batch", 10**12, "would make a tensor of"),
], ids=["unknown-option", "huge-eval-size", "huge-batch"])
def test_stored_settings_that_make_no_run_are_located_at_the_checkpoint(
        tmp_path: Path, key: str, value: Any, says: str) -> None:
    """A built-in task run whose stored task options or batch sizes do not make a run
    (an unknown option, a test batch of 10**12 examples) is one error at checkpoint.pt
    from load_run (as predict, attend and export load it) and from --resume: never a
    MemoryError, never an error blaming the spec for what the checkpoint holds."""
    from attngraph import load_run

    out = tmp_path / "run"
    run(RunConfig(spec=str(GA), steps=2, batch=8, eval_size=8, out=str(out), quiet=True))
    path = out / ck.CHECKPOINT
    d = torch.load(path, weights_only=True)
    d["config"][key] = value
    torch.save(d, path)
    before = _files(out)
    calls = [lambda: run(RunConfig(spec=str(GA), steps=4, out=str(out), resume=True,
                                   quiet=True))]
    if key != "batch":  # predicting reads the stored batch of none
        calls.append(lambda: load_run(out))
    for call in calls:
        exc = refused(call)
        assert exc.loc.file == str(path) and says in exc.message, exc.message
        assert exc.message.startswith("this checkpoint's stored settings do not make a run")
    assert _files(out) == before
