"""A lowered graph: each node lowered by its kind's rule (:class:`LowerCtx`), and the
:class:`GraphModule` that runs them in their schedule."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attngraph.errors import AttnGraphError, LoweringError
from attngraph.ir.graph import Graph, Node
from attngraph.kinds import KINDS
from attngraph.kinds.base import NodeCtx, traits_of
from attngraph.kinds.hooks import (
    call_hook,
    hook_name,
    instance_of,
    is_builtin,
    raiser,
    resolve_hook,
)
from attngraph.lower.runtime.memo import tracing
from attngraph.lower.runtime.names import NodeDict, module_key
from attngraph.lower.runtime.node import Runtime
from attngraph.lower.runtime.rows import RowsPlan, rows_of, run_rows
from attngraph.lower.runtime.sharing import _share_parameters
from attngraph.lower.runtime.stacked import _linear_groups, _run_linear_group
from attngraph.lower.runtime.steps import (
    Step,
    StepInput,
    _key,
    _lowering_order,
    _no_global_hooks,
    _plugin_output,
    _port,
    last_uses,
)

__all__ = ["GraphModule", "LowerCtx", "lower_graph"]


class LowerCtx(NodeCtx):
    """What a lowering rule may read: the node, its graph, its inputs' types
    (:class:`~attngraph.kinds.base.NodeCtx`); failures are ``LoweringError``s."""

    error = LoweringError

    def lower_graph(self, graph: Graph) -> GraphModule:
        """Lower a subgraph (a block body) to a :class:`GraphModule`."""
        return lower_graph(graph)


def _lower_node(node: Node[Any], graph: Graph) -> nn.Module:
    definition = KINDS[node.kind]
    rule = definition.lowering
    if rule is None:
        known = ", ".join(n for n, k in KINDS.items() if k.lowering is not None)
        msg = f"node '{node.id}': no lowering rule for kind '{node.kind}'"
        raise LoweringError(msg, node.loc, f"kinds with lowering rules: {known}")
    what = f"the lowering rule of kind '{node.kind}'"
    if isinstance(rule, str):
        rule = resolve_hook(rule, node=node, what=what, error=LoweringError)
    try:
        return call_hook(rule, LowerCtx(node, graph), node=node, what=what,  # type: ignore[no-any-return]
                         error=LoweringError, expect=instance_of(nn.Module, "an nn.Module"))
    except AttnGraphError as exc:
        if exc.loc.line > 0 or len(exc.diagnostics) != 1:
            raise
        # an error raised without a place (a plugin's implementation that does not
        # load, read by a built-in module) belongs to the node being lowered
        msg = f"node '{node.id}': {exc.message}"
        raise type(exc)(msg, node.loc, exc.hint) from exc


class GraphModule(nn.Module):
    """A lowered graph: ``nodes`` keyed by node id, run in ``graph.order()``.

    ``run(values, rt)`` takes the values of the graph's inputs (keyed ``id`` or
    ``id.port``) and returns the declared outputs by name (``""`` for a block's
    single ``output``). A loop runs the stages of its body (``Node.runs``) itself:
    ``once`` (the nodes run once per call), then ``schedule`` at each step.
    """

    def __init__(self, graph: Graph) -> None:
        super().__init__()
        self.nodes = NodeDict()
        schedule: list[Step] = []
        self._locs: dict[str, Any] = {}
        #: the ports of each node a plugin's module computes, checked at each call
        self._plugin_ports: dict[str, frozenset[str]] = {}
        stage: dict[str, str] = {}
        for node in _lowering_order(graph):
            if node.is_input:
                continue
            self.nodes[node.id] = _lower_node(node, graph)
            ins = tuple(StepInput(str(e.role), _key(e.src, _port(e, graph)), e.detach)
                        for e in node.inputs)
            schedule.append(Step(node.id, node.kind, ins, module_key(node.id)))
            self._locs[node.id] = node.loc
            stage[node.id] = node.runs
            if not is_builtin(self.nodes[node.id]):
                self._plugin_ports[node.id] = frozenset(node.types)
        _share_parameters(graph, self.nodes)
        for node in graph.nodes:
            if traits_of(node).part:  # a part of another node's work, with its parameters
                prep = self.nodes[node.id]
                prep.bind(self.nodes[node.spec.of])  # type: ignore[operator]
        self.groups = _linear_groups(schedule, self.nodes, stage)
        inner = {nid for g in self.groups.values() for nid in g[1:]}
        #: every node in execution order (stacked linears as their group's first)
        self.plan = [st for st in schedule if st.node not in inner]
        self.once = [st for st in self.plan if stage[st.node] == "once"]
        self.schedule = [st for st in self.plan if stage[st.node] != "once"]
        self.stage = stage
        self.out_keys = tuple((name, _key(e.src, e.port), e.detach) for name, e in graph.outputs)
        self.graph_name = graph.name
        self._drop = last_uses(self.plan, {k for _, k, _ in self.out_keys})
        #: how a forward runs on the rows its formulas read alone (set by the model:
        #: a body runs on the rows its caller reads)
        self.rows_plan: RowsPlan | None = None

    def _fail(self, nid: str, kind: str, exc: BaseException, text: str | None = None, *,
              plugin: bool = False) -> LoweringError:
        """The located error for a node (or stacked group) that raised at run time."""
        group = self.groups.get(nid, ())
        also = f", computed with {', '.join(group[1:])}" if group else ""
        msg = f"node '{nid}' ({kind}{also}) failed at run time: {text or exc}"
        hint = ("the error is in a plugin's code (named above), not in the spec: fix it "
                "there" if plugin else getattr(exc, "hint", None) or
                "check the shapes and dtypes of the inputs given to forward")
        return LoweringError(msg, self._locs[nid], hint)

    def _exec(self, schedule: list[Step], vals: dict[str, Tensor], rt: Runtime,
              drop: tuple[tuple[str, ...], ...] = ()) -> None:
        """Run scheduled nodes, adding their outputs to ``vals``; after node i, the
        values ``drop[i]`` (read for the last time) leave ``vals``, so that memory is
        reused while it is warm, as in hand-written code.

        The hot path of every forward (once per node per loop step): the modules are
        read from the dict once, a node module without hooks is called through its
        ``forward`` (what ``Module.__call__`` does then, minus its checks), and a
        failure becomes a located error outside the loop.
        """
        mods = self.nodes._modules
        groups = self.groups
        checked = not torch.compiler.is_compiling()
        direct = checked and _no_global_hooks()
        for i, (nid, kind, ins, key) in enumerate(schedule):
            x = {role: (vals[k].detach() if det else vals[k]) for role, k, det in ins}
            group = groups.get(nid)
            try:
                if group is not None:
                    vals.update(_run_linear_group([(g, mods[module_key(g)]) for g in group],
                                                  x, rt))
                    continue
                mod = mods[key]
                if direct and not (mod._forward_hooks or mod._forward_pre_hooks  # type: ignore[union-attr]
                                   or mod._backward_hooks or mod._backward_pre_hooks):  # type: ignore[union-attr]
                    out = mod.forward(x, rt)  # type: ignore[union-attr]
                else:
                    out = mod(x, rt)  # type: ignore[misc]
            except (AttnGraphError, KeyboardInterrupt):
                raise
            except (RuntimeError, ValueError, IndexError, TypeError) as exc:
                if not checked:
                    raise
                raise self._fail(nid, kind, exc) from exc
            except BaseException as exc:  # noqa: BLE001 - a plugin kind's forward
                # anything else a plugin's module raises (even SystemExit) is located at
                # its node; an Exception of attngraph's own module is a bug and propagates
                owner = mods.get(key)
                culprit = raiser(exc) or (None if is_builtin(owner)
                                          else f"{hook_name(owner)}.forward")
                if not checked or (isinstance(exc, Exception) and culprit is None):
                    raise
                text = f"{type(exc).__name__}" + (f": {exc}" if str(exc) else "")
                raise self._fail(nid, kind, exc, f"{text} (in {culprit or hook_name(owner)})",
                                 plugin=True) from exc
            if nid in self._plugin_ports:
                wrong = _plugin_output(out, self._plugin_ports[nid])
                if wrong is not None:
                    owner = mods[key]
                    raise self._fail(nid, kind, ValueError(wrong),
                                     f"{wrong} (in {hook_name(owner)}.forward)", plugin=True)
            if isinstance(out, dict):
                for port, v in out.items():
                    vals[f"{nid}.{port}" if port else nid] = v
            else:
                vals[nid] = out
            if drop:
                for k in drop[i]:
                    del vals[k]

    def _outputs(self, vals: dict[str, Tensor]) -> dict[str, Tensor]:
        return {name: (vals[k].detach() if det else vals[k]) for name, k, det in self.out_keys}

    def run(self, values: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:
        """Execute the schedule from input values; return the declared outputs. A
        value read at a few fixed items alone is made at them alone where it can be
        (:attr:`rows_plan`, :mod:`attngraph.lower.runtime.rows`)."""
        vals = dict(values)
        plan = self.rows_plan
        idx = rows_of(self, plan, rt) if plan is not None and not tracing() else None
        if plan is not None and idx is not None:
            run_rows(self, plan, vals, rt, idx)
        else:
            self._exec(self.plan, vals, rt, self._drop)
        return self._outputs(vals)

    def run_rows(self, values: dict[str, Tensor], rt: Runtime, plan: RowsPlan,
                 idx: Tensor) -> dict[str, Tensor]:
        """:meth:`run` by a plan on rows the caller gives (``idx``): the outputs the
        plan returns on them come back at them alone."""
        vals = dict(values)
        run_rows(self, plan, vals, rt, idx)
        return self._outputs(vals)

    def forward(self, values: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:
        return self.run(values, rt)


def lower_graph(graph: Graph) -> GraphModule:
    """Lower an inferred (body) graph to a :class:`GraphModule`."""
    return GraphModule(graph)
