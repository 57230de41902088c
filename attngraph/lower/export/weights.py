"""A run's exported Python file with its weights beside it: the code that loads them
(:mod:`attngraph.lower.export.codegen_loader`) and the safetensors bytes, read back before
they are returned. Apart from the generator, which the loader's template is part of."""

from __future__ import annotations

from typing import Any

from attngraph.errors import LoweringError, SourceLoc
from attngraph.lower.export.codegen_loader import weights_bytes

__all__ = ["with_weights"]


def with_weights(model: Any, weights: str) -> tuple[str, bytes]:
    """The file of ``model`` that loads its weights from ``weights`` beside it, and
    those weights (safetensors, read back before they are returned).

    Raises
    ------
    LoweringError
        What ``model.code`` raises; weights that do not read back (attngraph's bug).
    """
    try:
        from safetensors.torch import load
    except ImportError:
        msg = "exporting the weights beside the Python file needs the 'safetensors' package"
        raise LoweringError(msg, None, "pip install safetensors") from None

    from attngraph.lower.export.codegen import python_source
    from attngraph.lower.runtime.module import Runtime, _run_linear_group

    code = python_source(model, runtime=Runtime, linear_group=_run_linear_group,
                         weights=weights)
    state = model.state_dict()
    data = weights_bytes(state)
    try:
        back = load(data)
        same = set(back) == set(state) and all(back[k].equal(v.cpu()) for k, v in state.items())
    except Exception as exc:  # noqa: BLE001 - safetensors' reader: said as our bug
        same, why = False, str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    else:
        why = "its tensors are not the state dict's"
    if not same:
        graph = model.graph
        msg = f"{graph.name}: the exported weights do not load back: {why}"
        raise LoweringError(msg, SourceLoc(graph.file), "this is a bug in attngraph's "
                            "export: report it with the spec")
    return code, data
