"""The playground's edit-to-diagram round trip, for every catalog spec (issue 28).

Usage: ``python benchmarks/playground.py [--repeats R] [--specs DIR]``

A playground server runs in this process on a free loopback port, as
``attngraph playground`` runs it, but with its result cache off (``cache=0``),
so every request checks, describes and lays out both views with ``dot`` afresh.
For each spec, each repeat sends ``POST /api/check`` with the spec's text changed by
one edit (a new trailing comment, so no cache could answer it) over HTTP, and times
it until the response, holding both SVGs, is read and parsed. A second column times
the same edit with the caches on (the second time a text is seen is excluded: each
edit is new), which is what the page does while one types: a comment or a field that
changes nothing drawn reuses the SVGs.

Prints a markdown table (median and max ms per spec, then over all specs) that
docs/playground.md quotes. The figures are the machine's; the target is 300 ms.
"""

from __future__ import annotations

import argparse
import http.client
import json
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attngraph.playground import make_server  # noqa: E402

TARGET_MS = 300.0


def _round_trip(conn: http.client.HTTPConnection, text: str, name: str) -> float:
    """Milliseconds of one check, request sent to both SVGs parsed."""
    body = json.dumps({"text": text, "name": name}).encode("utf-8")
    t0 = time.perf_counter()
    conn.request("POST", "/api/check", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = json.loads(resp.read())
    ms = 1000 * (time.perf_counter() - t0)
    if resp.status != 200 or not data["ok"] or not all(data["svg"].values()):
        msg = f"{name}: check failed: {data.get('errors') or data.get('error')}"
        raise SystemExit(msg)
    return ms


def _measure(specs: list[Path], repeats: int, cache: int) -> dict[str, list[float]]:
    server = make_server(ROOT, port=0, cache=cache)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), port, timeout=60)
    out: dict[str, list[float]] = {}
    try:
        for spec in specs:  # warm the imports and dot once per spec
            _round_trip(conn, spec.read_text(encoding="utf-8"), spec.name)
        for spec in specs:
            text = spec.read_text(encoding="utf-8")
            out[spec.stem] = [_round_trip(conn, f"{text}\n# edit {cache} {i}\n", spec.name)
                              for i in range(repeats)]
    finally:
        conn.close()
        server.shutdown()
        server.server_close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--specs", type=Path, default=ROOT / "specs")
    args = ap.parse_args()
    specs = sorted(args.specs.glob("*.yaml"))
    cold = _measure(specs, args.repeats, cache=0)
    warm = _measure(specs, args.repeats, cache=64)
    print(f"# playground round trip: {len(specs)} specs × {args.repeats} edits; "
          f"{platform.processor() or platform.machine()}, python {platform.python_version()}")
    print()
    print("| spec | median ms | max ms | median ms, SVG cache on |")
    print("|---|---:|---:|---:|")
    for name in cold:
        print(f"| {name} | {statistics.median(cold[name]):.0f} | {max(cold[name]):.0f} "
              f"| {statistics.median(warm[name]):.0f} |")
    every = [t for v in cold.values() for t in v]
    worst = max(cold, key=lambda k: max(cold[k]))
    medians = [statistics.median(v) for v in cold.values()]
    print(f"| **all specs** | {statistics.median(every):.0f} | {max(every):.0f} "
          f"| {statistics.median([t for v in warm.values() for t in v]):.0f} |")
    print()
    print(f"median over specs of the median: {statistics.median(medians):.0f} ms; slowest spec "
          f"{worst} (max {max(cold[worst]):.0f} ms); target {TARGET_MS:.0f} ms: "
          + ("met" if max(every) < TARGET_MS else "NOT met"))


if __name__ == "__main__":
    main()
