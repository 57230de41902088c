"""Shared fixtures, and skips for tests whose tool (``dot``, CUDA) is absent."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def spec_file(tmp_path: Path) -> Callable[..., Path]:
    """Write text to a YAML file under ``tmp_path`` and return its path.

    Call as ``spec_file(text)`` or ``spec_file(text, name="other.yaml")``.
    """

    def write(text: str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture(scope="session")
def trained_metrics(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path, int], dict]:
    """``trained_metrics(path, seed)``: the test metrics of the spec file ``path``
    trained with its own train section at ``seed`` on one torch thread, trained once
    per test session.

    The catalog tests train the same specs at the same seeds (seed 0 of every spec
    is checked by tests/test_catalog.py and again by tests/test_catalog_seeds.py);
    the figures are kept in a file keyed by the spec's text and the seed, in the
    session's temporary folder that every pytest-xdist worker shares, behind a file
    lock, so a second test (on any worker) reads them instead of training again.
    """
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    # under xdist each worker has its own basetemp inside the session's one
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "trained"
    folder.mkdir(exist_ok=True)

    def get(path: Path, seed: int = 0) -> dict:
        text = Path(path).read_bytes()
        key = f"{Path(path).stem}-{seed}-{hashlib.sha256(text).hexdigest()[:16]}"
        done = folder / f"{key}.json"
        with FileLock(str(folder / f"{key}.lock")):
            if done.is_file():
                return dict(json.loads(done.read_text(encoding="utf-8")))
            import torch

            from attngraph.frontend import load_spec
            from attngraph.train.engine.loop import train

            before = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                metrics = train(load_spec(path), seed=seed).metrics
            finally:
                torch.set_num_threads(before)
            done.write_text(json.dumps(metrics), encoding="utf-8")
            return metrics

    return get


@pytest.fixture(scope="session")
def shared_exports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder where ``export_support.exported`` keeps the session's pt2 and ONNX
    files, in the session's temporary folder that every pytest-xdist worker shares (as
    ``trained_metrics`` does): the export tests of three files check each catalog spec's
    files, on whichever worker each test runs."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "exported"
    folder.mkdir(exist_ok=True)
    import export_support  # tests/ is on sys.path; it imports torch, hence here

    export_support.SHARED = folder
    return folder


@pytest.fixture(scope="session")
def cli() -> Callable[..., Any]:
    """``cli(*args, input=None, code=None, **kw)``: attngraph's command line run in this
    process (click's ``CliRunner``), returning click's ``Result``.

    Arguments may be paths or numbers (each is passed as ``str``); ``code=N`` asserts
    the command exited with status N, showing its output (and the traceback of an
    exception it raised) if not; other keywords (``env``, ``catch_exceptions``) go to
    ``CliRunner.invoke``. Session-wide, so module fixtures may run commands too.
    """
    from click.testing import CliRunner, Result

    from attngraph.cli import main

    def invoke(*args: object, input: str | bytes | None = None, code: int | None = None,
               **kw: Any) -> Result:
        res = CliRunner().invoke(main, [str(a) for a in args], input=input, **kw)
        if code is not None:
            assert res.exit_code == code, _shown(res)
        return res

    return invoke


def _shown(res: Any) -> str:
    """A failed command's output, with the traceback of an exception it raised."""
    import traceback

    text = res.output
    if res.exc_info is not None and not isinstance(res.exception, SystemExit):
        text += "".join(traceback.format_exception(*res.exc_info))
    return text


@pytest.fixture
def repo_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """``repo_copy(*names)``: ``tmp_path`` made the working folder, seeing each named
    folder of the repository (``"specs"``, ``"examples"``) as it is there (a link), so
    that a doc's commands run as written and the files they write land in the test's
    folder; the old working folder comes back after the test."""
    root = Path(__file__).resolve().parent.parent

    def make(*names: str) -> Path:
        for name in names:
            (tmp_path / name).symlink_to(root / name)
        monkeypatch.chdir(tmp_path)
        return tmp_path

    return make


def pytest_configure(config: pytest.Config) -> None:
    """Under ``pytest -n N`` (pytest-xdist) the workers share the machine's cores: each
    runs torch on one thread (set before torch is imported), so N workers use N cores
    rather than N × cores threads fighting for them."""
    config.addinivalue_line(
        "markers", "seeds: the catalog trained at five seeds (minutes of CPU time); "
        "skipped unless selected with -m, e.g. `pytest -m seeds tests`")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MKL_NUM_THREADS", "1")


def _cuda_available() -> bool:
    """True when torch sees a CUDA device (torch is imported only when asked)."""
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``dot`` tests without Graphviz and ``gpu`` tests without CUDA, saying why,
    and the ``seeds`` tests unless a ``-m`` expression names them."""
    if "seeds" not in (config.getoption("markexpr", "") or ""):
        skip_seeds = pytest.mark.skip(reason="the five-seed catalog training runs with "
                                      "`pytest -m seeds tests` (about 15 CPU minutes)")
        for item in items:
            if item.get_closest_marker("seeds") is not None:
                item.add_marker(skip_seeds)
    if shutil.which("dot") is None:
        skip_dot = pytest.mark.skip(reason="the Graphviz 'dot' program is not installed")
        for item in items:
            if item.get_closest_marker("dot") is not None:
                item.add_marker(skip_dot)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and not _cuda_available():
        skip_gpu = pytest.mark.skip(reason="no CUDA device")
        for item in gpu_items:
            item.add_marker(skip_gpu)
