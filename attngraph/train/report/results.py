"""What the catalog's specs reach when trained: measure it, and the table of it.

:func:`measure` trains every catalog spec (``specs/*.yaml``) with its own
``train:`` section at one seed, on one torch thread, and records the task, the
stated target, the metrics reached and the CPU seconds the training took.
:func:`write_results` stores that list as ``docs/training-results.json``;
:func:`results_table` turns the stored file into the markdown table of
``docs/training-results.md`` (the docs generator calls it).

The stored file's tables and the markdown page are made in
:mod:`attngraph.train.report.results_page` (re-exported here).

Run ``python -m attngraph.train.report.results`` to measure and rewrite both files
(several minutes); given spec files, it measures only those and replaces their
rows; ``SPEC... --seeds 1 2`` measures them at more seeds, stored beside the rows and
shown in a second table (:func:`seeds_table`) with each figure's spread;
``--table`` only prints the tables of the stored file; ``--page`` only rewrites
the markdown page from it.

Measured at seed 0, each catalog spec's trained model also draws its attention
picture (:func:`attngraph.train.pictures.attend.draw_model`, what ``attngraph attend RUN``
draws) as ``docs/catalog/NAME.attention.png``, which ``attngraph docs`` shows
under the spec; so re-measuring one spec refreshes its picture too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from attngraph.fileio import write_file
from attngraph.train.report.results_page import (
    RESULTS_JSON,
    RESULTS_MD,
    ROOT,
    SEED_SPREAD,
    ci_seconds,
    ci_text,
    load_stored,
    page,
    results_table,
    seeds_table,
)

__all__ = ["ROOT", "RESULTS_JSON", "RESULTS_MD", "SEED_SPREAD", "PICTURES", "PICTURE_DPI",
           "picture_path", "measure_one", "measure", "write_results", "merge_rows",
           "results_table", "seeds_table", "ci_seconds", "ci_text", "page", "main"]

#: Extra models measured beside the catalog: the no-attention baseline of glimpse_hard.
BASELINES = (ROOT / "tests" / "data" / "glimpse_hard_baseline.yaml",)
#: Where the trained models' attention pictures go (beside the catalog's diagrams).
PICTURES = ROOT / "docs" / "catalog"
#: Their resolution: small files (tens of KB) for the catalog page.
PICTURE_DPI = 80


def picture_path(name: str, folder: Path = PICTURES) -> Path:
    """The attention picture of catalog spec ``name``.

    Examples
    --------
    >>> picture_path("memory_network", Path("docs/catalog")).as_posix()
    'docs/catalog/memory_network.attention.png'
    """
    return folder / f"{name}.attention.png"


def measure_one(path: str | Path, *, seed: int = 0,
                picture: str | Path | None = None) -> dict[str, Any]:
    """Train one spec with its ``train:`` section and report what it reached.

    With ``picture``, the trained model's attention picture is drawn there
    (after the timing); a spec that declares no attention output gets none.

    Returns
    -------
    dict
        ``spec``, ``task``, ``steps``, ``target`` (metric -> value), ``reached``
        (every validation metric, rounded to 3 places), ``met`` (every target reached),
        ``cpu_s`` (process CPU seconds of compiling and training) and ``seed``.
    """
    import torch

    from attngraph.frontend import load_spec
    from attngraph.train.engine.loop import train

    graph = load_spec(path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        start = time.process_time()
        result = train(graph, seed=seed)
        cpu = time.process_time() - start
    finally:
        torch.set_num_threads(threads)
    if picture is not None:
        _draw(graph, result, picture)
    ts = graph.train
    target = dict(ts.target) if ts is not None else {}
    return {
        "spec": graph.name,
        "task": ts.task if ts is not None else "",
        "steps": ts.steps if ts is not None else 0,
        "target": target,
        "reached": {k: round(v, 3) for k, v in result.metrics.items() if k != "loss"},
        "met": result.reached(target),
        "cpu_s": round(cpu, 1),
        "seed": seed,
    }


def _draw(graph: Any, result: Any, picture: str | Path) -> None:
    """Draw a trained model's attention picture, or say why there is none."""
    from attngraph.errors import TrainingError
    from attngraph.train.pictures.attend import draw_model

    try:
        path, view = draw_model(graph, result.task, result.model, picture, dpi=PICTURE_DPI)
    except TrainingError as exc:  # e.g. no attention output declared
        print(f"{graph.name}: no attention picture ({exc.message})", flush=True)
        return
    print(f"{graph.name}: drew {path} ({view} view)", flush=True)


