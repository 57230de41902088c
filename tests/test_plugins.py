"""Extensions from the plain command line: `attngraph --plugin MODULE ...` registers a
scorer from a module of the user's; every way such a scorer can fail is a located
error naming the node and the function, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGINS = Path(__file__).resolve().parent / "data" / "plugins"

SPEC = """attngraph: 1
name: plugged
inputs:
  src: {type: vectors, dim: 8}
nodes:
  q: {kind: queries, from: src, heads: 2}
  k: {kind: keys, from: src, heads: 2}
  v: {kind: values, from: src, heads: 2}
  s: {kind: scorer, fn: FN, query: q, key: k}
  p: {kind: softmax, scores: s}
  z: {kind: readout, weights: p, values: v}
outputs: {z: z}
"""


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "attngraph", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, check=False, timeout=120)


def test_plugin_scorer_runs_through_every_command(tmp_path: Path) -> None:
    """validate (parameters per head counted), compile, render and describe."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("FN", "bilinear_heads"), encoding="utf-8")
    out = _cli("--plugin", "demo_scorers", "validate", str(spec), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "s  scorer   [N, N] ×2                32 params" in out.stdout  # 2 heads × 4 × 4
    for cmd in (["compile", str(spec)], ["render", str(spec), "--view", "unrolled"],
                ["describe", str(spec)]):
        r = _cli("--plugin", "demo_scorers", *cmd, cwd=tmp_path)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (cmd, r.stderr)
    assert "qᵀ W_h k" in _cli("--plugin", "demo_scorers", "describe", str(spec),
                               cwd=tmp_path).stdout


def test_without_the_plugin_the_function_is_unknown(tmp_path: Path) -> None:
    """A spec never imports anything: without --plugin the name is simply unknown."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("FN", "bilinear_heads"), encoding="utf-8")
    r = _cli("validate", str(spec), cwd=tmp_path)
    assert r.returncode == 1 and "'bilinear_heads' is not a scorer function" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(("fn", "stage", "message"), [
    ("raising_make", "compile",
     "scorer fn 'raising_make': make(4, 4, 4) raised ValueError: this scorer needs dq == 3"),
    ("raising_params", "validate",
     "scorer fn 'raising_params': params(4, 4, 4) raised ZeroDivisionError"),
    ("miscounted", "compile",
     "scorer fn 'miscounted' declares 10 parameters (params(4, 4, 4) × 2 heads), but its "
     "module has 2"),
    ("headless", "compile",
     "scorer fn 'headless' has parameters but its make() takes no head count, so it "
     "cannot give each of the 2 heads its own"),
    ("raising_forward", "compile",
     "node 's' (scorer) failed at run time: scorer fn 'raising_forward' raised KeyError"),
    ("wrong_shape", "compile",
     "node 's' (scorer) failed at run time: scorer fn 'wrong_shape' returned scores of "
     "shape (2, 2, 5), but scores of 5 queries against 5 keys are (2, 2, 5, 5)"),
])
def test_each_way_a_plugin_fails_is_located(fn: str, stage: str, message: str,
                                            tmp_path: Path) -> None:
    """The error names the node's line (9) and what the function did wrong."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("FN", fn), encoding="utf-8")
    r = _cli("--plugin", "demo_scorers", stage, str(spec), "--length", "5", cwd=tmp_path) \
        if stage == "compile" else _cli("--plugin", "demo_scorers", stage, str(spec),
                                        cwd=tmp_path)
    assert r.returncode == 1, r.stdout
    assert "Traceback" not in r.stderr
    assert f"{spec}:9:" in r.stderr and message in r.stderr, r.stderr
    assert "hint:" in r.stderr


def test_a_plugin_that_does_not_import_is_a_clean_error(tmp_path: Path) -> None:
    """--plugin of a missing module: one error naming it, a hint, exit 1."""
    r = _cli("--plugin", "no_such_plugin", "validate", "x.yaml", cwd=tmp_path)
    assert r.returncode == 1
    assert "--plugin no_such_plugin failed to load: ModuleNotFoundError" in r.stderr
    assert "hint:" in r.stderr and "Traceback" not in r.stderr


def _installed(tmp_path: Path, target: str) -> Path:
    """A distribution on the path that declares an entry point of the plugin group."""
    dist = tmp_path / "site" / "demo_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-plugin\nVersion: 0.1\n",
                                   encoding="utf-8")
    (dist / "entry_points.txt").write_text(f"[attngraph.plugins]\ndemo = {target}\n",
                                           encoding="utf-8")
    return dist.parent


@pytest.mark.parametrize("broken", [False, True])
def test_installed_plugins_load_from_the_entry_point_group(broken: bool,
                                                           tmp_path: Path) -> None:
    """An installed package's entry point registers its scorers at start-up; one that
    fails to load is skipped with a warning naming it, and the command still runs."""
    site = _installed(tmp_path, "no_such_module_xyz" if broken else "demo_scorers")
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("FN", "dot"), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(PLUGINS)])}
    code = ("from attngraph.cli import main\nfrom attngraph.kinds import SCORERS\n"
            "import sys\ntry:\n    main(['validate', '-q', sys.argv[1]])\n"
            "except SystemExit:\n    pass\nprint('bilinear_heads' in SCORERS)\n")
    r = subprocess.run([sys.executable, "-c", code, str(spec)], capture_output=True,
                       text=True, env=env, check=False, timeout=120)
    assert "Traceback" not in r.stderr
    if broken:
        assert "warning: plugin 'demo' (no_such_module_xyz) failed to load" in r.stderr
        assert r.stdout.strip().endswith("False")
    else:
        assert r.stdout.strip().endswith("True"), r.stderr
