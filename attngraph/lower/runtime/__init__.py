"""The runtime: a lowered graph as an ``nn.Module`` that walks its schedule.

- :mod:`~attngraph.lower.runtime.module`: the rule interface, where a kind's lowering
  imports it from (every name below re-exported): :mod:`~attngraph.lower.runtime.node`
  :class:`NodeModule` (what a kind's lowering implements) and :class:`Runtime` (what
  one forward shares between its nodes); :mod:`~attngraph.lower.runtime.graph`
  ``LowerCtx``, ``GraphModule`` and ``lower_graph`` (a graph's node modules and the
  walk of its schedule); :mod:`~attngraph.lower.runtime.steps` the schedule's steps;
  :mod:`~attngraph.lower.runtime.model` ``AttnModel``, the compiled model;
  :mod:`~attngraph.lower.runtime.stacked` queries, keys and values of one input as
  one matmul; :mod:`~attngraph.lower.runtime.sharing` shared and tied parameters;
- :mod:`~attngraph.lower.runtime.inputs`: forward's arguments bound to the graph's
  inputs and checked before any node runs;
- :mod:`~attngraph.lower.runtime.memo`: values of the positions alone, made once a
  forward;
- :mod:`~attngraph.lower.runtime.names`: node ids as module keys, user names as
  identifiers of generated code;
- :mod:`~attngraph.lower.runtime.layer`: one block of a spec as a layer of a bigger
  model;
- :mod:`~attngraph.lower.runtime.examples`: random inputs of a graph's declared types.

A plugin's lowering subclasses :class:`NodeModule`; both names are importable from here.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NodeModule", "Runtime"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from attngraph.lower.runtime import module

        return getattr(module, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
