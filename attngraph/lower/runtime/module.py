"""The lowered module: a graph becomes an ``nn.Module`` that walks a schedule.

Rule interface
--------------
A lowering rule turns one IR node into one ``nn.Module``. It is the ``lowering``
of the node's :class:`~attngraph.kinds.base.Kind`: a callable, or a lazy
``"module:attribute"`` reference that is imported the first time a spec with
that kind is compiled (the built-in kinds name a class or function of the module
of their family's name in this package)::

    @kind("policy", PolicySpec, lowering="attngraph.lower.rules.hard:PolicyNode", ...)

What a rule receives: a :class:`LowerCtx` with

- ``ctx.node``: the :class:`~attngraph.ir.graph.Node` (``node.spec`` is its pydantic
  model with sizes resolved to ints, ``node.types`` its inferred port types,
  ``node.body`` the instantiated subgraph of block/repeat/loop);
- ``ctx.graph``: the graph the node lives in (a block body inside a block);
- ``ctx.t(role)`` / ``ctx.has(role)``: the :class:`TensorType` arriving on the
  input edge of a field (``"from"``, ``"query"``, ``"from.0"``, ``"mask.adjacency"``,
  ``"carry.h.init"``...), and whether that edge exists;
- ``ctx.fail(msg, role=None, hint=None)``: raise a located ``LoweringError``;
- ``ctx.lower_graph(graph)``: lower a subgraph to a :class:`GraphModule`.

What a rule returns: an ``nn.Module`` (subclass :class:`NodeModule`) whose

    forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor | dict[str, Tensor]

reads its inputs from ``x``, keyed by edge role exactly as in ``node.inputs``
(``detach`` edges arrive already ``.detach()``-ed), and returns the tensor of the
default port ``""``, or a dict from port name to tensor that covers every port in
``node.types`` (including ``""``). Parameters are attributes of that module, so
they are named ``nodes.<id>.<attr>`` in the state dict (``nodes.@<id>.<attr>`` for
an id that names an attribute of ``nn.ModuleDict``, such as ``keys``: see
:mod:`attngraph.lower.runtime.names`). Initialise them with the ordinary torch initialisers:
:func:`attngraph.lower.compile` seeds the global RNG inside
``torch.random.fork_rng`` when a seed is given. A tensor a rule makes at run time
takes its dtype and device from its inputs, or from ``rt.dtype`` and ``rt.device``
(those of the model's inputs), never torch's defaults, so that ``model.double()``
or ``model.to(device)`` runs.

Runtime tensors carry the batch axis first, then the head axis when
``TensorType.heads`` is set, then ``dims``: a value of type ``[M, N] ×h`` is a
tensor ``(B, h, M, N)``. Sizes of symbolic dims are read off the tensors.

How masks flow: padding masks come from the inputs (``tokens_mask=`` etc., True =
a real item) and are kept in ``rt.masks`` keyed by the symbolic length they mask
(``"N"``). A rule that normalises or pools over an axis whose dim is a symbol
looks the mask up with :func:`attngraph.lower.rules.masks.padding_mask` and applies it
(softmax, policy, readouts); structural masks (causal, window, adjacency) are
built by :func:`attngraph.lower.rules.masks.attention_mask`. ``rt.aux`` collects extra
tensors a node exposes outside its ports (e.g. a policy's surrogate loss), keyed
``"<node id>.<name>"``; the top module keeps the last ones in ``model.aux``.

Forward of the top module: ``model(*inputs)`` or ``model(**inputs)`` with one tensor
per declared input (a graph input ``g`` also takes ``g_adjacency``; tokens/vectors/
graph inputs take an optional ``<name>_mask``), returning a dict of the declared
outputs; the model's ``forward`` carries that signature (see :class:`AttnModel`). The
arguments are checked first (:mod:`attngraph.lower.runtime.inputs`); a ``RuntimeError``
inside a node becomes a ``LoweringError`` naming the node and its YAML line.

Where it lives: :mod:`~attngraph.lower.runtime.node` (:class:`NodeModule`,
:class:`Runtime`), :mod:`~attngraph.lower.runtime.graph` (:class:`LowerCtx`, the
:class:`GraphModule` that walks the schedule), :mod:`~attngraph.lower.runtime.steps`
(the schedule's steps, :class:`Step`, and their order), :mod:`~attngraph.lower.runtime.stacked`
(the stacked projections), :mod:`~attngraph.lower.runtime.sharing` (``share`` and
``tie``) and :mod:`~attngraph.lower.runtime.model` (:class:`AttnModel`); every name is
importable from here, where plugins import it.
"""

from __future__ import annotations

from attngraph.lower.runtime.graph import GraphModule, LowerCtx, lower_graph
from attngraph.lower.runtime.model import AttnModel
from attngraph.lower.runtime.node import NodeModule, Runtime, input_sizes
from attngraph.lower.runtime.stacked import _run_linear_group as _run_linear_group
from attngraph.lower.runtime.steps import Step, StepInput, last_uses

__all__ = ["Runtime", "LowerCtx", "NodeModule", "GraphModule", "AttnModel", "lower_graph",
           "Step", "StepInput", "input_sizes", "last_uses"]
