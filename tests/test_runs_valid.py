"""One name for the held-out split, ``valid``; ``metrics.csv`` beside the JSON log."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from attngraph.errors import TrainingError
from attngraph.train.report.compare import read_run
from attngraph.train.run.runner import RunConfig, run
from attngraph.train.tasks.lookup import get_task

ROOT = Path(__file__).resolve().parents[1]
GA = str(ROOT / "specs" / "global_attention.yaml")


def _run(out: Path, steps: int, **kw: Any) -> str:
    log = io.StringIO()
    run(RunConfig(spec=GA, out=str(out), steps=steps, batch=8, eval_every=2, eval_size=32,
                  quiet=True, **kw), stream=log)
    return log.getvalue()


def _log(out: Path) -> list[dict[str, Any]]:
    return [json.loads(ln) for ln in (out / "metrics.jsonl").read_text().splitlines()]


def _csv(out: Path) -> tuple[list[str], list[dict[str, str]]]:
    with (out / "metrics.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        return list(reader.fieldnames or []), list(reader)


def _matches(out: Path) -> None:
    """metrics.csv holds one row per line of metrics.jsonl, the same figures."""
    head, rows = _csv(out)
    log = _log(out)
    assert head == ["step", "split", "loss", "accuracy", "attention_peak"]
    assert len(rows) == len(log)
    for row, line in zip(rows, log, strict=True):
        assert int(row["step"]) == line["step"]
        assert row["split"] == ("valid" if line["split"] == "test" else line["split"])
        for k in head[2:]:
            if k in line:
                assert float(row[k]) == line[k] or (math.isnan(line[k])
                                                    and math.isnan(float(row[k])))
            else:
                assert row[k] == ""


def test_the_log_and_the_console_call_the_held_out_split_valid(tmp_path: Path) -> None:
    """Evaluation lines of metrics.jsonl say "split": "valid", and the progress lines
    name the figures valid_<metric>; "test" appears in neither."""
    console = _run(tmp_path / "r", 4)
    splits = {ln["split"] for ln in _log(tmp_path / "r")}
    assert splits == {"train", "valid"}
    assert "valid_accuracy" in console and "test" not in console


def test_metrics_csv_parses_and_matches_the_json_log(tmp_path: Path) -> None:
    """metrics.csv has a fixed header (step, split, loss, the task's metrics) and one
    row per JSON line with the same figures; pandas reads it too."""
    pd = pytest.importorskip("pandas")
    _run(tmp_path / "r", 6)
    _matches(tmp_path / "r")
    frame = pd.read_csv(tmp_path / "r" / "metrics.csv")
    assert list(frame["split"]) == [ln["split"] for ln in _log(tmp_path / "r")]
    valid = frame[frame["split"] == "valid"]
    assert list(valid["step"]) == [2, 4, 6] and valid["loss"].isna().all()


def test_metrics_csv_follows_the_log_through_a_resume(tmp_path: Path) -> None:
    """A resumed run's metrics.csv is the JSON log's kept lines plus the new ones: no
    row twice, none missing, also when the table was cut off by a kill."""
    _run(tmp_path / "r", 4)
    with (tmp_path / "r" / "metrics.csv").open("a") as fh:
        fh.write("5,train,1.2")  # a row torn by a kill, past the checkpoint
    _run(tmp_path / "r", 8, resume=True)
    _matches(tmp_path / "r")
    assert [int(r["step"]) for r in _csv(tmp_path / "r")[1]
            if r["split"] == "train"] == list(range(1, 9))


def test_a_run_an_earlier_version_wrote_still_reads(tmp_path: Path) -> None:
    """Runs written before the rename log "split": "test": compare reads those lines as
    validation figures, and --resume continues such a run (its table says valid)."""
    _run(tmp_path / "r", 4)
    log = tmp_path / "r" / "metrics.jsonl"
    log.write_text(log.read_text().replace('"split": "valid"', '"split": "test"'))
    (tmp_path / "r" / "metrics.csv").unlink()
    old = read_run(tmp_path / "r", 0)
    assert [int(row["step"]) for row in old.curve] == [2, 4]
    assert old.metrics["accuracy"] == _log(tmp_path / "r")[-1]["accuracy"]
    _run(tmp_path / "r", 6, resume=True)
    splits = [ln["split"] for ln in _log(tmp_path / "r") if ln["split"] != "train"]
    assert splits == ["test", "test", "valid"]
    assert [int(row["step"]) for row in read_run(tmp_path / "r", 0).curve] == [2, 4, 6]
    _matches(tmp_path / "r")


def test_a_task_takes_valid_and_its_old_name_test() -> None:
    """task.batch(split="valid") is the fixed held-out batch, "test" the same batch
    (the name other code used), and an unknown split is one error naming both."""
    for name in ("needle", "digit_captions"):
        t = get_task(name, seed=1)
        a, b = t.batch(4, split="valid"), t.batch(4, split="test")
        assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(TrainingError, match="'train' or 'valid', not 'dev'"):
        get_task("needle").batch(2, split="dev")


def test_a_data_task_takes_valid_and_test(tmp_path: Path) -> None:
    """A data file's task gives its first validation examples for "valid" and "test"."""
    from attngraph.frontend import load_spec
    from attngraph.train.data.batches import data_task

    p = tmp_path / "d.jsonl"
    p.write_text("".join(json.dumps({"text": f"w{i} x", "label": "ab"[i % 2]}) + "\n"
                         for i in range(20)))
    task = data_task(load_spec(GA), str(p), seed=0)
    a, b = task.batch(3, split="valid"), task.batch(3, split="test")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert len(a[task.target]) == min(3, len(task.valid))
