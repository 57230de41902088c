"""The modules of this package before it had rooms, still importable by their old paths.

Until 0.x the lowering was one flat package (``attngraph.lower.module``,
``attngraph.lower.scorers``...). Plugins and scripts name those paths, in imports and
in a kind's ``lowering="module:attribute"``; :data:`MOVED` maps each old module to
where it lives now, and :class:`MovedFinder` (installed by :mod:`attngraph.lower`)
makes the old name import the new module itself, the same object, with a
``DeprecationWarning`` that names the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "MovedFinder", "install"]

#: Old module (under ``attngraph.lower``) -> its path now. ``attngraph.lower.export``
#: is a package now whose public names are the old module's.
MOVED: dict[str, str] = {
    "module": "runtime.module",
    "inputs": "runtime.inputs",
    "names": "runtime.names",
    "memo": "runtime.memo",
    "layer": "runtime.layer",
    "examples": "runtime.examples",
    "activations": "rules.activations",
    "algebra": "rules.algebra",
    "algebra_take": "rules.algebra_take",
    "attention": "rules.attention",
    "banded": "rules.banded",
    "conv": "rules.conv",
    "glimpse": "rules.glimpse",
    "hard": "rules.hard",
    "indexing": "rules.indexing",
    "latent": "rules.latent",
    "masks": "rules.masks",
    "memory": "rules.memory",
    "normalisers": "rules.normalisers",
    "relative": "rules.relative",
    "rnn": "rules.rnn",
    "scan": "rules.scan",
    "scorers": "rules.scorers",
    "structure": "rules.structure",
    "support": "rules.support",
    "window": "rules.window",
    "generate": "decode.generate",
    "decoders": "decode.decoders",
    "cache": "decode.cache",
    "cached": "decode.cached",
    "export_inputs": "export.inputs",
    "export_weights": "export.weights",
    "onnx_errors": "export.onnx_errors",
    "onnx_fixes": "export.onnx_fixes",
    "emit": "export.emit",
    "codegen": "export.codegen",
    "codegen_body": "export.codegen_body",
    "codegen_bundle": "export.codegen_bundle",
    "codegen_loader": "export.codegen_loader",
    "codegen_source": "export.codegen_source",
    "codegen_text": "export.codegen_text",
    "codegen_values": "export.codegen_values",
}

_PREFIX = "attngraph.lower."


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``attngraph.lower.<old>`` (and what lies under it) as the moved module."""

    def find_spec(self, fullname: str, path: object, target: object = None,
                  ) -> importlib.machinery.ModuleSpec | None:
        new = self._new(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = self._new(spec.name)
        assert new is not None
        warnings.warn(f"{spec.name} is now {new}; import it from there",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the moved one, already imported."""

    @staticmethod
    def _new(fullname: str) -> str | None:
        if not fullname.startswith(_PREFIX):
            return None
        old, _, rest = fullname[len(_PREFIX):].partition(".")
        new = MOVED.get(old)
        if new is None:
            return None
        return _PREFIX + new + ("." + rest if rest else "")


def install() -> None:
    """Put the finder first on ``sys.meta_path``, once (first: under an old package
    name such as ``attngraph.lower.emit``, the path finder would load a second copy
    of a module from the moved package's folder)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
