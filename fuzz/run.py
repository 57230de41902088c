"""Drive the fuzzer: many mutants in worker processes, a time and memory limit each.

    python -m fuzz.run --count 100000            # the long run (make fuzz)
    python -m fuzz.run --count 3000 --quick      # what CI runs
    python -m fuzz.run --case 1234 --seed 0      # replay one case: its text and outcome
    python -m fuzz.run --count 500 --focus formulas  # the algebra: formulas and params
    python -m fuzz.run --count 100000 --surface around  # data, run dirs, exports, plugins, API
    python -m fuzz.run --surface rundir --case 17    # replay one case of a surface

Case ``i`` of seed ``s`` is always the same mutant, so a report's case numbers
replay exactly. A worker that spends more than ``--timeout`` seconds of CPU time on
a case, or waits more than ``WALL_TIMES`` times that on the clock (blocked on a pipe,
say), is killed (a ``hang``): CPU time, where the system tells it, so that a loaded
machine does not turn slow cases into hangs; one that dies is a ``signal``; one whose peak resident
memory passes ``--max-mb`` is a ``memory`` defect. The report counts outcomes,
groups defects by class and place, and counts how many rejections carry a hint.
The exit status is 1 when any defect was found.

``--surface`` picks what is fuzzed: ``spec`` (the default: mutants of spec texts),
one of the surfaces around the spec (``data``, ``rundir``, ``export``, ``plugin``; see
:mod:`fuzz.surface`), ``around`` (those four, taking turns: case ``i`` is case ``i``
of surface ``i mod 4``) or ``all`` (the spec's too). The report then also counts
outcomes per surface, and names each defect's surface.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import re
import resource
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuzz.oracle import Outcome
from fuzz.seeds import Seed, seeds
from fuzz.surface import CHOICES, expand, surface_of

__all__ = ["FOCUS", "case", "focus_seeds", "describe", "Report", "fuzz", "main"]

#: What ``--focus`` may name: ``formulas`` takes only the seeds with an ``expr`` or a
#: ``param`` and mostly the operators of formulas and params.
FOCUS = ("formulas",)


def focus_seeds(all_seeds: list[Seed], focus: str | None) -> list[Seed]:
    """The seeds a run of that focus starts from."""
    if focus == "formulas":
        pat = re.compile(r"kind:\s*(expr|param)\b")
        return [s for s in all_seeds if pat.search(s.text)]
    return all_seeds


def case(all_seeds: list[Seed], seed: int, i: int, focus: str | None = None
         ) -> tuple[Seed, str, list[str]]:
    """Mutant ``i`` of run ``seed`` (of ``focus``): its seed spec, text and operators."""
    from fuzz.mutate import Mutator

    rng = random.Random(f"{seed}:{i}" if focus is None else f"{focus}:{seed}:{i}")
    base = rng.choice(focus_seeds(all_seeds, focus))
    text, ops = Mutator(rng, focus=focus).mutate(base.text)
    return base, text, ops


def describe(surface: str, seed: int, i: int) -> str:
    """How to replay case ``i`` of a surface around the spec."""
    return f"# {surface} case {i} (seed {seed}): python -m fuzz.run --surface {surface} " \
        f"--seed {seed} --case {i}\n"


@dataclass
class Report:
    """Counts per outcome, defects by (class, place), hints among rejections."""

    total: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    rejected_by: Counter[str] = field(default_factory=Counter)
    without_hint: Counter[str] = field(default_factory=Counter)
    defects: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: non-finite values a formula's own arithmetic made (x / x at 0), by formula
    arithmetic: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    #: outcomes per surface (the spec's included)
    surfaces: dict[str, Counter[str]] = field(default_factory=dict)

    def add(self, i: int, o: Outcome, text: str | None = None, surface: str = "spec") -> None:
        self.total += 1
        self.outcomes[o.outcome] += 1
        self.surfaces.setdefault(surface, Counter())[o.outcome] += 1
        if o.outcome == "rejected":
            self.rejected_by[o.cls] += 1
            if not o.hint:
                self.without_hint[o.place] += 1
        elif o.outcome == "arithmetic":
            self.arithmetic[o.message.split(", first made by ")[-1][:120]] += 1
        elif o.outcome == "defect":
            key = f"{o.cls}: {o.place}" if surface == "spec" else f"{surface}: {o.cls}: {o.place}"
            entry = self.defects.setdefault(key, {"count": 0, "case": i, "message": o.message,
                                                  "text": text})
            entry["count"] += 1

    @property
    def n_defects(self) -> int:
        return self.outcomes["defect"]

    @property
    def hint_share(self) -> float:
        rej = self.outcomes["rejected"]
        return 1.0 if rej == 0 else 1 - sum(self.without_hint.values()) / rej

    def text(self, seed: int) -> str:
        what = "mutants" if set(self.surfaces) <= {"spec"} else "cases"
        lines = [f"{self.total} {what} in {self.seconds:.0f} s (seed {seed}):"]
        for k in ("valid", "rejected", "arithmetic", "defect"):
            lines.append(f"  {k:10} {self.outcomes[k]:7}")
        if not set(self.surfaces) <= {"spec"}:
            lines.append("per surface:       valid rejected arithmetic  defect")
            order = {n: k for k, n in enumerate(CHOICES)}
            for name, c in sorted(self.surfaces.items(), key=lambda kv: order.get(kv[0], 99)):
                lines.append(f"  {name:12} {c['valid']:9} {c['rejected']:8} "
                             f"{c['arithmetic']:10} {c['defect']:7}")
        lines.append(f"rejections with a hint: {100 * self.hint_share:.1f}%")
        if self.without_hint:
            lines.append("rejections without a hint, most frequent:")
            for msg, n in self.without_hint.most_common(15):
                lines.append(f"  {n:6}  {msg}")
        if self.arithmetic:
            lines.append("non-finite values of a formula's own arithmetic (not defects), "
                         "most frequent:")
            for what, n in self.arithmetic.most_common(5):
                lines.append(f"  {n:6}  {what}")
        if self.defects:
            lines.append(f"defects in {len(self.defects)} places:")
            for key, d in sorted(self.defects.items(), key=lambda kv: -kv[1]["count"]):
                lines.append(f"  {d['count']:6}  {key}  (case {d['case']})")
                first = d["message"].splitlines()[0][:150] if d["message"] else ""
                lines.append(f"          {first}")
        return "\n".join(lines)


def _worker(conn: Connection, seed: int, max_mb: int, run: bool, focus: str | None,
            surfaces: tuple[str, ...] = ("spec",), root: str | None = None) -> None:
    """Take case numbers, answer (number, outcome, text on defect, peak MB).

    A case of a surface around the spec runs in ``root`` (the worker's own folder)."""
    limit = (max_mb + 3072) * 2**20
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError):
        pass
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    from attngraph import guard
    from fuzz.oracle import budget_limits, check, place_of

    torch.set_num_threads(1)
    for name, value in budget_limits(max_mb).items():
        setattr(guard, name, value)
    all_seeds = focus_seeds(seeds(), focus)
    states: dict[str, Any] = {}
    if root is not None:
        from fuzz.surface import prepare_all

        prepare_all([s for s in surfaces if s != "spec"], Path(root), states)
    while True:
        try:
            i = conn.recv()
        except EOFError:
            return
        if i is None:
            return
        surface = surface_of(surfaces, i)
        text, ops = describe(surface, seed, i), []
        try:
            if surface != "spec":
                from fuzz.surface import run_case

                o, ops = run_case(surface, seed, i, Path(root or tempfile.mkdtemp()), states)
                text = describe(surface, seed, i) + "\n".join(f"#   {op}" for op in ops)
            else:
                _, text, ops = case(all_seeds, seed, i, focus)
                o = check(text, "fuzz.yaml", run=run, cli=run)
        except MemoryError as exc:
            o = Outcome("defect", "memory", place_of(exc), repr(exc)[:300])
        except BaseException as exc:  # noqa: BLE001 - a defect, whatever it is
            o = Outcome("defect", "crash", place_of(exc), repr(exc)[:300])
        if o.outcome == "defect" and "allocate" in o.message:
            o = Outcome("defect", "memory", o.place, o.message)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        conn.send((i, asdict(o), text if o.outcome == "defect" else None, peak, ops))
        if peak > max_mb:
            return