def _is_catalog(path: str | Path) -> bool:
    return Path(path).resolve().parent == ROOT / "specs"


def measure(paths: Iterable[str | Path] | None = None, *, seed: int = 0,
            echo: bool = False, pictures: Path | None = None) -> list[dict[str, Any]]:
    """:func:`measure_one` for each path (default: the catalog, then the baselines).

    With ``pictures`` (a folder), each catalog spec's attention picture is drawn
    there as :func:`picture_path` names it.
    """
    if paths is None:
        paths = [*sorted((ROOT / "specs").glob("*.yaml")), *BASELINES]
    rows = []
    for p in paths:
        pic = (picture_path(Path(p).stem, pictures)
               if pictures is not None and _is_catalog(p) else None)
        row = measure_one(p, seed=seed, picture=pic)
        if echo:
            print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def write_results(rows: Sequence[dict[str, Any]], path: Path = RESULTS_JSON,
                  seeds: dict[str, dict[str, dict[str, float]]] | None = None,
                  seed_cpu: dict[str, dict[str, float]] | None = None) -> None:
    """Store the measurements as JSON (one object with a ``rows`` list).

    ``seeds`` (spec -> seed -> figures reached) is stored beside them when given,
    and ``seed_cpu`` (spec -> seed -> CPU seconds of that training) as ``seed_cpu_s``.
    """
    total = round(sum(r["cpu_s"] for r in rows), 1)
    payload: dict[str, Any] = {"seed": rows[0]["seed"] if rows else 0, "torch_threads": 1,
                               "total_cpu_s": total, "rows": list(rows)}
    if seeds:
        payload["seeds"] = seeds
    if seed_cpu:
        payload["seed_cpu_s"] = seed_cpu
    write_file(path, json.dumps(payload, indent=1) + "\n")


def merge_rows(old: Sequence[dict[str, Any]],
               new: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``old`` with the rows of ``new`` replacing those of the same spec.

    Catalog specs come first, sorted by name, then the baselines.

    Examples
    --------
    >>> rows = merge_rows([{"spec": "b", "cpu_s": 1}, {"spec": "glimpse_hard_baseline"}],
    ...                   [{"spec": "a", "cpu_s": 2}, {"spec": "b", "cpu_s": 3}])
    >>> [(r["spec"], r.get("cpu_s")) for r in rows]
    [('a', 2), ('b', 3), ('glimpse_hard_baseline', None)]
    """
    by_name = {r["spec"]: r for r in old} | {r["spec"]: r for r in new}
    base = [p.stem for p in BASELINES]
    return sorted(by_name.values(), key=lambda r: (r["spec"] in base, r["spec"]))


def main(argv: Sequence[str] | None = None) -> int:
    """Measure the catalog (or the specs given) and rewrite the JSON and markdown files.

    Given spec files, their rows replace the stored ones; with ``--seeds``, the
    specs are measured at those seeds instead and stored beside the rows.
    ``--table`` only prints the stored tables; ``--page`` only rewrites the
    markdown page from the stored file.
    """
    import argparse

    ap = argparse.ArgumentParser(prog="python -m attngraph.train.report.results")
    ap.add_argument("specs", nargs="*", help="spec files (default: the whole catalog)")
    ap.add_argument("--table", action="store_true", help="only print the stored tables")
    ap.add_argument("--page", action="store_true",
                    help="only rewrite docs/training-results.md from the stored file "
                         "(after merging its JSON by hand, say)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="measure the specs given at these seeds (e.g. 1 2)")
    args = ap.parse_args(argv)
    if args.page:
        write_file(RESULTS_MD, page())
    elif not args.table:
        stored = load_stored()
        seeds: dict[str, dict[str, dict[str, float]]] = stored.get("seeds") or {}
        seed_cpu: dict[str, dict[str, float]] = stored.get("seed_cpu_s") or {}
        if args.seeds:
            if not args.specs:
                ap.error("--seeds needs the spec files to measure")
            for s in args.seeds:
                for r in measure(args.specs, seed=s, echo=True):
                    seeds.setdefault(r["spec"], {})[str(s)] = r["reached"]
                    seed_cpu.setdefault(r["spec"], {})[str(s)] = r["cpu_s"]
            rows = stored["rows"]
        else:
            rows = measure(args.specs or None, seed=args.seed, echo=True,
                           pictures=PICTURES if args.seed == 0 else None)
            rows = merge_rows(stored["rows"], rows) if args.specs else rows
        write_results(rows, seeds=seeds, seed_cpu=seed_cpu)
        write_file(RESULTS_MD, page())
    print(results_table(), end="")
    print(seeds_table(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
