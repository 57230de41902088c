"""Lowering: ``compile(spec) -> nn.Module`` (imports torch).

Each kind's lowering is named by its :class:`~attngraph.kinds.base.Kind` and lives
in the module of this package with its family's name (``attention``, ``scorers``,
``hard``, ``glimpse``, ``memory``, ``rnn``, ``structure``, ``support``);
:mod:`attngraph.lower.module` holds the rule interface and the module that walks
the schedule, ``inputs`` the binding and checking of forward's arguments, ``names``
the dict of node modules keyed by id; ``masks``, ``banded`` and ``normalisers`` the
shared numerics. ``codegen`` writes ``model.code``, the model as a standalone PyTorch
file: the package ``emit`` holds each kind's rule that writes its nodes as plain torch
and the writer of the file; a node without one is copied (``codegen_bundle`` and
``codegen_source`` copy its lowering code, ``codegen_values`` the literal arguments of
its modules, ``codegen_body`` the bodies inside it), ``codegen_text`` does the layout.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.ir.graph import Graph

if TYPE_CHECKING:
    from attngraph.passes import Pipeline

__all__ = ["compile"]

def _graph(spec: Any, allow_large: bool) -> Graph:
    from attngraph.frontend import load_spec, loads_spec

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
    optimize: Pipeline | None = None,
    block: str | None = None,
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
        Run the optimising passes (the attention fusion: scaled-dot scorer ->
        softmax -> readout whose weights are not needed becomes one fused kernel
        call).
    optimize : Pipeline, optional
        Those passes (default :data:`attngraph.passes.OPTIMIZE`), e.g. one that
        prints the IR after a pass.
    block : str, optional
        Compile only this block of the spec (its ``blocks:`` name), typed as the
        spec uses it: a :class:`~attngraph.lower.layer.BlockLayer` to use as a layer
        of a bigger model.

    Returns
    -------
    AttnModel
        ``model(**inputs)`` returns a dict of the declared outputs (with ``block``,
        a ``BlockLayer``: the block's output, or a dict of its outputs).

    Raises
    ------
    AttnGraphError
        Located errors from the front end, or a :class:`LoweringError`.
    """
    import torch

    from attngraph.lower.module import AttnModel

    graph = _graph(spec, allow_large)
    if fuse:
        from attngraph.passes import OPTIMIZE

        graph = (optimize or OPTIMIZE)(graph)

    def build() -> Any:
        if block is None:
            return AttnModel(graph)
        from attngraph.lower.layer import BlockLayer

        return BlockLayer(graph, block)

    if seed is None:
        return build()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()
