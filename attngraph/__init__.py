"""attngraph: attention mechanisms as small YAML graphs.

One spec gives located errors (:func:`load_spec`), diagrams (``renderers``), a
trainable PyTorch module (:func:`compile`) and a description of the mechanism.
:func:`fit` trains it on a file, records or a DataFrame and returns the run
(:func:`attngraph.workflow.fit`: ``attngraph train --data`` from Python), and
:func:`finetune` trains a run on (an import of a real model on your records);
:func:`load_run` reloads a trained run to predict on new data; :func:`dataset`
and :func:`save` serve a training loop of one's own (:mod:`attngraph.train.run.ownloop`).
``import attngraph`` does not import torch; :func:`compile`, :func:`fit`,
:func:`finetune`, :func:`save`, :func:`dataset` and :func:`load_run` do.
"""

from __future__ import annotations

from typing import Any

from attngraph.errors import (
    AttnGraphError,
    GraphError,
    LoweringError,
    RenderError,
    ShapeError,
    SpecError,
    TrainingError,
)
from attngraph.frontend import load_spec, loads_spec
from attngraph.ir.graph import Edge, Graph, Node, TensorType

__all__ = [
    "AttnGraphError", "Edge", "Graph", "GraphError", "LoweringError", "Node", "RenderError",
    "ShapeError", "SpecError", "TensorType", "TrainingError", "compile", "dataset", "generate",
    "finetune", "fit", "load_run", "load_spec", "loads_spec", "save",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # compile() lives with the lowering, which imports torch: load it on first use.
    if name == "compile":
        from attngraph.lower import compile as _compile

        return _compile
    if name == "generate":  # (greedy and beam search: attngraph.lower.decode.generate)
        from attngraph.lower.decode.generate import generate as _generate

        return _generate
    if name == "load_run":  # reads a checkpoint with torch: loaded on first use too
        from attngraph.train.trained.reloaded import load_run

        return load_run
    if name in ("fit", "finetune"):  # trains with torch: loaded on first use
        from attngraph import workflow

        return getattr(workflow, name)
    if name in ("save", "dataset"):  # a training loop of one's own
        from attngraph.train.run import ownloop

        return getattr(ownloop, name)
    msg = f"module 'attngraph' has no attribute {name!r}"
    raise AttributeError(msg)
