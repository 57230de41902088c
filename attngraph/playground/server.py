"""The playground's HTTP server: the page, its scripts, and a small JSON API.

Built on the standard library's :class:`http.server.ThreadingHTTPServer`: it adds
no dependency, and a server for one person on their own machine needs no more.
It is meant to be left running, so:

- it binds to 127.0.0.1 unless told otherwise, and answers only requests whose
  ``Host`` names the address it listens on (a web page cannot reach it through a
  DNS name of its own); a POST must be JSON (``Content-Type: application/json``,
  which no other site can send without the browser asking first) and, when the
  browser names an ``Origin``, come from the page itself;
- a request body over :data:`MAX_REQUEST` bytes is refused (413) unread, and a
  request must arrive within :data:`READ_TIMEOUT` seconds;
- at most :data:`MAX_CHECKS` checks run at once (more wait, then get 503); each
  applies the resource guard and bounds ``dot``'s time (:mod:`.check`);
- a spec is data: it is parsed and drawn, never imported or run;
- any failure becomes a JSON error and the server goes on serving; the log names
  the method, the path's route and the status only (never request text).

Routes: ``GET /`` (the page), ``GET /static/NAME``, ``GET /api/specs``,
``GET /api/spec?id=``, ``GET /api/runs?spec=``, ``GET /api/attention?run=``;
``POST /api/check`` ``{text, name}``, ``POST /api/diff`` ``{text, name, other}``,
``POST /api/save`` ``{path, text, confirm: true}``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from attngraph.errors import AttnGraphError
from attngraph.playground.check import Checker, check_errors, diff_texts
from attngraph.playground.workspace import OutsideFolder, Workspace

__all__ = ["PlaygroundServer", "make_server", "MAX_REQUEST", "MAX_CHECKS", "READ_TIMEOUT",
           "LOOPBACK"]

#: Largest request body, in bytes (a spec is a few kilobytes; two fit easily).
MAX_REQUEST = 1_000_000
#: Checks (and diffs) that run at once; the rest wait up to :data:`_BUSY_WAIT` seconds.
MAX_CHECKS = 4
#: Seconds a client has to send its request (a stalled one frees its thread).
READ_TIMEOUT = 15.0
#: The addresses that are this machine only.
LOOPBACK = ("127.0.0.1", "localhost", "::1")
_BUSY_WAIT = 10.0
#: A refused body up to this many times the limit is read and dropped (see _discard).
_DRAIN = 8
_STATIC = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
           ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".txt": "text/plain"}
#: The page's policy: its own scripts only, no inline script (an SVG label can hold none).
_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data: blob:; object-src 'none'; base-uri 'none'; "
        "frame-ancestors 'none'; form-action 'none'")


class _Refused(Exception):
    """A request answered with ``status`` and a JSON error (never a bug)."""

    def __init__(self, status: HTTPStatus, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra


def _static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files, read once from the package (``attngraph/playground/static``)."""
    out: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files("attngraph.playground").joinpath("static").iterdir():
        suffix = Path(entry.name).suffix
        if entry.is_file() and suffix in _STATIC:
            out[entry.name] = (entry.read_bytes(), _STATIC[suffix])
    return out


class PlaygroundServer(ThreadingHTTPServer):
    """A threading HTTP server holding the workspace, the checker and the limits."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], workspace: Workspace, *,
                 max_request: int = MAX_REQUEST, max_checks: int = MAX_CHECKS,
                 verbose: bool = False, cache: int = 64) -> None:
        self.workspace = workspace
        self.checker = Checker(cache=cache)
        self.max_request = max_request
        self.checks = threading.BoundedSemaphore(max_checks)
        self.static = _static_files()
        self.verbose = verbose
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        """The page's address."""
        address, port = self.server_address[:2]
        host = address.decode() if isinstance(address, bytes) else str(address)
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    @property
    def loopback(self) -> bool:
        """True when it listens on this machine only."""
        return str(self.server_address[0]) in LOOPBACK

    def server_close(self) -> None:
        """Close the socket and stop the layout threads."""
        super().server_close()
        self.checker.close()


