"""A run written by `attngraph import` is allowed past the parameter limit of specs
(guard.MAX_PARAMS, 100M) when it is read back, bounded instead by the memory the
machine has; a run not written by import keeps the limit. A tiny model stands in for
a large one: the limit is lowered below its size, and the machine's memory below
what reading it needs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

transformers = pytest.importorskip(
    "transformers", reason="the real-model tests need transformers (pip install -e '.[dev]')")

import attngraph  # noqa: E402
from attngraph import guard  # noqa: E402
from attngraph.cli import main  # noqa: E402
from attngraph.errors import SpecError, TrainingError  # noqa: E402
from attngraph.realmodels import import_model, rundir  # noqa: E402
from attngraph.train.store import imported  # noqa: E402


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An imported tiny GPT-2 (about 6,000 parameters), no tokenizer."""
    torch.manual_seed(0)
    src = tmp_path_factory.mktemp("gpt2")
    cfg = transformers.GPT2Config(vocab_size=16, n_embd=16, n_layer=2, n_head=2, n_positions=16)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(src)
    out = tmp_path_factory.mktemp("run") / "run"
    import_model(src, out)
    return out


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch, run: Path) -> int:
    """The parameter limit of specs lowered below the imported model's size."""
    n = sum(p.numel() for p in attngraph.load_run(run).model.parameters())
    monkeypatch.setattr(guard, "MAX_PARAMS", n // 2)
    return n


def test_an_import_over_the_limit_loads(small_limit: int, run: Path, tmp_path: Path) -> None:
    """Over the limit, the imported run loads with its weights, and attend draws it."""
    loaded = attngraph.load_run(run)
    assert sum(p.numel() for p in loaded.model.parameters()) == small_limit
    res = CliRunner().invoke(main, ["attend", str(run), "--input", "3 1 4",
                                    "-o", str(tmp_path / "a.png")])
    assert res.exit_code == 0, res.output


def test_an_import_over_the_limit_trains_on(small_limit: int, run: Path,
                                            tmp_path: Path) -> None:
    """Over the limit, training on from the import (--resume) runs its steps too."""
    run = Path(shutil.copytree(run, tmp_path / "run"))
    res = CliRunner().invoke(main, ["train", str(run / "spec.yaml"), "--out", str(run),
                                    "--resume", "--steps", "2", "--quiet"])
    assert res.exit_code == 0, res.output
    import json

    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps"] == 2


def test_the_same_run_not_written_by_import_keeps_the_limit(small_limit: int, run: Path,
                                                             tmp_path: Path) -> None:
    """The allowance is import's: the same files without import.json are refused by the
    parameter limit, with its figures."""
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / rundir.IMPORT_FILE).unlink()
    with pytest.raises(SpecError, match=f"spec would have {small_limit:,} parameters, "
                       f"over the limit of {small_limit // 2:,}"):
        attngraph.load_run(copy)


def test_an_import_the_machine_cannot_hold_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                      run: Path, tmp_path: Path) -> None:
    """With less memory free than twice the checkpoint's size, load_run refuses at the
    checkpoint, giving both figures; import refuses the same at the source."""
    size = (run / "checkpoint.pt").stat().st_size
    monkeypatch.setattr(imported, "available_memory", lambda: 2 * size - 1)
    with pytest.raises(TrainingError, match="reading these weights needs about .* GiB "
                       r"\(twice the .* GiB on disk.*but this machine has .* GiB free") as e:
        attngraph.load_run(run)
    assert e.value.loc.file == str(run / "checkpoint.pt")
    monkeypatch.setattr(imported, "available_memory", lambda: 2 * size)
    attngraph.load_run(run)  # just enough
    monkeypatch.setattr(imported, "available_memory", lambda: 10)
    res = CliRunner().invoke(main, ["import", str(_source(run)), "--out", str(tmp_path / "r")])
    assert res.exit_code == 1 and "reading these weights needs about" in res.output
    assert not (tmp_path / "r").exists()


def _source(run: Path) -> Path:
    """The model directory a run was imported from (its import.json says)."""
    import json

    return Path(json.loads((run / rundir.IMPORT_FILE).read_text())["source"])


def test_available_memory_reads_the_machine() -> None:
    """The bound is a real figure of this machine: positive, at most its physical memory."""
    import os

    free = rundir.available_memory()
    assert free is not None and free > 0
    assert free <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
