"""Timing helpers: interleaved repeats, ratio statistics, machine description.

Every comparison runs its variants in the same process, one after the other
inside each round, in an order that rotates from round to round, so that slow
phases of a shared machine hit every variant alike; within a round a variant's
time is the fastest of a few back-to-back calls. The figure reported for a
comparison is the median over rounds of the per-round ratio
``time(variant) / time(reference)``; the spread is the interquartile range of
those ratios (min-max when there are fewer than four rounds). Where variants
come in pairs (a spec and the model it is compared with), :func:`paired` runs the
two of a pair alternately within a round, so that both calls of a pair meet the
same phase of the machine.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Stat", "interleaved", "paired", "ratio_stat", "median_stat", "machine", "load"]


@dataclass(frozen=True)
class Stat:
    """A median with its spread (``lo``, ``hi``)."""

    median: float
    lo: float
    hi: float

    def fmt(self, unit: str = "x", digits: int = 2) -> str:
        """``1.02x (0.98-1.05)``."""
        f = f"{{:.{digits}f}}"
        return f"{f.format(self.median)}{unit} ({f.format(self.lo)}-{f.format(self.hi)})"


def median_stat(xs: list[float]) -> Stat:
    """Median and interquartile range (min-max below four values)."""
    xs = sorted(xs)
    if len(xs) < 4:
        return Stat(statistics.median(xs), xs[0], xs[-1])
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return Stat(q[1], q[0], q[2])


def interleaved(variants: dict[str, Callable[[], object]], repeats: int,
                warmup: int = 2, inner: int = 3) -> dict[str, list[float]]:
    """Wall times (s) of each variant over ``repeats`` interleaved rounds.

    In a round each variant runs ``inner`` times back to back and keeps its
    fastest call: a call slowed by another process's burst is dropped, while a
    variant that is slower every time stays slower.
    """
    names = list(variants)
    for _ in range(warmup):
        for n in names:
            variants[n]()
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        order = names[r % len(names):] + names[:r % len(names)]
        for n in order:
            best = float("inf")
            for _ in range(inner):
                t0 = time.perf_counter()
                variants[n]()
                best = min(best, time.perf_counter() - t0)
            times[n].append(best)
    return times


def paired(variants: dict[str, Callable[[], object]], pairs: list[tuple[str, str]],
           repeats: int, warmup: int = 2, inner: int = 2) -> dict[str, list[float]]:
    """Wall times (s) of each variant over ``repeats`` rounds, pair by pair.

    In a round the two variants of each pair run ``inner`` times each, alternately and
    each first as often as the other (a b b a, then b a a b in the next round), and
    each keeps its fastest call; the
    per-round ratio of a pair then compares calls made moments apart, where
    :func:`interleaved` runs a variant's calls back to back, possibly in another
    phase of a shared machine than its reference's.
    """
    for _ in range(warmup):
        for n in variants:
            variants[n]()
    times: dict[str, list[float]] = {n: [] for pair in pairs for n in pair}
    for r in range(repeats):
        for a, b in pairs:
            best = {a: float("inf"), b: float("inf")}
            for i in range(inner):
                for n in ((a, b) if (r + i) % 2 == 0 else (b, a)):
                    t0 = time.perf_counter()
                    variants[n]()
                    best[n] = min(best[n], time.perf_counter() - t0)
            times[a].append(best[a])
            times[b].append(best[b])
    return times


def ratio_stat(times: dict[str, list[float]], num: str, den: str) -> Stat:
    """Per-round ratio ``num / den`` as a :class:`Stat`."""
    return median_stat([a / b for a, b in zip(times[num], times[den], strict=True)])


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load() -> str:
    """The load averages over 1, 5 and 15 minutes (``uptime``), or ``unknown``."""
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def machine(threads: int, load_start: str | None = None) -> dict[str, str]:
    """The machine and versions, for the report (``load_start``: :func:`load` when the
    run began)."""
    import torch

    shared = ("(1 / 5 / 15 min; 2 cores shared with other engineers' processes, so "
              "per-round ratios, not absolute times)")
    return {
        "load average at start": f"{load_start or 'unknown'} {shared}",
        "load average at end": load(),
        "CPU": _cpu_model(),
        "cores (os.cpu_count)": str(os.cpu_count()),
        "torch threads used": str(threads),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "GPU": "none (CPU-only machine; no CUDA table)",
    }
