"""Shared fixtures, and skips for tests whose tool (``dot``, CUDA) is absent."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

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


def pytest_configure(config: pytest.Config) -> None:
    """Under ``pytest -n N`` (pytest-xdist) the workers share the machine's cores: each
    runs torch on one thread (set before torch is imported), so N workers use N cores
    rather than N × cores threads fighting for them."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        os.environ.setdefault("MKL_NUM_THREADS", "1")


def _cuda_available() -> bool:
    """True when torch sees a CUDA device (torch is imported only when asked)."""
    import torch

    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``dot`` tests without Graphviz and ``gpu`` tests without CUDA, saying why."""
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
