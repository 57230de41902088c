"""The playground's HTTP API without a browser (issue 28): located errors with hints,
both SVGs, the size limit, the folder boundary, cross-site refusals, and a server that
keeps serving after any bad request."""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from attngraph.frontend import load_spec
from attngraph.playground import make_server
from attngraph.playground.server import PlaygroundServer

ROOT = Path(__file__).resolve().parent.parent
GLOBAL = (ROOT / "specs" / "global_attention.yaml").read_text(encoding="utf-8")

pytestmark = pytest.mark.dot


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PlaygroundServer]:
    """A playground for a fresh folder holding one spec, on a free loopback port."""
    (tmp_path / "mine.yaml").write_text(GLOBAL, encoding="utf-8")
    srv = make_server(tmp_path, port=0, max_request=50_000)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _request(srv: PlaygroundServer, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(str(host), port, timeout=30)
    try:
        conn.request(method, path, body, headers or {})
        resp = conn.getresponse()
        data = resp.read()
        ctype = resp.getheader("Content-Type", "")
        parsed = json.loads(data) if ctype.startswith("application/json") else data
        return resp.status, parsed, {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


def _post(srv: PlaygroundServer, path: str, data: Any, **headers: str) -> tuple[int, Any]:
    status, body, _ = _request(srv, "POST", path, json.dumps(data).encode("utf-8"),
                               {"Content-Type": "application/json", **headers})
    return status, body


def _where(text: str, needle: str) -> tuple[int, int]:
    """1-based (line, col) of ``needle`` in ``text``."""
    at = text.index(needle)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


def test_binds_loopback_by_default(tmp_path: Path) -> None:
    """make_server and the command both default to 127.0.0.1 (this machine only)."""
    from attngraph.commands.playground import playground

    srv = make_server(tmp_path, port=0)
    try:
        assert srv.server_address[0] == "127.0.0.1"
        assert srv.loopback and srv.url.startswith("http://127.0.0.1:")
    finally:
        srv.server_close()
    host = next(p for p in playground.params if p.name == "host")
    assert host.default == "127.0.0.1"


def test_broken_spec_is_located_with_its_hint(server: PlaygroundServer) -> None:
    """A wrong scorer function is reported at the line and column of its value, with the
    "did you mean" hint; no SVG is returned for a broken spec."""
    bad = GLOBAL.replace("fn: additive", "fn: additiv")
    status, out = _post(server, "/api/check", {"text": bad, "name": "mine.yaml"})
    assert status == 200 and out["ok"] is False
    line, col = _where(bad, "additiv,")
    (err,) = out["errors"]
    assert (err["line"], err["col"]) == (line, col)
    assert "additiv" in err["message"] and "additive" in err["hint"]
    assert err["where"] == f"mine.yaml:{line}:{col}"
    assert out["svg"] == {"architecture": None, "unrolled": None}


def test_yaml_syntax_and_reference_errors_are_located(server: PlaygroundServer) -> None:
    """A YAML syntax error and an unknown reference each come back at their line."""
    broken = GLOBAL.replace("values: x, label: z}", "values: x, label: z")
    _, out = _post(server, "/api/check", {"text": broken})
    assert out["errors"] and "YAML syntax" in out["errors"][0]["message"]
    assert out["errors"][0]["line"] >= _where(broken, "values: x")[0]
    unknown = GLOBAL.replace("weights: p,", "weights: pp,")
    _, out = _post(server, "/api/check", {"text": unknown})
    assert [e["line"] for e in out["errors"]] == [_where(unknown, "pp,")[0]]
    assert out["errors"][0]["hint"]


def test_good_spec_returns_both_svgs_sites_params_and_spans(server: PlaygroundServer) -> None:
    """A valid spec gives both diagrams as SVG, describe's sites, the parameter table
    (total as validate counts it), every node's lines, and each drawn node's spec node."""
    status, out = _post(server, "/api/check", {"text": GLOBAL, "name": "g.yaml"})
    assert status == 200 and out["ok"] and out["errors"] == []
    for view in ("architecture", "unrolled"):
        assert "<svg" in out["svg"][view] and "</svg>" in out["svg"][view]
    assert out["describe"]["sites"] and "attention site" in out["describe"]["text"]
    graph = load_spec(ROOT / "specs" / "global_attention.yaml")
    assert out["params"]["total"] == graph.params
    spans = {n["id"]: n for n in out["nodes"]}
    assert spans["score"]["line"] == _where(GLOBAL, "score:")[0]
    assert spans["score"]["end_line"] == spans["score"]["line"]
    assert out["targets"]["architecture"]["score"] == "score"
    assert out["targets"]["unrolled"]["x[1]"] == "x"
    assert out["targets"]["architecture"]["output.logits"] == "output:logits"
    # each mapped title is a node the SVG draws
    titles = set(re.findall(r"<title>([^<]*)</title>", out["svg"]["architecture"]))
    assert set(out["targets"]["architecture"]) <= titles


def test_keeps_serving_after_bad_requests(server: PlaygroundServer) -> None:
    """Non-JSON, a non-object, a missing text, binary junk, a deep YAML nest and a
    resource-guard refusal each get a JSON answer; a good spec is checked after them."""
    bad_bodies: list[tuple[bytes, int]] = [
        (b"not json", 400), (b"[1, 2]", 400), (b'{"name": 3}', 400),
        (b"\xff\xfe", 400),
    ]
    for body, expected in bad_bodies:
        status, out, _ = _request(server, "POST", "/api/check", body,
                                  {"Content-Type": "application/json"})
        assert status == expected and "error" in out
    for text in ("\x00\x01 binary", "a: " + "[" * 200, "", "- just\n- a list\n",
                 GLOBAL.replace("d: 32", "d: 100000000")):
        status, out = _post(server, "/api/check", {"text": text})
        assert status == 200 and not out["ok"] and out["errors"], text[:20]
    status, out = _post(server, "/api/check", {"text": GLOBAL})
    assert status == 200 and out["ok"]


def test_resource_guard_applies(server: PlaygroundServer) -> None:
    """A spec over the size limits is refused, located, with the guard's hint (the
    playground never passes allow_large)."""
    big = GLOBAL.replace("{vocab: 32, d: 32, classes: 4}", "{vocab: 32, d: 900000, classes: 4}")
    _, out = _post(server, "/api/check", {"text": big})
    assert not out["ok"]
    assert any("allow-large" in (e["hint"] or "") for e in out["errors"]), out["errors"]


def test_spec_never_imports_code(server: PlaygroundServer) -> None:
    """A scorer function named after a module is an error at its line; the module is
    not imported."""
    text = GLOBAL.replace("fn: additive", "fn: playground_never_imported.evil")
    _, out = _post(server, "/api/check", {"text": text})
    assert out["errors"][0]["line"] == _where(text, "playground_never_imported")[0]
    assert not any(m.startswith("playground_never_imported") for m in sys.modules)


def test_oversized_request_is_refused_with_413(server: PlaygroundServer) -> None:
    """A body over the limit gets 413 naming the limit, and the server goes on."""
    status, out = _post(server, "/api/check", {"text": "#" * 60_000})
    assert status == 413 and out["limit"] == 50_000
    status, out, _ = _request(server, "POST", "/api/check", b"{}",
                              {"Content-Type": "application/json",
                               "Content-Length": str(10**12)})
    assert status == 413
    assert _post(server, "/api/check", {"text": GLOBAL})[1]["ok"]


def test_paths_outside_the_folder_are_refused(server: PlaygroundServer, tmp_path: Path) -> None:
    """Opening or saving ../, an absolute path or a link leading out is 403; a catalog
    name that is a path is not found; nothing is written outside the folder."""
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_text(GLOBAL, encoding="utf-8")
    (tmp_path / "link.yaml").symlink_to(outside)
    for spec_id in (f"file:../{outside.name}", f"file:{outside}", "file:link.yaml"):
        status, out, _ = _request(server, "GET", f"/api/spec?id={spec_id}")
        assert status == 403, (spec_id, out)
    status, _, _ = _request(server, "GET", "/api/spec?id=catalog:../../etc/passwd")
    assert status == 422
    for path in (f"../{outside.name}", "link.yaml", "/tmp/elsewhere.yaml"):
        status, _ = _post(server, "/api/save", {"path": path, "text": "x: 1\n", "confirm": True})
        assert status == 403, path
    assert outside.read_text(encoding="utf-8") == GLOBAL
    assert not Path("/tmp/elsewhere.yaml").exists()
    status, _ = _post(server, "/api/save", {"path": "notes.txt", "text": "x", "confirm": True})
    assert status == 422


def test_save_needs_confirmation_and_round_trips(server: PlaygroundServer,
                                                 tmp_path: Path) -> None:
    """Saving without ``confirm: true`` is refused (428) and writes nothing; with it the
    file is written whole and opens again from the list."""
    text = GLOBAL.replace("Global attention document classifier", "Mine")
    status, _ = _post(server, "/api/save", {"path": "mine.yaml", "text": text})
    assert status == 428 and (tmp_path / "mine.yaml").read_text(encoding="utf-8") == GLOBAL
    status, out = _post(server, "/api/save", {"path": "mine.yaml", "text": text,
                                              "confirm": True})
    assert status == 200 and out["path"] == "mine.yaml" and not out["created"]
    status, listed, _ = _request(server, "GET", "/api/specs")
    assert {"id": "file:mine.yaml", "group": "file", "name": "mine.yaml"} in listed["specs"]
    assert any(s["id"] == "catalog:global_attention" for s in listed["specs"])
    status, opened, _ = _request(server, "GET", "/api/spec?id=file:mine.yaml")
    assert status == 200 and opened["text"] == text and opened["writable"]


def test_cross_site_requests_are_refused(server: PlaygroundServer) -> None:
    """Another origin, a form's content type, or a foreign Host header is refused."""
    good = {"text": GLOBAL}
    assert _post(server, "/api/check", good, Origin="http://evil.example")[0] == 403
    status, _, _ = _request(server, "POST", "/api/check", json.dumps(good).encode(),
                            {"Content-Type": "text/plain"})
    assert status == 415
    status, _, _ = _request(server, "GET", "/api/specs", headers={"Host": "evil.example"})
    assert status == 403
    host, port = server.server_address[:2]
    assert _post(server, "/api/check", good, Origin=f"http://{host}:{port}")[0] == 200


def test_page_and_scripts_are_served_from_the_package(server: PlaygroundServer) -> None:
    """The page names only its own /static/ files, each served; no file loads anything
    from another host; the page carries a content security policy."""
    status, page, headers = _request(server, "GET", "/")
    assert status == 200 and "script-src 'self'" in headers["content-security-policy"]
    html = page.decode("utf-8")
    refs = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert refs and all(r.startswith(("/static/", "data:")) for r in refs), refs
    for ref in refs:
        if ref.startswith("/static/"):
            status, body, _ = _request(server, "GET", ref)
            assert status == 200 and not re.search(rb"https?://", body), ref
    assert _request(server, "GET", "/static/../server.py")[0] == 404


def test_diff_against_a_listed_spec(server: PlaygroundServer) -> None:
    """/api/diff relates the text to a listed spec; a broken text is located."""
    status, out = _post(server, "/api/diff", {"text": GLOBAL, "name": "a.yaml",
                                              "other": "catalog:kvq_attention"})
    assert status == 200 and out["ok"] and "global_attention vs kvq_attention" in out["text"]
    bad = GLOBAL.replace("weights: p,", "weights: pp,")
    _, out = _post(server, "/api/diff", {"text": bad, "other": "catalog:kvq_attention"})
    assert not out["ok"] and out["errors"][0]["spec"] == "a"


def test_runs_are_listed_and_unknown_runs_refused(server: PlaygroundServer,
                                                  tmp_path: Path) -> None:
    """A folder with a run's summary.json and checkpoint.pt is listed for its spec; a
    path that is not a listed run gets no picture."""
    run = tmp_path / "runs" / "ga"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"spec": "global_attention",
                                                  "task": "needle"}), encoding="utf-8")
    (run / "checkpoint.pt").write_bytes(b"")
    status, out, _ = _request(server, "GET", "/api/runs?spec=global_attention")
    assert out["runs"] == [{"run": "runs/ga", "spec": "global_attention", "task": "needle"}]
    assert _request(server, "GET", "/api/runs?spec=other")[1]["runs"] == []
    status, out, _ = _request(server, "GET", "/api/attention?run=../../etc")
    assert status == 422 and "no trained run" in out["error"]


