"""Passes and pipelines: a pass is a small frozen object with a name; a pipeline is data.

A :class:`Pass` names a function from graph to graph and the invariants it
establishes. A :class:`Pipeline` runs its passes in order, verifies the graph
after each (:func:`attngraph.ir.verify.verify`, then the pass's own ``check``),
and can print the IR after any pass by name, which is what
``attngraph compile --print-after fuse_attention`` does. Passes are entries of the
:data:`PASSES` registry.

Examples
--------
>>> from attngraph.passes import FRONT, OPTIMIZE
>>> [p.name for p in FRONT.passes + OPTIMIZE.passes]
['infer_shapes', 'fuse_attention', 'linear_attention', 'hoist_invariants']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from attngraph.ir.graph import Graph
from attngraph.ir.verify import verify
from attngraph.registry import Registry

__all__ = ["Pass", "Pipeline", "PASSES"]


def _no_check(graph: Graph) -> None:
    """A pass that promises nothing beyond :func:`verify`."""


@dataclass(frozen=True)
class Pass:
    """One rewrite of the IR: ``run(graph)`` returns the rewritten graph (the same
    object when nothing changed); ``check(graph)`` raises when the invariants the
    pass establishes do not hold afterwards."""

    name: str
    run: Callable[[Graph], Graph]
    check: Callable[[Graph], None] = _no_check
    #: it changes how what one forward holds grows with the sizes (a kernel attention
    #: chain becomes linear-time): the resource guard measures a graph after the
    #: optimising passes that say so (:func:`attngraph.passes.as_run`)
    resizes: bool = False

    def register(self) -> Pass:
        """Add this pass to :data:`PASSES` under its name; returns it."""
        PASSES.register(self.name, self)
        return self


#: Every pass by name.
PASSES: Registry[Pass] = Registry("pass")


@dataclass(frozen=True)
class Pipeline:
    """Passes run in order; ``print_after`` names the passes whose output is printed."""

    passes: tuple[Pass, ...]
    print_after: frozenset[str] = frozenset()
    printer: Callable[[str], None] = field(default=print, compare=False, repr=False)

    def with_print_after(self, names: tuple[str, ...] | list[str],
                         printer: Callable[[str], None] = print) -> Pipeline:
        """The same pipeline printing the IR after each named pass.

        Raises
        ------
        RegistryError
            For a name that is not a pass of this pipeline (with a did-you-mean).
        """
        own: Registry[Pass] = Registry("pass of this pipeline")
        for p in self.passes:
            own.register(p.name, p)
        for n in names:
            own[n]  # noqa: B018 - fails with the known names for an unknown one
        return Pipeline(self.passes, frozenset(names), printer)

    def __call__(self, graph: Graph) -> Graph:
        for p in self.passes:
            graph = p.run(graph)
            verify(graph)
            p.check(graph)
            if p.name in self.print_after:
                self.printer(f"// IR after {p.name}\n{graph}")
        return graph
