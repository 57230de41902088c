"""The fuzzer's surfaces around the spec (data files, run directories, exports, plugins):
each case replays, the oracle sees what it must, and a short run of each finds no defect.

The long run is ``make fuzz`` (``python -m fuzz.run --surface around --count 100000``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fuzz.run import fuzz, main
from fuzz.surface import (
    AROUND,
    Case,
    changed,
    expand,
    finite,
    run_case,
    snapshot,
    special,
    surface_of,
)

SEED = 20261126


def test_surface_names_expand_and_take_turns() -> None:
    """``around`` is the five surfaces in turn, ``all`` adds the spec's; case i of a mixed
    run belongs to surface i mod n."""
    assert expand("around") == AROUND == ("data", "rundir", "export", "plugin", "api")
    assert expand("all")[0] == "spec" and expand("data") == ("data",)
    assert [surface_of(AROUND, i) for i in range(6)] == [*AROUND, "data"]


@pytest.mark.parametrize("surface", AROUND)
def test_a_case_number_is_the_same_case_every_time(surface: str, tmp_path: Path) -> None:
    """Case i of seed s applies the same operators every time (the report's case numbers
    replay with --case)."""
    states: dict[str, object] = {}
    a = [run_case(surface, 3, i, tmp_path / "a", states) for i in range(6)]
    b = [run_case(surface, 3, i, tmp_path / "b", {}) for i in range(6)]
    assert [ops for _, ops in a] == [ops for _, ops in b]
    assert [o.outcome for o, _ in a] == [o.outcome for o, _ in b]
    assert len({tuple(ops) for _, ops in a}) > 3


def test_the_snapshot_sees_a_changed_a_new_and_a_retyped_file(tmp_path: Path) -> None:
    """The lost-file check: a file rewritten, added, or replaced by a FIFO or a link shows
    up; nothing is opened but regular files (a FIFO does not block the snapshot)."""
    (tmp_path / "a").write_text("1", encoding="utf-8")
    (tmp_path / "b").write_text("2", encoding="utf-8")
    before = snapshot(tmp_path)
    (tmp_path / "a").write_text("3", encoding="utf-8")
    special(tmp_path / "b", "fifo", tmp_path)
    (tmp_path / "c").symlink_to("/dev/zero")
    after = snapshot(tmp_path)
    assert changed(before, after) == [str(tmp_path / n) for n in "abc"]
    assert changed(before, after, lambda p: p.endswith("c")) == [str(tmp_path / n)
                                                                  for n in "ab"]


def test_finite_finds_a_nan_anywhere() -> None:
    """Predictions, metrics and tensors are searched for NaN and infinities."""
    import torch

    assert finite([{"p": [0.5, 0.5]}, {"p": [1.0]}]) is None
    assert finite([{"p": [0.5, float("nan")]}]) == "[0].p[1]"
    assert finite({"z": torch.tensor([1.0, float("inf")])}) == "z"


def test_a_crash_and_a_lost_file_are_defects(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The oracle calls a plain exception a crash at its frame, and a file outside the
    case that changed a lost file, even when the case itself looked clean."""
    import fuzz.surface_plugin as plugin

    def crash(case: Case) -> object:
        return {}["missing"]

    monkeypatch.setattr(plugin, "run", crash)
    o, _ = run_case("plugin", 0, 0, tmp_path, {})
    assert (o.outcome, o.cls) == ("defect", "crash") and "in crash" in o.place

    def clobber(case: Case) -> object:
        (case.outside / "sentinel.txt").write_text("changed", encoding="utf-8")
        from fuzz.oracle import Outcome

        return Outcome("valid")

    monkeypatch.setattr(plugin, "run", clobber)
    o, _ = run_case("plugin", 0, 1, tmp_path, {"plugin": {}})
    assert (o.outcome, o.cls) == ("defect", "lost-file")


@pytest.mark.parametrize("surface", AROUND)
def test_quick_run_of_each_surface_finds_no_defect(surface: str) -> None:
    """200 cases of each surface: no traceback, hang, non-finite output or lost file, and
    both clean rejections and accepted inputs occur."""
    rep = fuzz(200, seed=SEED, jobs=min(2, os.cpu_count() or 1), timeout=30.0,
               surface=surface)
    assert rep.n_defects == 0, rep.text(SEED)
    assert rep.outcomes["rejected"] >= 20, rep.text(SEED)
    assert rep.outcomes["valid"] >= 10, rep.text(SEED)


def test_the_command_reports_per_surface(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m fuzz.run --surface around` (what `make fuzz` runs after the specs)
    counts outcomes per surface in its text and JSON reports."""
    out = tmp_path / "report.json"
    main(["--surface", "around", "--count", str(2 * len(AROUND)), "--jobs", "1",
          "--timeout", "60", "--json", str(out)])
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["total"] == 2 * len(AROUND)
    assert set(report["surfaces"]) == set(AROUND)
    assert all(sum(c.values()) == 2 for c in report["surfaces"].values())
    assert "per surface:" in capsys.readouterr().out
