"""`attngraph catalog` lists the built-in mechanisms from any working directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from attngraph.cli import main

SPECS = Path(__file__).resolve().parent.parent / "specs"


def test_catalog_lists_builtin_specs_outside_the_repo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from a folder with no specs/, the command lists every spec of the catalog."""
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["catalog"])
    assert r.exit_code == 0, r.output
    names = {line.split()[0] for line in r.output.splitlines() if line.strip()}
    assert names == {p.stem for p in SPECS.glob("*.yaml")}
