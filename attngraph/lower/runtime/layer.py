"""One block of a spec as a layer of a bigger model: ``compile(spec, block="layer")``.

A block (``blocks:`` in the spec) is compiled where it is used, by a ``block``,
``map``, ``repeat`` or ``loop`` node, whose shape inference instantiates its body
with typed inputs. :class:`BlockLayer` lowers that body on its own: an ``nn.Module``
whose ``forward`` takes the block's inputs by name (positionally in the block's
order), each ``(B, ...)`` with the type the spec's use gives it, and an optional
padding mask ``<input>_mask`` (B, L), True = a real item, for an input whose first
axis is a symbolic length. It returns the tensor of a block with one output, else a
dict of its outputs by name. A loop's body is one step (carries and feeds in, the
next values out), so a loop's block is a recurrent cell.

>>> import attngraph
>>> layer = attngraph.compile("specs/transformer_encoder.yaml", block="layer", seed=0)
>>> list(layer.inputs)
['h']
>>> import torch
>>> layer(torch.randn(2, 5, 32)).shape
torch.Size([2, 5, 32])
"""

from __future__ import annotations

import inspect
from typing import Any, NoReturn

import torch
from torch import Tensor, nn

from attngraph.errors import LoweringError
from attngraph.ir.graph import Graph, Node, TensorType
from attngraph.lower.runtime.module import GraphModule, Runtime

__all__ = ["BlockLayer", "block_body"]

_DTYPES = {"float": "a float tensor", "long": "an integer (long) tensor",
           "bool": "a bool tensor"}


def block_body(graph: Graph, block: str) -> tuple[Node[Any], Graph]:
    """The first node (in the spec's order, nested bodies included) that uses ``block``,
    and its instantiated body.

    Raises
    ------
    LoweringError
        When no node uses a block of that name (the hint lists those used).
    """
    used: dict[str, tuple[Node[Any], Graph]] = {}
    for _, node in graph.walk():
        name = getattr(node.spec, "block", None) or getattr(node.spec, "body", None)
        if isinstance(name, str) and node.body is not None:
            used.setdefault(name, (node, node.body))
    if block not in used:
        known = ", ".join(sorted(used)) or "none"
        msg = f"{graph.name}: no node uses a block named '{block}'"
        raise LoweringError(msg, None, f"blocks used in this spec: {known}")
    return used[block]


def _shape(t: TensorType) -> str:
    """The expected shape of a value of type ``t``: ``(B, N, 32)``."""
    dims = ["B"] + ([str(t.heads)] if t.heads else []) + [str(d) for d in t.dims]
    return "(" + ", ".join(dims) + ")"


class BlockLayer(nn.Module):
    """One block of a spec, lowered alone (see the module doc).

    Parameters
    ----------
    graph : Graph
        The inferred (and optimised) graph of the spec.
    block : str
        The block's name in the spec's ``blocks:``.
    """

    def __init__(self, graph: Graph, block: str) -> None:
        super().__init__()
        node, body = block_body(graph, block)
        self.block = block
        self.body = GraphModule(body)
        #: the block's inputs by name, with their types (without the batch axis)
        self.inputs: dict[str, TensorType] = {n.id: n.types[""] for n in body.inputs}
        self.single = [name for name, _ in body.outputs] == [""]
        self._where = node.loc
        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for n in self.inputs if n.isidentifier()]
        params += [inspect.Parameter(f"{n}_mask", inspect.Parameter.KEYWORD_ONLY, default=None)
                   for n, t in self.inputs.items()
                   if n.isidentifier() and t.dims and isinstance(t.dims[0], str)]
        self.__signature__ = inspect.Signature(params)

    def extra_repr(self) -> str:
        return f"block={self.block!r}, inputs={list(self.inputs)}"

    def _refuse(self, msg: str, hint: str) -> NoReturn:
        """Raise the error of a wrong input, at the node that uses the block."""
        text = f"block '{self.block}': {msg}"
        raise LoweringError(text, self._where, hint)

    def _check(self, name: str, v: Any) -> Tensor:
        """``v`` as input ``name``: a tensor of the input's rank, dtype and fixed sizes."""
        t = self.inputs[name]
        want = _shape(t)
        if not isinstance(v, Tensor):
            self._refuse(f"input '{name}' is a {type(v).__name__}, not a tensor",
                             f"pass a tensor of shape {want}")
        rank = 1 + (1 if t.heads else 0) + len(t.dims)
        sizes: list[int | str] = [t.heads] if t.heads else []
        sizes += list(t.dims)
        bad = v.dim() != rank or any(isinstance(d, int) and v.shape[i + 1] != d
                                     for i, d in enumerate(sizes))
        if bad:
            self._refuse(f"input '{name}' has shape {tuple(v.shape)}, expected {want}",
                             "the batch axis first, then the sizes the spec gives the block's "
                             "input where it is used")
        if (t.dtype == "float") != v.is_floating_point() or \
                (t.dtype == "bool") != (v.dtype == torch.bool):
            self._refuse(f"input '{name}' is {v.dtype}, expected {_DTYPES[t.dtype]}",
                             f"convert it, e.g. {name}.float()" if t.dtype == "float"
                             else f"convert it, e.g. {name}.{t.dtype}()")
        return v

    def forward(self, *args: Tensor, **kwargs: Tensor | None) -> Tensor | dict[str, Tensor]:
        names = list(self.inputs)
        if len(args) > len(names):
            self._refuse(f"forward got {len(args)} positional inputs, the block takes "
                             f"{len(names)}: {', '.join(names)}", "pass them by name")
        given: dict[str, Any] = dict(zip(names, args, strict=False))
        masks: dict[str, Tensor] = {}
        for key, v in kwargs.items():
            if key.endswith("_mask") and key[:-5] in self.inputs and v is not None:
                masks[key[:-5]] = v
            elif key in self.inputs:
                if key in given:
                    self._refuse(f"input '{key}' given twice", "pass each input once")
                given[key] = v
            elif v is not None:
                self._refuse(f"unknown input '{key}'",
                                 f"the block's inputs: {', '.join(names)}")
        missing = [n for n in names if given.get(n) is None]
        if missing:
            self._refuse(f"missing input {', '.join(repr(m) for m in missing)}",
                             f"the block takes {', '.join(names)}")
        vals = {n: self._check(n, given[n]) for n in names}
        first = vals[names[0]]
        floats = [v for v in vals.values() if v.is_floating_point()]
        rt = Runtime(batch=first.shape[0], device=first.device,  # (not int(): a symbol)
                     dtype=floats[0].dtype if floats else torch.get_default_dtype())
        for name in names:  # the size of each length in this batch
            for i, d in enumerate(self.inputs[name].dims):
                if isinstance(d, str) and 1 + i < vals[name].dim():
                    rt.sizes.setdefault(d, vals[name].shape[1 + i])
        for name, m in masks.items():
            t = self.inputs[name]
            if not (t.dims and isinstance(t.dims[0], str)):
                self._refuse(f"input '{name}' has no length to mask",
                                 "masks go with inputs whose first axis is a length")
            if m.dtype != torch.bool or tuple(m.shape) != tuple(vals[name].shape[:2]):
                self._refuse(f"{name}_mask is {m.dtype} {tuple(m.shape)}, expected a bool "
                                 f"tensor {tuple(vals[name].shape[:2])}",
                                 "True marks a real item, False padding after them")
            rt.masks[str(t.dims[0])] = m
        out = self.body.run(vals, rt)
        return out[""] if self.single else out
