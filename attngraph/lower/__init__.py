"""Lowering: ``compile(spec) -> nn.Module`` (imports torch).

Four rooms:

- :mod:`~attngraph.lower.runtime`: the compiled model, the interface of a kind's
  lowering (``NodeModule``, ``Runtime``), the binding of forward's arguments and the
  values a forward shares;
- :mod:`~attngraph.lower.rules`: each kind's lowering, in the module of its family,
  and the numerics they share (masks, the masked softmax, banded attention);
- :mod:`~attngraph.lower.decode`: greedy and beam generation, the key/value cache;
- :mod:`~attngraph.lower.export`: ``torch.export`` programs, ONNX, and the model as a
  plain PyTorch file (``model.code``, one emit rule per kind).

The flat modules of earlier versions (``attngraph.lower.module``,
``attngraph.lower.scorers``...) still import, as the moved ones
(:mod:`attngraph.lower.moved`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import LoweringError, flag_problem, whole
from attngraph.ir.graph import Graph
from attngraph.lower.moved import install as install_moved

if TYPE_CHECKING:
    from attngraph.passes import Pipeline

__all__ = ["compile"]

install_moved()

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
    msg = f"compile takes a spec path, YAML text or a Graph, not {type(spec).__name__}"
    raise LoweringError(msg, None, "give the spec file's path, e.g. compile('specs/x.yaml'), "
                        "its YAML text, or a Graph that load_spec returned")


def _check_options(seed: object, allow_large: object, fuse: object, block: object) -> None:
    """Refuse an option of the wrong kind, naming it (what the command line's option
    types refuse; a call from Python passes anything)."""
    if seed is not None and not (whole(seed, 0) and seed < 2**63):
        msg = f"compile: seed must be a whole number from 0 to 2**63 - 1, not {seed!r:.40}"
        raise LoweringError(msg, None, "pass seed=0, or leave it out (torch's own stream)")
    bad = flag_problem(allow_large=allow_large, fuse=fuse)
    if bad is not None:
        msg = f"compile: {bad[1]}"
        raise LoweringError(msg, None, f"pass {bad[0]}=True or False")
    if block is not None and not isinstance(block, str):
        msg = f"compile: block names a block of the spec, not {block!r:.40}"
        raise LoweringError(msg, None, "pass block='<a name under blocks:>', or leave it out")


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
        spec uses it: a :class:`~attngraph.lower.runtime.layer.BlockLayer` to use as a layer
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
    _check_options(seed, allow_large, fuse, block)
    graph = _graph(spec, allow_large)
    if fuse:
        from attngraph.passes import OPTIMIZE

        graph = (optimize or OPTIMIZE)(graph)
    if seed is None:
        return _build(graph, block)
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return _build(graph, block)


def _build(graph: Graph, block: str | None) -> Any:
    """The model of ``graph``, or of its block ``block`` as a layer."""
    if block is None:
        from attngraph.lower.runtime.module import AttnModel

        return AttnModel(graph)
    from attngraph.lower.runtime.layer import BlockLayer

    return BlockLayer(graph, block)
