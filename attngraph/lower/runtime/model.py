"""The compiled model: :class:`AttnModel`, a lowered graph whose ``forward`` takes the
spec's inputs by name."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from torch import Tensor, nn

from attngraph.errors import LoweringError
from attngraph.ir.graph import Graph
from attngraph.lower.runtime.graph import GraphModule
from attngraph.lower.runtime.node import Runtime, input_sizes
from attngraph.lower.runtime.rows import plan_rows
from attngraph.lower.runtime.stacked import _run_linear_group

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["AttnModel"]


class AttnModel(GraphModule):
    """The module :func:`attngraph.compile` returns: ``model(**inputs) -> outputs``.

    ``forward`` has a real signature: the spec's inputs by name, in the spec's order
    (a graph input's adjacency after it), then each optional ``<input>_mask``
    (default None). So ``model(tokens)`` works positionally, ``inspect.signature``
    shows the names, and ``torch.jit.trace``/``torch.export`` (dynamic shapes keyed
    by input name) bind their example inputs to them. Each model gets its own
    ``forward`` function carrying that signature; pickling, copies and replicas
    rebuild it.
    """

    def __init__(self, graph: Graph) -> None:
        from attngraph.lower.runtime.inputs import InputBinder

        super().__init__(graph)
        self.graph = graph
        self.input_specs: Mapping[str, Any] = {n.id: n.spec for n in graph.inputs}
        self.input_types = {n.id: dict(n.types) for n in graph.inputs}
        self.binder = InputBinder(graph)
        self.rows_plan = plan_rows(self, graph)
        self.aux: dict[str, Tensor] = {}
        # the path to the first parameter (else buffer), so that forward finds it
        # without walking every module; a path, not the module, so that copies and
        # replicas of the model read their own
        self._ref = _first_tensor(self)
        self._install_forward()

    def _install_forward(self) -> None:
        """Give this model a ``forward`` with the signature of its inputs."""
        sig = self.binder.signature()
        if sig is None:  # an input name Python cannot take: keywords only
            self.__dict__.pop("forward", None)
            self._positional: tuple[str, ...] = ()
            return
        self._positional = tuple(sig.parameters)
        model = self

        def forward(*args: Tensor | None, **inputs: Tensor | None) -> dict[str, Tensor]:
            return AttnModel.forward(model, *args, **inputs)

        forward.__signature__ = sig  # type: ignore[attr-defined]
        forward.__name__ = forward.__qualname__ = "forward"
        forward.__doc__ = (f"Run {self.graph.name}: "
                           + ", ".join(sig.parameters) + " -> a dict of its outputs.")
        self.__dict__["forward"] = forward

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("forward", None)  # rebuilt for the copy (it names its model)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._install_forward()

    def _replicate_for_data_parallel(self) -> AttnModel:
        replica = super()._replicate_for_data_parallel()
        replica._install_forward()
        return replica

    @property
    def code(self) -> str:
        """The source of a standalone PyTorch file that computes what this model does:
        one class per concept the spec uses and a straight-line ``forward``, importing
        torch only; its parameters take this model's state dict (see
        :mod:`attngraph.lower.export.codegen`; ``attngraph export --format python`` writes it)."""
        from attngraph.lower.export.codegen import python_source

        return python_source(self, runtime=Runtime, linear_group=_run_linear_group)

    def _positional_inputs(self, args: tuple[Tensor | None, ...],
                           inputs: dict[str, Tensor | None]) -> dict[str, Tensor | None]:
        """The positional arguments by name (the signature's order), with the others."""
        names = self._positional
        if len(args) > len(names):
            takes = f"takes {len(names)}: {', '.join(names)}" if names else \
                "takes its inputs by name only"
            msg = f"forward got {len(args)} positional arguments, but {self.graph.name} {takes}"
            raise LoweringError(msg, None, "pass the inputs by name: model(name=tensor, ...)")
        out = dict(inputs)
        for name, value in zip(names, args, strict=False):
            if name in out:
                msg = f"forward got input '{name}' twice, by position and by name"
                raise LoweringError(msg, None, "pass each input once")
            out[name] = value
        return out

    def _reference(self) -> Tensor | None:
        """A parameter (else a buffer): the dtype and device the model computes in;
        None for a model compiled without any (not looked for again at every call)."""
        if self._ref is None:
            return None
        if self._ref is not None:
            path, name = self._ref
            mod: nn.Module | None = self
            for part in path:
                mod = mod._modules.get(part) if mod is not None else None
            t = getattr(mod, name, None)
            if isinstance(t, Tensor):
                return t
        return next(itertools.chain(self.parameters(), self.buffers()), None)

    def _bind(self, kwargs: dict[str, Tensor]) -> tuple[dict[str, Tensor], Runtime]:
        """Checked input values and the runtime state (masks, batch, dtype, device)."""
        ref = self._reference()
        vals, masks, batch = self.binder.bind(kwargs, ref)
        rt = Runtime(masks=masks, batch=batch, sizes=input_sizes(self.binder.args, vals))
        floats = [v for v in vals.values() if v.is_floating_point()]
        if floats:
            rt.dtype = floats[0].dtype
        elif ref is not None:
            rt.dtype = ref.dtype
        if vals:
            rt.device = next(iter(vals.values())).device
        elif ref is not None:
            rt.device = ref.device
        return vals, rt

    def forward(self, *args: Tensor | None, **inputs: Tensor | None) -> dict[str, Tensor]:  # type: ignore[override]
        if args:
            inputs = self._positional_inputs(args, inputs)
        given = {k: v for k, v in inputs.items() if v is not None}
        vals, rt = self._bind(given)  # type: ignore[arg-type]
        out = self.run(vals, rt)
        if rt.aux or rt.steps:
            self.aux = rt.finish()
        return out


def _first_tensor(model: nn.Module) -> tuple[tuple[str, ...], str] | None:
    """The module path (keys of ``_modules``) and attribute name of the first
    parameter, else of the first buffer."""
    for table in ("_parameters", "_buffers"):
        for qual, mod in model.named_modules():
            for name, t in getattr(mod, table).items():
                if t is not None:
                    return (tuple(qual.split(".")) if qual else ()), name
    return None
