"""Lowering: ``compile(spec) -> nn.Module`` (imports torch).

The rules for each kind live in the modules of this package and register
themselves with :func:`attngraph.kinds.registry.lowering_rule`; see
:mod:`attngraph.lower.module` for the rule interface.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from attngraph.ir.graph import Graph

__all__ = ["compile", "load_rules"]

#: Modules holding lowering rules; optional ones may be absent.
_RULES = ("attention", "support", "rnn", "structure")
_OPTIONAL_RULES = ("hard", "memory", "glimpse")


def load_rules() -> None:
    """Import every module of lowering rules (idempotent)."""
    for name in _RULES:
        importlib.import_module(f"attngraph.lower.{name}")
    for name in _OPTIONAL_RULES:
        try:
            importlib.import_module(f"attngraph.lower.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"attngraph.lower.{name}":
                raise


def _graph(spec: Any, allow_large: bool) -> Graph:
    from attngraph.pipeline import load_spec, loads_spec

    if isinstance(spec, Graph):
        return spec
    if isinstance(spec, Path):
        return load_spec(spec, allow_large=allow_large)
    if isinstance(spec, str):
        if "\n" in spec:
            return loads_spec(spec, allow_large=allow_large)
        return load_spec(spec, allow_large=allow_large)
    from attngraph.errors import LoweringError

    msg = f"compile takes a spec path, YAML text or a Graph, not {type(spec).__name__}"
    raise LoweringError(msg)


def compile(  # noqa: A001 - the public name the contract gives
    spec: str | Path | Graph,
    *,
    seed: int | None = None,
    allow_large: bool = False,
    fuse: bool = True,
) -> Any:
    """Lower a spec to a trainable ``torch.nn.Module``.

    Parameters
    ----------
    spec : str, Path or Graph
        A spec file path, YAML text (any string with a newline), or an inferred
        :class:`~attngraph.ir.graph.Graph` from :func:`attngraph.load_spec`.
    seed : int, optional
        Seed of the parameter initialisation; the same seed gives the same
        initial state dict. The global RNG state is left as it was.
    allow_large : bool, optional
        Accept specs over the size limits.
    fuse : bool, optional
        Run the attention fusion pass (scaled-dot scorer -> softmax -> readout
        whose weights are not needed becomes one fused kernel call).

    Returns
    -------
    AttnModel
        ``model(**inputs)`` returns a dict of the declared outputs.

    Raises
    ------
    AttnGraphError
        Located errors from the front end, or a :class:`LoweringError`.
    """
    import torch

    from attngraph.lower.module import AttnModel

    graph = _graph(spec, allow_large)
    if fuse:
        from attngraph.passes.fuse_attention import fuse_attention

        graph = fuse_attention(graph)
    load_rules()
    if seed is None:
        return AttnModel(graph)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AttnModel(graph)