#: Seconds a fresh worker of the surfaces around the spec may take to start.
STARTUP = 120.0

#: Times ``--timeout`` a case of these surfaces may take: an export to ONNX or pt2
#: traces the model (about 7 CPU s for a small catalog spec), not a hang.
SLOW_SURFACES = {"export": 3.0}

#: Seconds between looks at the workers' CPU time.
POLL = 0.25

#: Times the limit a case may take on the clock: a case that waits without working
#: (a read from a pipe nobody writes) is a hang too, found by the clock, not the CPU.
WALL_TIMES = 6.0

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
HAVE_PROC = Path("/proc/self/stat").exists()


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user and system, the process's and its waited-for children's) of a
    process, from ``/proc``; None where the system does not tell it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # after the command name, which may hold spaces
    try:
        return sum(int(f) for f in fields[11:15]) / _TICK
    except (ValueError, IndexError):
        return None


class _Slot:
    """One worker process and the case it is on."""

    def __init__(self, ctx: Any, seed: int, max_mb: int, run: bool, focus: str | None,
                 surfaces: tuple[str, ...] = ("spec",)) -> None:
        parent, child = ctx.Pipe()
        self.conn: Connection = parent
        self.root = tempfile.mkdtemp(prefix="attngraph-fuzz-")
        self.proc = ctx.Process(target=_worker, args=(child, seed, max_mb, run, focus,
                                                      surfaces, self.root), daemon=True)
        self.proc.start()
        child.close()
        self.case: int | None = None
        self.since = 0.0
        self.limit = 0.0
        self.cpu0: float | None = None
        #: the first case also waits for the worker to start (import torch, and for the
        #: surfaces around the spec train a tiny run): that time is not the case's
        self.grace = STARTUP if any(s != "spec" for s in surfaces) else 0.0

    def give(self, i: int, limit: float) -> None:
        self.case, self.since = i, time.monotonic() + self.grace
        self.limit = limit
        #: the first case of a fresh worker also waits for its start (importing torch):
        #: it is judged by the clock alone, from the end of the grace
        self.cpu0 = None if self.grace else cpu_seconds(self.proc.pid or 0)
        self.grace = 0.0
        self.conn.send(i)

    def over(self) -> str | None:
        """How the case passed its limit ("CPU", "clock"), or None while within it."""
        clock = time.monotonic() - self.since
        cpu = None if self.cpu0 is None else cpu_seconds(self.proc.pid or 0)
        if cpu is None:  # the worker's first case, or no /proc: the clock alone
            return "clock" if clock >= self.limit * (WALL_TIMES if HAVE_PROC else 1.0) \
                else None
        if cpu - self.cpu0 >= self.limit:
            return "CPU"
        return "clock" if clock >= self.limit * WALL_TIMES else None

    def stop(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()
        shutil.rmtree(self.root, ignore_errors=True)


def fuzz(count: int, *, seed: int = 0, jobs: int = 2, timeout: float = 10.0,
         max_mb: int = 2048, run: bool = True, start: int = 0,
         keep: Path | None = None, progress: bool = False, focus: str | None = None,
         surface: str = "spec") -> Report:
    """Run cases ``start .. start+count`` (of ``focus``, on ``surface``) and return the
    report."""
    all_seeds = focus_seeds(seeds(), focus)
    surfaces = expand(surface)
    ctx = mp.get_context("spawn")
    rep = Report()
    t0 = time.monotonic()
    todo = list(range(start, start + count))[::-1]
    slots = [_Slot(ctx, seed, max_mb, run, focus, surfaces) for _ in range(max(1, jobs))]

    def limit_of(i: int) -> float:
        return timeout * SLOW_SURFACES.get(surface_of(surfaces, i), 1.0)

    def text_of(i: int) -> str:
        where = surface_of(surfaces, i)
        return case(all_seeds, seed, i, focus)[1] if where == "spec" else \
            describe(where, seed, i)

    def record(i: int, o: Outcome, text: str | None) -> None:
        where = surface_of(surfaces, i)
        rep.add(i, o, text, where)
        if o.outcome == "defect" and keep is not None and where != "spec":
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{where}-{seed}-{i}.txt").write_text(
                f"{text or describe(where, seed, i)}\n# {o.cls}: {o.place}\n# {o.message}\n",
                encoding="utf-8", errors="backslashreplace")
        elif o.outcome == "defect" and keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            base, _, ops = case(all_seeds, seed, i, focus)
            how = f"seed {seed}" + (f", --focus {focus}" if focus else "")
            (keep / f"case-{seed}-{i}.yaml").write_text(
                f"# fuzz case {i} ({how}): {o.cls}: {o.place}\n"
                f"# from {base.name}: {', '.join(ops)}\n{text or ''}",
                encoding="utf-8", errors="surrogateescape")

    try:
        for s in slots:
            if todo:
                j = todo.pop()
                s.give(j, limit_of(j))
        while any(s.case is not None for s in slots):
            busy = [s for s in slots if s.case is not None]
            ready = wait([s.conn for s in busy], timeout=POLL)
            for s in busy:
                i = s.case
                assert i is not None
                restart = False
                if s.conn in ready:
                    try:
                        _, od, text, peak, _ops = s.conn.recv()
                    except (EOFError, OSError):
                        s.proc.join(1)
                        record(i, Outcome("defect", "signal", f"worker exit {s.proc.exitcode}",
                                          f"the process died ({s.proc.exitcode})"),
                               text_of(i))
                        restart = True
                    else:
                        o = Outcome(**od)
                        if peak > max_mb:
                            restart = True
                            if o.outcome != "defect":
                                o = Outcome("defect", "memory", f"peak over {max_mb} MB",
                                            f"worker peaked at {peak} MB, over {max_mb} MB")
                                text = text_of(i)
                        record(i, o, text)
                elif (how := s.over()) is not None:
                    limit = s.limit if how == "CPU" else s.limit * WALL_TIMES
                    record(i, Outcome("defect", "hang", f"over {limit:g} s",
                                      f"case {i} ran over {limit:g} s of {how} time"),
                           text_of(i))
                    restart = True
                else:
                    continue
                if restart or not s.proc.is_alive():
                    s.stop()
                    k = slots.index(s)
                    s = slots[k] = _Slot(ctx, seed, max_mb, run, focus, surfaces)
                s.case = None
                if todo:
                    j = todo.pop()
                    s.give(j, limit_of(j))
                if progress and rep.total % 1000 == 0:
                    print(f"  {rep.total} / {count}  defects {rep.n_defects}", file=sys.stderr)
    finally:
        for s in slots:
            try:
                s.conn.send(None)
            except OSError:
                pass
            s.stop()
    rep.seconds = time.monotonic() - t0
    return rep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=3000, help="mutants to run (default 3000)")
    ap.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="worker processes")
    ap.add_argument("--timeout", type=float, default=10.0,
                    help="CPU seconds per case (default 10; six times that on the clock)")
    ap.add_argument("--max-mb", type=int, default=2048, help="peak memory per case (default 2048)")
    ap.add_argument("--no-run", action="store_true", help="front end only: no compile or forward")
    ap.add_argument("--keep", type=Path, help="write each defect's mutant into this directory")
    ap.add_argument("--json", type=Path, help="also write the report as JSON here")
    ap.add_argument("--case", type=int, help="replay one case: print its text and outcome")
    ap.add_argument("--surface", choices=CHOICES, default="spec",
                    help="what to fuzz: spec texts (default), data files, run directories, "
                    "exports, plugins, the Python API's arguments; 'around' all five in "
                    "turn, 'all' the spec's too")
    ap.add_argument("--focus", choices=FOCUS, help="formulas: the seeds with expr or param, "
                    "mostly the operators of formulas and params (a case number replays "
                    "only with the same focus)")
    args = ap.parse_args(argv)
    if args.case is not None and surface_of(expand(args.surface), args.case) != "spec":
        from fuzz.surface import run_case

        where = surface_of(expand(args.surface), args.case)
        root = Path(tempfile.mkdtemp(prefix="attngraph-fuzz-"))
        try:
            o, ops = run_case(where, args.seed, args.case, root, {})
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(describe(where, args.seed, args.case) + "\n".join(f"#   {op}" for op in ops))
        print(o)
        return 0
    if args.case is not None:
        from fuzz.oracle import check

        base, text, ops = case(seeds(), args.seed, args.case, args.focus)
        print(f"# case {args.case} (seed {args.seed}) from {base.name}: {', '.join(ops)}")
        print(text)
        print(check(text, "fuzz.yaml", run=not args.no_run))
        return 0
    rep = fuzz(args.count, seed=args.seed, jobs=args.jobs, timeout=args.timeout,
               max_mb=args.max_mb, run=not args.no_run, start=args.start, keep=args.keep,
               progress=args.count >= 5000, focus=args.focus, surface=args.surface)
    print(rep.text(args.seed))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "total": rep.total, "seconds": round(rep.seconds, 1),
            "outcomes": dict(rep.outcomes), "hint_share": rep.hint_share,
            "without_hint": dict(rep.without_hint.most_common(50)),
            "defects": {k: dict(v.items()) for k, v in rep.defects.items()},
            "arithmetic": dict(rep.arithmetic.most_common(50)),
            "surfaces": {k: dict(v) for k, v in rep.surfaces.items()},
        }, indent=2), encoding="utf-8")
    return 1 if rep.n_defects else 0


if __name__ == "__main__":
    sys.exit(main())