def make_server(root: str | Path = ".", *, host: str = "127.0.0.1", port: int = 8765,
                **options: Any) -> PlaygroundServer:
    """A playground server for the folder ``root``, bound but not yet serving.

    Call ``serve_forever()`` on it (``port=0`` picks a free port: see ``.url``).

    Parameters
    ----------
    root : str or Path
        The folder whose spec files the page may open and save, and whose trained
        runs it shows; nothing outside it is read or written (but the catalog).
    host : str
        The address to listen on; anything but loopback exposes the playground
        (and the files of ``root``) to the network.
    port : int
        The port (0: any free one).
    **options
        ``max_request``, ``max_checks``, ``verbose`` (log each request's route),
        ``cache`` (results kept by text; 0 keeps none, as the benchmark measures).
    """
    return PlaygroundServer((host, port), Workspace(Path(root)), **options)


class _Handler(BaseHTTPRequestHandler):
    server: PlaygroundServer
    server_version = "attngraph-playground"
    sys_version = ""
    protocol_version = "HTTP/1.1"
    timeout = READ_TIMEOUT
    # headers and body go out as two writes: without this, Nagle's algorithm and the
    # client's delayed ACK hold the body back ~40 ms on every response
    disable_nagle_algorithm = True

    # -- plumbing ----------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Nothing raw: the method, the route and the status, when ``verbose``."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if self.server.verbose:
            route = urlsplit(self.path).path if self.path.isprintable() else "?"
            sys.stderr.write(f"{self.command} {route[:80]!r} {code}\n")

    def _send(self, status: int, body: bytes, ctype: str, *,
              extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Referrer-Policy", "no-referrer")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json")

    def _host_ok(self) -> bool:
        """On loopback, only a ``Host`` that names this machine (no DNS rebinding)."""
        if not self.server.loopback:
            return True
        host = (self.headers.get("Host") or "").strip().lower()
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.strip("[]") in LOOPBACK

    def _dispatch(self, routes: dict[str, Any]) -> None:
        try:
            if not self._host_ok():
                raise _Refused(HTTPStatus.FORBIDDEN, "unknown host: open the address the "
                               "playground printed")
            url = urlsplit(self.path)
            handler = routes.get(url.path)
            if handler is None and url.path.startswith("/static/"):
                handler = self._static
            if handler is None:
                raise _Refused(HTTPStatus.NOT_FOUND, "no such page")
            query = {k: v[0] for k, v in parse_qs(url.query, max_num_fields=8).items()}
            handler(url.path, query)
        except _Refused as exc:
            self.close_connection = self.close_connection or exc.status >= 500 or (
                exc.status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
            self._json(exc.status, {"error": exc.message, **exc.extra})
        except AttnGraphError as exc:
            status = HTTPStatus.FORBIDDEN if isinstance(exc, OutsideFolder) else (
                HTTPStatus.UNPROCESSABLE_ENTITY)
            self._json(status,
                       {"error": exc.message, "errors": check_errors(exc)})
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - the server goes on; the page says what
            self.close_connection = True
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR,
                       {"error": f"internal error ({type(exc).__name__}); the playground "
                        "goes on serving"})

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._dispatch({"/": self._page, "/index.html": self._page,
                        "/api/specs": self._specs, "/api/spec": self._spec,
                        "/api/runs": self._runs, "/api/attention": self._attention})

    do_HEAD = do_GET  # noqa: N815

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self._dispatch({"/api/check": self._check, "/api/diff": self._diff,
                        "/api/save": self._save})

    def _body(self) -> dict[str, Any]:
        """The request's JSON object, refused when too big, not JSON, or cross-site."""
        if self.command != "POST":
            raise _Refused(HTTPStatus.METHOD_NOT_ALLOWED, "use POST")
        origin = self.headers.get("Origin")
        if origin is not None and origin != f"http://{self.headers.get('Host', '')}":
            raise _Refused(HTTPStatus.FORBIDDEN, "requests come from the playground's page only")
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise _Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send JSON (application/json)")
        try:
            size = int(self.headers.get("Content-Length", ""))
        except ValueError:
            raise _Refused(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is needed") from None
        if size < 0 or size > self.server.max_request:
            self._discard(size)
            raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                           f"request of {size:,} bytes is over the limit of "
                           f"{self.server.max_request:,}", limit=self.server.max_request)
        try:
            data = json.loads(self.rfile.read(size).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise _Refused(HTTPStatus.BAD_REQUEST, "the body is not JSON") from None
        if not isinstance(data, dict):
            raise _Refused(HTTPStatus.BAD_REQUEST, "the body is not a JSON object")
        return data

    def _discard(self, size: int) -> None:
        """Read and drop a refused body of moderate size, so the client reads the
        answer rather than a reset connection; a larger one is cut off unread."""
        left = size if 0 < size <= _DRAIN * self.server.max_request else 0
        while left > 0:
            chunk = self.rfile.read(min(left, 65536))
            if not chunk:
                break
            left -= len(chunk)

    @staticmethod
    def _text(data: dict[str, Any], key: str = "text") -> str:
        value = data.get(key)
        if not isinstance(value, str):
            raise _Refused(HTTPStatus.BAD_REQUEST, f"'{key}' must be a string")
        return value

    @contextlib.contextmanager
    def _slot(self) -> Iterator[None]:
        """One of the server's check slots, held while the body runs (503 when busy)."""
        if not self.server.checks.acquire(timeout=_BUSY_WAIT):
            raise _Refused(HTTPStatus.SERVICE_UNAVAILABLE, "busy: too many checks at once")
        try:
            yield
        finally:
            self.server.checks.release()

    # -- routes --------------------------------------------------------------------
    def _page(self, _path: str, _q: dict[str, str]) -> None:
        body, ctype = self.server.static["index.html"]
        self._send(200, body, ctype, extra={"Content-Security-Policy": _CSP})

    def _static(self, path: str, _q: dict[str, str]) -> None:
        name = path[len("/static/"):]
        if name not in self.server.static:  # a fixed set of names: no path is built
            raise _Refused(HTTPStatus.NOT_FOUND, "no such file")
        body, ctype = self.server.static[name]
        self._send(200, body, ctype)

    def _specs(self, _path: str, _q: dict[str, str]) -> None:
        ws = self.server.workspace
        self._json(200, {"specs": ws.specs(), "root": str(ws.root)})

    def _spec(self, _path: str, q: dict[str, str]) -> None:
        self._json(200, self.server.workspace.open(q.get("id", "")))

    def _runs(self, _path: str, q: dict[str, str]) -> None:
        self._json(200, {"runs": self.server.workspace.runs(q.get("spec") or None)})

    def _attention(self, _path: str, q: dict[str, str]) -> None:
        with self._slot():
            png = self.server.workspace.attention(q.get("run", ""))
        self._send(200, png, "image/png")

    def _check(self, _path: str, _q: dict[str, str]) -> None:
        data = self._body()
        text = self._text(data)
        with self._slot():
            result = self.server.checker.check(text, str(data.get("name") or "<spec>"))
        self._json(200, result)

    def _diff(self, _path: str, _q: dict[str, str]) -> None:
        data = self._body()
        text = self._text(data)
        other = data.get("other")
        if isinstance(other, str):  # a listed spec's id
            opened = self.server.workspace.open(other)
            b = (opened["text"], opened["name"])
        elif isinstance(other, dict) and isinstance(other.get("text"), str):
            b = (other["text"], str(other.get("name") or "<other>"))
        else:
            raise _Refused(HTTPStatus.BAD_REQUEST, "'other' must be a spec id or {text, name}")
        with self._slot():
            self._json(200, diff_texts((text, str(data.get("name") or "<spec>")), b))

    def _save(self, _path: str, _q: dict[str, str]) -> None:
        data = self._body()
        text = self._text(data)
        if data.get("confirm") is not True:
            raise _Refused(HTTPStatus.PRECONDITION_REQUIRED,
                           "saving overwrites the file: confirm it (\"confirm\": true)")
        self._json(200, self.server.workspace.save(data.get("path"), text))
