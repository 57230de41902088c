"""The stored training results and the page made of them (``docs/training-results.md``).

:func:`results_table` is the table of every catalog spec at seed 0,
:func:`seeds_table` that of the specs measured at several seeds with each
figure's spread, :func:`ci_seconds` / :func:`ci_text` the CPU time of the
catalog training the slow tests do, and :func:`page` the whole page. All read
the file :mod:`attngraph.train.report.results` writes; nothing here trains.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attngraph.fileio import Role, read_json

__all__ = ["ROOT", "RESULTS_JSON", "RESULTS_MD", "SEED_SPREAD", "load_stored", "results_table",
           "seeds_table", "ci_seconds", "ci_text", "page"]

#: The repository root (the catalog is ``ROOT / "specs"``).
ROOT = Path(__file__).resolve().parents[3]
#: Where :func:`attngraph.train.report.results.write_results` stores the measurements.
RESULTS_JSON = ROOT / "docs" / "training-results.json"
#: The results file to :func:`attngraph.fileio.read_json`.
_RESULTS = Role("results file", 64 * 2**20)
#: The markdown page made from them.
RESULTS_MD = ROOT / "docs" / "training-results.md"
#: How far a target figure may fall between seeds 0, 1 and 2 (the slow test
#: ``tests/test_catalog_seeds.py`` asserts it for the specs measured at several seeds).
SEED_SPREAD = 0.1


def load_stored(path: Path = RESULTS_JSON) -> dict[str, Any]:
    """The stored results file (``{"rows": []}`` when none was written yet)."""
    if not path.is_file():
        return {"rows": []}
    data: dict[str, Any] = read_json(path, _RESULTS, what="the results file")
    return data


def _fmt(metrics: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in metrics.items()) or "-"


def results_table(path: str | Path = RESULTS_JSON) -> str:
    """The markdown table of a stored results file.

    One row per spec: task, target, the figures reached (the target's metrics
    first), whether the target is met, and the CPU seconds of its training;
    a last line gives the total. An empty string when no file was recorded yet.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> row = {"spec": "s", "task": "needle", "steps": 10, "target": {"accuracy": 0.9},
    ...        "reached": {"accuracy": 0.95}, "met": True, "cpu_s": 1.5, "seed": 0}
    >>> _ = f.write_text(json.dumps({"seed": 0, "total_cpu_s": 1.5, "rows": [row]}))
    >>> print(results_table(f).splitlines()[2])
    | s | needle | 10 | accuracy 0.9 | accuracy 0.95 | yes | 1.5 |
    """
    path = Path(path)
    if not path.is_file():
        return ""
    data = read_json(path, _RESULTS, what="the results file")
    lines = [
        "| spec | task | steps | target | reached (seed {}) | met | CPU s |".format(
            data.get("seed", 0)),
        "|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        target = r["target"]
        reached = {k: r["reached"][k] for k in target if k in r["reached"]}
        reached.update({k: v for k, v in r["reached"].items() if k not in reached})
        lines.append(f"| {r['spec']} | {r['task']} | {r['steps']} | {_fmt(target)} | "
                     f"{_fmt(reached)} | {'yes' if r['met'] else 'no'} | {r['cpu_s']:g} |")
    lines.append("")
    lines.append(f"Total: {data.get('total_cpu_s', 0):g} CPU seconds of training "
                 "(one torch thread).")
    return "\n".join(lines) + "\n"


def seeds_table(path: str | Path = RESULTS_JSON) -> str:
    """The markdown table of the specs measured at several seeds, or "".

    One row per spec and target metric: its target, the figure at each seed,
    and the spread (largest minus smallest).

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> row = {"spec": "s", "task": "t", "steps": 1, "target": {"accuracy": 0.9},
    ...        "reached": {"accuracy": 0.95}, "met": True, "cpu_s": 1.0, "seed": 0}
    >>> seeds = {"s": {"1": {"accuracy": 0.93}, "2": {"accuracy": 0.97}}}
    >>> _ = f.write_text(json.dumps({"rows": [row], "seeds": seeds}))
    >>> print(seeds_table(f).splitlines()[2])
    | s | accuracy | 0.9 | 0.95 | 0.93 | 0.97 | 0.04 |
    """
    data = load_stored(Path(path))
    seeds = data.get("seeds") or {}
    if not seeds:
        return ""
    rows = {r["spec"]: r for r in data["rows"]}
    lines = ["| spec | metric | target | seed 0 | seed 1 | seed 2 | spread |",
             "|---|---|---|---|---|---|---|"]
    for spec in sorted(seeds):
        row = rows.get(spec)
        if row is None:
            continue
        for metric, want in row["target"].items():
            got = [row["reached"].get(metric)] + [seeds[spec].get(s, {}).get(metric)
                                                 for s in ("1", "2")]
            known = [g for g in got if g is not None]
            spread = round(max(known) - min(known), 3) if known else 0.0
            cells = " | ".join("-" if g is None else f"{g:g}" for g in got)
            lines.append(f"| {spec} | {metric} | {want:g} | {cells} | {spread:g} |")
    return "\n".join(lines) + "\n"


def ci_seconds(path: str | Path = RESULTS_JSON) -> dict[str, Any]:
    """CPU seconds of the catalog training the slow tests do, from a stored results file.

    The slow tests train every stored row at seed 0 (each catalog spec and each
    baseline, ``tests/test_catalog.py``), and the specs measured at several seeds
    again at every seed, 0 included (``tests/test_catalog_seeds.py``). An extra
    seed's CPU seconds are those stored for it (``seed_cpu_s``), else its seed-0
    figure's (then named in ``estimated``).

    Returns
    -------
    dict
        ``total`` (CPU s), ``seed0`` (the rows' sum), ``multi`` (the seed test's
        sum), ``specs`` (how many rows), ``multi_specs`` (how many specs at several
        seeds), ``seeds`` (the seeds they are trained at, sorted) and ``estimated``
        (``"spec@seed"`` for each figure taken from seed 0).

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "r.json"
    >>> rows = [{"spec": "a", "cpu_s": 2.0}, {"spec": "b", "cpu_s": 3.0}]
    >>> seeds = {"b": {"1": {"accuracy": 0.9}, "2": {"accuracy": 0.9}}}
    >>> data = {"rows": rows, "seeds": seeds, "seed_cpu_s": {"b": {"1": 4.0}}}
    >>> _ = f.write_text(json.dumps(data))
    >>> ci = ci_seconds(f)
    >>> ci["total"], ci["seed0"], ci["multi"], ci["seeds"], ci["estimated"]
    (15.0, 5.0, 10.0, [0, 1, 2], ['b@2'])
    """
    data = load_stored(Path(path))
    cpu0 = {r["spec"]: float(r["cpu_s"]) for r in data["rows"]}
    seeds, stored = data.get("seeds") or {}, data.get("seed_cpu_s") or {}
    multi, estimated, used = 0.0, [], {0}
    for spec in sorted(seeds):
        if spec not in cpu0:
            continue
        multi += cpu0[spec]  # the seed test trains seed 0 again
        for seed in sorted(seeds[spec], key=int):
            used.add(int(seed))
            got = stored.get(spec, {}).get(seed)
            if got is None:
                estimated.append(f"{spec}@{seed}")
            multi += float(got if got is not None else cpu0[spec])
    seed0 = sum(cpu0.values())
    return {"total": round(seed0 + multi, 1), "seed0": round(seed0, 1), "multi": round(multi, 1),
            "specs": len(cpu0), "multi_specs": sum(s in cpu0 for s in seeds),
            "seeds": sorted(used), "estimated": estimated}


_PAGE = """# Training results

