"""``attngraph render`` and the format layer: suffixes, stdout, dot backend, no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

from attngraph.errors import RenderError
from attngraph.frontend import load_spec
from renderers import render
from renderers.dot import quote

ROOT = Path(__file__).resolve().parent.parent
FIG = ROOT / "examples" / "figures" / "intra-attention.yaml"


def test_stdout_text_formats(cli) -> None:
    """Without -o, text formats print: dot by default, mermaid and json on request."""
    out = cli("render", FIG, "--view", "unrolled")
    assert out.exit_code == 0 and out.output.startswith("digraph intra_attention")
    mm = cli("render", FIG, "--view", "unrolled", "--format", "mermaid")
    assert mm.output.startswith("flowchart BT")
    js = cli("render", FIG, "--format", "json")
    assert json.loads(js.output)["graph"]["view"] == "architecture"


def test_json_is_networkx_node_link_data() -> None:
    """networkx reads the json back with the same nodes and edges."""
    data = json.loads(render(load_spec(FIG), "unrolled", "json"))
    g = nx.node_link_graph(data, edges="edges")
    assert g.number_of_nodes() == len(data["nodes"])
    assert g.number_of_edges() == len(data["edges"]) == 12


def test_suffix_picks_format(tmp_path: Path, cli) -> None:
    """-o x.mmd writes mermaid, -o x.json json; an unknown suffix is a located error."""
    cli("render", FIG, "-o", tmp_path / "a.mmd", code=0)
    assert (tmp_path / "a.mmd").read_text().startswith("flowchart")
    bad = cli("render", FIG, "-o", tmp_path / "a.xyz")
    assert bad.exit_code == 1 and "cannot tell the format" in bad.output


def test_missing_dot_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without dot, svg fails with a RenderError naming what to install; dot text still works."""
    monkeypatch.setattr("shutil.which", lambda name: None)
    g = load_spec(FIG)
    with pytest.raises(RenderError) as err:
        render(g, "unrolled", "svg")
    assert "'dot' program" in err.value.message and "graphviz" in (err.value.hint or "")
    assert render(g, "unrolled", "dot").startswith("digraph")


def test_bad_spec_error_is_located(tmp_path: Path, cli) -> None:
    """A broken spec prints FILE:LINE:COL and exits 1 (the front end's diagnostics)."""
    p = tmp_path / "bad.yaml"
    p.write_text(FIG.read_text().replace("values: value", "values: valu"))
    out = cli("render", p)
    assert out.exit_code == 1 and f"{p}:" in out.output and "did you mean" in out.output


def test_quote_escapes() -> None:
    """DOT quoting escapes quotes, backslashes and newlines."""
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'
    assert quote("<pad>") == '"<pad>"'  # plain text, never an HTML label


def test_output_ids_with_colons_stay_nodes() -> None:
    """An id like ``output:logits`` is one node in DOT, not node ``output``, port ``logits``."""
    text = render(load_spec(FIG), "architecture", "dot")
    assert "output." in text and '"output:' not in text


@pytest.mark.dot
@pytest.mark.parametrize(("fmt", "magic"), [("svg", b"<svg"), ("png", b"\x89PNG"),
                                             ("pdf", b"%PDF")])
def test_dot_formats(tmp_path: Path, fmt: str, magic: bytes, cli) -> None:
    """svg/png/pdf files come out of dot with their format's signature."""
    out = tmp_path / f"fig.{fmt}"
    cli("render", FIG, "--view", "unrolled", "-o", out, code=0)
    assert magic in out.read_bytes()[:600]


@pytest.mark.dot
def test_render_is_fast_and_torch_free(tmp_path: Path) -> None:
    """The CLI renders to svg without importing torch; loading and drawing (after the
    imports, which networkx dominates) take well under a second."""
    code = (
        "import sys, time; from attngraph.cli import main\n"
        "import attngraph.frontend, renderers, networkx\n"
        "t = time.perf_counter()\n"
        "try:\n  main(['render', sys.argv[1], '--view', 'unrolled', '-o', sys.argv[2]])\n"
        "except SystemExit: pass\n"
        "print('torch' in sys.modules, time.perf_counter() - t)"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(FIG), str(tmp_path / "f.svg")],
                          capture_output=True, text=True, check=True)
    torch_loaded, took = proc.stdout.split()
    assert torch_loaded == "False"
    assert float(took) < 0.8, f"render took {took}s"
    assert (tmp_path / "f.svg").read_text().lstrip().startswith("<?xml")