def test_command_prints_its_address_and_serves(tmp_path: Path) -> None:
    """`attngraph playground DIR --port 0` prints the loopback address it serves on."""
    proc = subprocess.Popen([sys.executable, "-m", "attngraph", "playground", str(tmp_path),
                             "--port", "0"], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", first)
        assert m, first
        conn = http.client.HTTPConnection("127.0.0.1", int(m.group(1)), timeout=10)
        conn.request("GET", "/")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_attention_picture_of_a_trained_run(server: PlaygroundServer, tmp_path: Path) -> None:
    """A run trained under the folder is listed for its spec and its attention picture
    comes back as a PNG (trains 30 steps: a few seconds)."""
    res = subprocess.run([sys.executable, "-m", "attngraph", "train",
                          str(ROOT / "specs" / "global_attention.yaml"), "--steps", "30",
                          "--out", str(tmp_path / "runs" / "ga"), "--quiet"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 0, res.stderr[-2000:]
    _, out, _ = _request(server, "GET", "/api/runs?spec=global_attention")
    assert [r["run"] for r in out["runs"]] == ["runs/ga"]
    status, png, headers = _request(server, "GET", "/api/attention?run=runs/ga")
    assert status == 200 and headers["content-type"] == "image/png"
    assert png.startswith(b"\x89PNG")
