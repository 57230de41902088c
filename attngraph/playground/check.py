"""One check of the playground: spec text in, everything the page shows out.

:func:`check` runs the project's own stages in process: :func:`attngraph.source.loads`
and :func:`attngraph.frontend.loads_spec` (the resource guard included: the playground
never passes ``allow_large``), the two views of :mod:`renderers`, laid out by ``dot``
concurrently (two processes, so the round trip costs the slower view, not both), and
:func:`attngraph.analysis.describe.describe`. A spec never causes an import: plugins
load only from the command line (``attngraph --plugin``).

Results are kept per text (:class:`Checker`), and SVGs per DOT source, so that an
edit that changes nothing drawn (a comment, a hint's wording) does not run ``dot``.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

from attngraph.errors import AttnGraphError, Diagnostic

__all__ = ["Checker", "check_errors", "diff_texts", "VIEWS", "DOT_TIMEOUT"]

#: The diagrams the page shows, side by side.
VIEWS = ("architecture", "unrolled")
#: Seconds one ``dot`` layout may take before the check reports a located error.
DOT_TIMEOUT = 10.0
#: What a check's ``file`` may be called: a catalog name or a path, printable.
_NAME = re.compile(r"[^\w./ -]")

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A small thread-safe least-recently-used map."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[K, V] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
            return None

    def put(self, key: K, value: V) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            while len(self.items) > self.size:
                self.items.popitem(last=False)


def clean_name(name: object) -> str:
    """A file name for diagnostics: printable, short, never a path out of anything."""
    text = _NAME.sub("_", str(name or "<spec>"))[:120]
    return text or "<spec>"


def _diag(d: Diagnostic) -> dict[str, Any]:
    line = max(d.loc.line, 0)
    return {"line": line, "col": max(d.loc.col, 1) if line else 0,
            "message": d.message, "hint": d.hint, "where": str(d.loc)}


def check_errors(exc: AttnGraphError) -> list[dict[str, Any]]:
    """Every diagnostic of ``exc`` as ``{line, col, message, hint, where}`` (line 0:
    the whole spec)."""
    return [_diag(d) for d in exc.diagnostics]


class Checker:
    """Checks spec texts, remembering the last results.

    Parameters
    ----------
    cache : int
        Results kept (by text); SVGs kept by DOT source are twice as many.
    dot_timeout : float
        Seconds one ``dot`` layout may take.
    """

    def __init__(self, *, cache: int = 64, dot_timeout: float = DOT_TIMEOUT) -> None:
        self.results: _Lru[tuple[str, str], dict[str, Any]] = _Lru(cache)
        self.svgs: _Lru[str, str] = _Lru(2 * cache)
        self.dot_timeout = dot_timeout
        self.pool = ThreadPoolExecutor(max_workers=len(VIEWS), thread_name_prefix="dot")

    def close(self) -> None:
        """Stop the layout threads."""
        self.pool.shutdown(wait=False, cancel_futures=True)

    def check(self, text: str, name: str = "<spec>") -> dict[str, Any]:
        """The page's view of ``text``: errors, or SVGs, sites, parameters and spans.

        Returns a JSON-ready dict: ``ok``, ``errors`` (``[{line, col, message, hint,
        where}]``), ``svg`` (``{view: text or None}``), ``describe`` (``{text, sites}``),
        ``params`` (``{rows, total}``), ``nodes`` (every node's line span),
        ``targets`` (``{view: {svg title: node id}}``), ``name``, ``title``, ``ms``.
        """
        file = clean_name(name)
        key = (file, text)
        hit = self.results.get(key)
        if hit is not None:
            return {**hit, "ms": 0.0, "cached": True}
        t0 = time.perf_counter()
        out = self._check(text, file)
        out["ms"] = round(1000 * (time.perf_counter() - t0), 1)
        self.results.put(key, out)
        return out

    def _check(self, text: str, file: str) -> dict[str, Any]:
        from attngraph.analysis.describe import describe, to_dict
        from attngraph.analysis.formats import render as render_description
        from attngraph.frontend import loads_spec
        from attngraph.playground.locate import diagram_targets, node_spans
        from attngraph.source import loads
        from renderers import to_diagram
        from renderers.dot import to_dot

        empty: dict[str, Any] = {"ok": False, "errors": [], "svg": dict.fromkeys(VIEWS),
                                 "describe": None, "params": None, "nodes": [],
                                 "targets": {v: {} for v in VIEWS}, "name": None,
                                 "title": None}
        try:
            doc = loads(text, file)
            graph = loads_spec(text, file)
        except AttnGraphError as exc:
            return {**empty, "errors": check_errors(exc)}
        spans = node_spans(graph, doc)
        diagrams = {v: to_diagram(graph, v) for v in VIEWS}
        jobs = {v: self.pool.submit(self._svg, to_dot(dg)) for v, dg in diagrams.items()}
        desc = describe(graph)
        errors: list[dict[str, Any]] = []
        svg: dict[str, str | None] = {}
        for v, job in jobs.items():
            try:
                svg[v] = job.result()
            except AttnGraphError as exc:
                svg[v] = None
                errors += [{**e, "message": f"{v} view: {e['message']}"}
                           for e in check_errors(exc)]
        line_of = {s.id: s.line for s in spans}
        return {
            **empty,
            "ok": not errors,
            "errors": errors,
            "svg": svg,
            "describe": {"text": render_description(desc, "text"),
                         "sites": to_dict(desc)["sites"]},
            "params": {"rows": [{"node": q, "kind": k, "params": p, "line": line_of.get(q)}
                                for q, k, p in desc.params],
                       "total": desc.total_params},
            "nodes": [s.to_json() for s in spans],
            "targets": {v: diagram_targets(dg, spans) for v, dg in diagrams.items()},
            "name": graph.name,
            "title": graph.title,
        }

    def _svg(self, source: str) -> str:
        from renderers.backend import run_dot

        hit = self.svgs.get(source)
        if hit is None:
            hit = run_dot(source, "svg", timeout=self.dot_timeout).decode("utf-8")
            self.svgs.put(source, hit)
        return hit


def diff_texts(a: tuple[str, str], b: tuple[str, str],
               load: Callable[[str, str], Any] | None = None) -> dict[str, Any]:
    """``attngraph diff`` of two ``(text, name)`` specs: ``{ok, text, errors}``.

    The errors of either spec are returned located, with ``spec`` saying which.
    """
    from attngraph.analysis.diff import diff, render_diff
    from attngraph.frontend import loads_spec

    load = load or loads_spec
    graphs = []
    for which, (text, name) in (("a", a), ("b", b)):
        try:
            graphs.append(load(text, clean_name(name)))
        except AttnGraphError as exc:
            return {"ok": False, "text": None,
                    "errors": [{**e, "spec": which} for e in check_errors(exc)]}
    return {"ok": True, "text": render_diff(diff(graphs[0], graphs[1]), "text"), "errors": []}