def test_notebook_helper_offers_svg_or_mermaid(monkeypatch: pytest.MonkeyPatch) -> None:
    """show(graph) offers image/svg+xml, and falls back to mermaid text without dot."""
    from renderers import show

    monkeypatch.setattr("shutil.which", lambda name: None)
    bundle = show(load_spec(FIG), "unrolled")._repr_mimebundle_()
    assert bundle["text/plain"].startswith("flowchart BT")


def test_cli_offers_a_format_registered_later(tmp_path: Path, cli) -> None:
    """--format reads the format registry when used: a user's format is accepted."""
    from renderers import FORMATS

    with FORMATS.scoped():
        FORMATS.register("count", lambda dg: f"{len(dg.nodes)} nodes\n")
        r = cli("render", ROOT / "specs" / "global_attention.yaml",
                "--format", "count")
    assert r.exit_code == 0, r.output
    assert r.output.endswith(" nodes\n")
    r = cli("render", ROOT / "specs" / "global_attention.yaml",
            "--format", "count")
    assert r.exit_code == 2 and "'count' is not one of" in r.output


# --- where -o writes ----------------------------------------------------------


def test_output_into_missing_folders_makes_them(tmp_path: Path, cli) -> None:
    """-o into folders that do not exist yet makes them (as --help says), then writes."""
    out = tmp_path / "a" / "b" / "fig.mmd"
    cli("render", FIG, "-o", out, code=0)
    assert out.read_text().startswith("flowchart")
    help_text = cli("render", "--help").output
    assert "missing folders are made" in help_text


def test_output_under_a_file_is_one_error(tmp_path: Path, cli) -> None:
    """-o below a path that is a file (no folder can be made there) is one error at the
    output path, exit 1, no traceback."""
    (tmp_path / "f").write_text("x")
    out = tmp_path / "f" / "fig.dot"
    r = cli("render", FIG, "-o", out, code=1)
    assert r.output.splitlines()[0] == (
        f"{out}: error: cannot write {out}: {tmp_path / 'f'} is a file, not a folder"
    )
    assert "Traceback" not in r.output


def test_output_naming_a_folder(tmp_path: Path, cli) -> None:
    """-o naming an existing folder is a usage error (exit 2); a path ending in '/' is
    one error saying to give a file name."""
    r = cli("render", FIG, "-o", tmp_path)
    assert r.exit_code == 2 and "is a directory" in r.output
    slash = f"{tmp_path / 'new'}/"
    r = cli("render", FIG, "--format", "dot", "-o", slash, code=1)
    assert r.output.startswith(f"{slash}: error: {slash} names a folder, not a file")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="needs a user that permissions apply to")
def test_output_into_a_read_only_folder(tmp_path: Path, cli) -> None:
    """-o into a folder without write permission is one error naming the reason."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        r = cli("render", FIG, "-o", ro / "fig.dot")
    finally:
        ro.chmod(0o755)
    assert r.exit_code == 1
    assert r.output.startswith(f"{ro / 'fig.dot'}: error: cannot write {ro / 'fig.dot'}: "
                               "Permission denied")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_output_to_a_full_disk(cli) -> None:
    """A write that fails (no space left) is one error with the system's reason."""
    r = cli("render", FIG, "--format", "dot", "-o", "/dev/full", code=1)
    assert r.output.startswith("/dev/full: error: cannot write /dev/full: No space left")


def test_unknown_suffix_is_located_at_the_output(tmp_path: Path, cli) -> None:
    """An output suffix that names no format is an error at that output path."""
    out = tmp_path / "a.xyz"
    r = cli("render", FIG, "-o", out, code=1)
    assert r.output.startswith(f"{out}: error: cannot tell the format from '{out}'")


def test_schema_output_into_missing_folders(tmp_path: Path, cli) -> None:
    """`attngraph schema -o` makes missing folders too; under a file it is one error."""
    out = tmp_path / "x" / "schema.json"
    r = cli("schema", "-o", out)
    assert r.exit_code == 0 and json.loads(out.read_text())["$defs"]
    (tmp_path / "f").write_text("x")
    r = cli("schema", "-o", tmp_path / "f" / "s.json")
    assert r.exit_code == 1 and "is a file, not a folder" in r.output
