"""attngraph.lower has four rooms, and the flat paths of earlier versions still import.

A plugin written against ``attngraph.lower.module`` or naming its lowering
``"attngraph.lower.scorers:Dot"`` keeps working: the old name is the moved module
itself (the same classes, so ``isinstance`` and registries agree), with a
``DeprecationWarning`` that says where it lives now.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from attngraph.lower.moved import MOVED  # noqa: E402
from attngraph.registry import resolve  # noqa: E402

LOWER = Path(__file__).resolve().parents[1] / "attngraph" / "lower"
ROOMS = {"runtime", "rules", "decode", "export"}


def test_the_package_holds_its_rooms_and_nothing_loose() -> None:
    loose = {p.name for p in LOWER.glob("*.py")} - {"__init__.py", "moved.py"}
    rooms = {p.name for p in LOWER.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert loose == set()
    assert rooms == ROOMS
    for room in ROOMS:
        doc = importlib.import_module(f"attngraph.lower.{room}").__doc__
        assert doc and len(doc.splitlines()) > 3, room  # its docstring is its map


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_moved_module(old: str) -> None:
    new = importlib.import_module(f"attngraph.lower.{MOVED[old]}")
    with pytest.warns(DeprecationWarning, match=rf"attngraph\.lower\.{MOVED[old]}\b"):
        sys.modules.pop(f"attngraph.lower.{old}", None)
        was = importlib.import_module(f"attngraph.lower.{old}")
    assert was is new


def test_a_module_under_an_old_package_is_not_loaded_twice() -> None:
    import attngraph.lower.export.emit.writer as now

    sys.modules.pop("attngraph.lower.emit.writer", None)
    with pytest.warns(DeprecationWarning):
        was = importlib.import_module("attngraph.lower.emit.writer")
    assert was is now


def test_a_lowering_named_by_its_old_path_resolves_to_the_same_class() -> None:
    from attngraph.lower.rules.scorers import Dot

    with pytest.warns(DeprecationWarning):
        sys.modules.pop("attngraph.lower.scorers", None)
        assert resolve("attngraph.lower.scorers:Dot") is Dot


def test_the_public_names_of_the_old_export_module_import_from_the_package() -> None:
    from attngraph.lower.export import export_onnx, export_program
    from attngraph.lower.export.programs import export_onnx as onnx
    from attngraph.lower.export.programs import export_program as program

    assert (export_onnx, export_program) == (onnx, program)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        importlib.import_module("attngraph.lower.export").nothing  # noqa: B018


def test_an_old_import_works_in_a_fresh_interpreter() -> None:
    """As a plugin file would do it, before anything imported attngraph.lower."""
    code = ("import warnings; warnings.simplefilter('error')\n"
            "try:\n    from attngraph.lower.module import NodeModule\n"
            "except DeprecationWarning as w:\n    print('warned:', w)\n"
            "warnings.simplefilter('ignore')\n"
            "from attngraph.lower.module import NodeModule, Runtime\n"
            "from attngraph.lower.runtime import NodeModule as N, Runtime as R\n"
            "print(NodeModule is N and Runtime is R)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.splitlines() == ["warned: attngraph.lower.module is now "
                                "attngraph.lower.runtime.module; import it from there", "True"]
