"""The runtime: a lowered graph as an ``nn.Module`` that walks its schedule.

- :mod:`~attngraph.lower.runtime.module`: :class:`NodeModule` (the interface a kind's
  lowering implements), :class:`Runtime` (what one forward shares between its nodes),
  ``AttnModel`` (the compiled model) and the walk of the schedule;
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
