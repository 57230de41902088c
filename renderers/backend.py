"""The one module that runs Graphviz's ``dot`` program (svg, png, pdf).

The DOT text comes from the ``graphviz`` package (:mod:`renderers.dot`); it is laid
out here with :mod:`subprocess` rather than ``graphviz.pipe``, because that has no
time limit, and a layout that runs away must end in a clean error.
"""

from __future__ import annotations

import shutil
import subprocess

from attngraph.errors import RenderError

__all__ = ["run_dot", "have_dot", "BINARY_FORMATS", "INSTALL_HINT"]

BINARY_FORMATS = ("svg", "png", "pdf")
INSTALL_HINT = ("install Graphviz (apt install graphviz, brew install graphviz or "
                "conda install graphviz), or use --format dot, mermaid or json")


def have_dot() -> bool:
    """True when the ``dot`` program is on the PATH."""
    return shutil.which("dot") is not None


def run_dot(source: str, fmt: str, *, timeout: float = 60.0) -> bytes:
    """Lay out DOT ``source`` and return the ``fmt`` (svg/png/pdf) bytes.

    Raises
    ------
    RenderError
        When ``dot`` is missing or fails.
    """
    if fmt not in BINARY_FORMATS:
        msg = f"dot cannot make '{fmt}' here; choose one of {', '.join(BINARY_FORMATS)}"
        raise RenderError(msg)
    exe = shutil.which("dot")
    if exe is None:
        msg = f"the 'dot' program is needed for {fmt} output but was not found"
        raise RenderError(msg, hint=INSTALL_HINT)
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=source.encode("utf-8"),
                              capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        msg = f"running dot failed: {exc}"
        raise RenderError(msg) from None
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        msg = "dot failed: " + (err[0] if err else f"exit status {proc.returncode}")
        raise RenderError(msg)
    return proc.stdout