What every catalog spec reaches when trained with its own `train:` section
(`attngraph train specs/<name>.yaml`), measured by
`python -m attngraph.train.report.results` at seed 0 on one torch thread. The slow
test `tests/test_catalog.py::test_spec_trains_to_its_target` asserts every
target; `glimpse_hard_baseline` is the same recurrent glimpse model with the
glimpse fixed at the centre of the canvas (no attention), with a wider core so
that it has as many parameters as glimpse_hard. The slow test
`test_hard_attention_beats_chance_and_the_no_attention_baseline` asserts that
glimpse_hard beats it by at least 0.1 accuracy and puts a glimpse on the digit
(`glimpse_hit`) in at least 30% of the validation images.

## How the hard attention model got there

Measured at seed 0 with glimpse_hard's sensor, core and 1200 steps:

| location policy | reads | accuracy | 2nd glimpse on the digit |
|---|---|---|---|
| Gaussian around a predicted (x, y), std 0.2 (the paper's) | h_t, detached | 0.559 | 0.06 |
| Gaussian, std 0.2 to 0.4 | the glimpse g_t | 0.55 | 0.03 to 0.06 |
| categorical over the 16 cells (glimpse_hard) | the glimpse g_t | 0.906 | 0.49 |

"On the digit": the glimpse's centre lies inside the digit's 8×8 box (a point
drawn at random on the canvas does so 6% of the time).

The Gaussian policy starts near the centre, and at std 0.2 it almost never
samples the outer cells, so it never learns that looking there pays; a
categorical policy tries every cell equally often from the first step. With
supervised location targets (a check, not a training method) a location
network on the detached core did not learn where the digit is at all, while one
on the glimpse did: the core, trained only to classify, does not keep the
location. At seeds 1 and 2 glimpse_hard reaches 0.828 and 0.871, its baseline
0.555 and 0.621.

## Every catalog spec

"""


_SEEDS_PAGE = """
## Across seeds

The specs below are also trained at seeds 1 and 2 (`python -m
attngraph.train.report.results specs/<name>.yaml --seeds 1 2`); the slow test
`tests/test_catalog_seeds.py` asserts that each meets its target at every
seed and that each target figure's spread over the three seeds is at most
{spread:g}.

"""


_CI_PAGE = """
## The catalog's training time in CI

Training the whole catalog as the slow tests do (every spec and baseline above
at seed 0; the {multi_specs} specs of `tests/test_catalog_seeds.py` at seeds
{seeds} too, seed 0 again included) takes {total:g} CPU seconds on one torch
thread on the machine that measured the table: {seed0:g} s for the table
above and {multi:g} s for the seed test.{estimated} Compiling, the other
slow tests and pytest itself come on top; run `pytest -m slow tests -k catalog
--durations=0` for the wall-clock time of each.
"""


def ci_text(path: str | Path = RESULTS_JSON) -> str:
    """The page's paragraph on the catalog's CI training time (:func:`ci_seconds`)."""
    ci = ci_seconds(path)
    est = ""
    if ci["estimated"]:
        est = (" The seeds " + ", ".join(ci["estimated"]) + " have no CPU time stored yet "
               "and are counted at their seed 0 figure.")
    seeds = " and ".join(str(s) for s in ci["seeds"] if s)
    return _CI_PAGE.format(multi_specs=ci["multi_specs"], seeds=seeds or "-",
                           total=ci["total"], seed0=ci["seed0"], multi=ci["multi"],
                           estimated=est)


def page() -> str:
    """The whole markdown page of the stored results."""
    text = _PAGE + results_table()
    more = seeds_table()
    if more:
        text += _SEEDS_PAGE.format(spread=SEED_SPREAD) + more
    if load_stored()["rows"]:
        text += ci_text()
    return text
