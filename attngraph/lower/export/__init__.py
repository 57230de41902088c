"""A compiled model written out: ``torch.export`` programs, ONNX and plain Python.

- :mod:`~attngraph.lower.export.programs`: :func:`export_program`,
  :func:`export_onnx`, :func:`export_file`, :func:`export_files`,
  :func:`export_text` (importable from here); ``inputs`` lists what an exported
  program takes (the padding masks included), ``weights`` writes a run's Python file
  with its weights beside it, ``onnx_errors`` and ``onnx_fixes`` say and work around
  torch's ONNX exporter's failures;
- ``model.code`` and ``--format python``: :mod:`~attngraph.lower.export.codegen`
  writes the model as a standalone PyTorch file. The package
  :mod:`~attngraph.lower.export.emit` holds each kind's rule that writes its nodes as
  plain torch and the writer of the file; a node without one is copied
  (``codegen_bundle``, ``codegen_defs`` and ``codegen_source`` copy its lowering code,
  ``codegen_values`` the literal arguments of its modules, ``codegen_body`` the
  bodies inside it); ``codegen_text`` does the layout, ``codegen_loader`` the loader
  of a file with its weights.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FORMATS", "export_file", "export_files", "export_onnx", "export_program",
           "export_text"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from attngraph.lower.export import programs

        return getattr(programs, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
