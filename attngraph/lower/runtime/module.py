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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import Tensor, nn
from torch.nn.modules import module as _torch_module

from attngraph.errors import AttnGraphError, LoweringError
from attngraph.ir.graph import Edge, Graph, Node
from attngraph.kinds import KINDS
from attngraph.kinds.base import NodeCtx
from attngraph.kinds.hooks import (
    call_hook,
    hook_name,
    instance_of,
    is_builtin,
    raiser,
    resolve_hook,
)
from attngraph.lower.runtime.names import NodeDict, module_key

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Runtime", "LowerCtx", "NodeModule", "GraphModule", "AttnModel", "lower_graph"]


@dataclass
class Runtime:
    """Per-forward state shared by every node: padding masks and extra tensors."""

    #: symbolic length -> bool mask (B, L), True = real item
    masks: dict[str, Tensor] = field(default_factory=dict)
    #: symbolic length -> its size in this batch (padded), read off the inputs
    sizes: dict[str, Any] = field(default_factory=dict)
    #: extra tensors exposed by nodes, keyed ``"<node id>.<name>"``
    aux: dict[str, Tensor] = field(default_factory=dict)
    #: batch size (of the first input)
    batch: int = 1
    #: dtype of float tensors made at run time (a loop's zero state...): the float
    #: inputs', else the parameters'
    dtype: torch.dtype = field(default_factory=torch.get_default_dtype)
    #: device of tensors made at run time: the inputs'
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    #: tensors a node records once per call (per loop step), stacked into ``aux`` on
    #: axis 1 by :meth:`finish`
    steps: dict[str, list[Tensor]] = field(default_factory=dict)
    #: values of the positions alone (rotary angles, causal masks) made once per forward
    #: and read by every node and round that asks: name -> [(key, value), ...]
    #: (:func:`attngraph.lower.runtime.memo.shared`); runtimes derived with ``replace`` share it
    memo: dict[str, list[tuple[tuple[Any, ...], Tensor]]] = field(default_factory=dict)

    def finish(self) -> dict[str, Tensor]:
        """``aux`` with the per-step records stacked: ``[B, T, ...]`` each."""
        for key, seq in self.steps.items():
            self.aux[key] = torch.stack(seq, 1)
        self.steps.clear()
        return self.aux


def input_sizes(args: Any, vals: dict[str, Tensor]) -> dict[str, Any]:
    """The size of each symbolic length in a batch: ``{"N": x.shape[1], ...}`` from the
    bound inputs (``args``: an input binder's arguments; ``vals``: their values)."""
    sizes: dict[str, Any] = {}
    for a in args:
        x = vals.get(a.input)
        if a.port or x is None:
            continue
        for i, d in enumerate(a.t.dims):
            if isinstance(d, str) and 1 + i < x.dim():
                sizes.setdefault(d, x.shape[1 + i])
    return sizes


class NodeModule(nn.Module):
    """Base class of lowered nodes (see the module docstring for the contract).

    A node whose output is ``after_linear(F.linear(x["from"], W, b))`` may say so
    by returning ``(W, b)`` from :meth:`fusable_linear`: the graph then computes
    the nodes that read the same value this way (queries, keys and values of
    self-attention) with one matmul over their stacked weights.
    """

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor | dict[str, Tensor]:
        raise NotImplementedError

    def fusable_linear(self) -> tuple[Tensor, Tensor | None] | None:
        """``(weight, bias)`` of a plain linear on ``from``, or None (the default)."""
        return None

    def after_linear(self, y: Tensor, rt: Runtime) -> Tensor:
        """What the node does after its linear (see :meth:`fusable_linear`)."""
        return y


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


class StepInput(NamedTuple):
    """One input of a scheduled node: the role it fills, the value it reads
    (``id`` or ``id.port``), and whether the gradient stops there."""

    role: str
    key: str
    detach: bool


class Step(NamedTuple):
    """One scheduled node: its id, its kind, its inputs, and its module's key in
    :class:`~attngraph.lower.runtime.names.NodeDict`."""

    node: str
    kind: str
    inputs: tuple[StepInput, ...]
    key: str


def _port(e: Edge, graph: Graph) -> str:
    """The port an edge reads; ``adjacency: g`` names a graph input's adjacency."""
    if e.role.field == "mask" and not e.port and "adjacency" in graph.node(e.src).types:
        return "adjacency"
    return e.port


def _key(src: str, port: str) -> str:
    return f"{src}.{port}" if port else src


def _linear_groups(schedule: list[Step], nodes: NodeDict,
                   stage: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Nodes reading the same value through a fusable linear with the same input
    size and bias use, keyed by the first one's id (only groups of two or more).
    The nodes of a group run at one stage of a loop (a node that runs before or
    after the steps joins no group: the loop may run it per step instead)."""
    found: dict[tuple[str, bool, int, bool, str], list[str]] = {}
    for nid, _, ins, _ in schedule:
        if len(ins) != 1 or ins[0].role != "from":
            continue
        mod = nodes[nid]
        lin = mod.fusable_linear() if isinstance(mod, NodeModule) else None
        if lin is None:
            continue
        weight, bias = lin
        if stage.get(nid) in ("before", "after"):
            continue
        group = (ins[0].key, ins[0].detach, int(weight.shape[1]), bias is not None,
                 stage.get(nid, "step"))
        found.setdefault(group, []).append(nid)
    return {g[0]: tuple(g) for g in found.values() if len(g) > 1}


def _linear_of(nid: str, mod: nn.Module) -> tuple[NodeModule, Tensor, Tensor | None]:
    """A grouped node's module with the weight and bias of its linear."""
    if isinstance(mod, NodeModule):
        lin = mod.fusable_linear()
        if lin is not None:
            return mod, lin[0], lin[1]
    msg = f"node '{nid}' is computed in a stacked linear but has no fusable linear"
    raise LoweringError(msg)


def _run_linear_group(mods: list[tuple[str, nn.Module]], x: dict[str, Tensor],
                      rt: Runtime) -> dict[str, Tensor]:
    """One ``F.linear`` over the stacked weights, split back per node."""
    import torch.nn.functional as F

    lins = [_linear_of(nid, m) for nid, m in mods]
    weight, bias = _stacked(mods[0][1], lins)
    y = F.linear(x["from"], weight, bias)
    parts = y.split([int(w.shape[0]) for _, w, _ in lins], dim=-1)
    return {nid: m.after_linear(p, rt)
            for (nid, _), (m, _, _), p in zip(mods, lins, parts, strict=True)}


def _stacked(owner: nn.Module, lins: list[tuple[Any, Tensor, Tensor | None]]
             ) -> tuple[Tensor, Tensor | None]:
    """The group's weights (and biases) stacked. Without autograd (decoding, evaluation)
    the stack is kept on the group's first module while no weight has changed: an
    in-place change (an optimiser step, ``load_state_dict``) bumps a tensor's version,
    which the key holds, so a stale stack is never used; with autograd it is made anew
    (the gradient flows through the ``cat``)."""
    def stack() -> tuple[Tensor, Tensor | None]:
        biases = [b for _, _, b in lins if b is not None]
        return (torch.cat([w for _, w, _ in lins]),
                torch.cat(biases) if lins[0][2] is not None else None)

    tensors = [t for _, w, b in lins for t in (w, b) if t is not None]
    if torch.is_grad_enabled() or torch.compiler.is_compiling() or torch.jit.is_tracing() \
            or any(type(t) not in (Tensor, nn.Parameter) for t in tensors):
        return stack()  # (tracing and exporting see fake tensors: no storage to key on)
    key = tuple((id(t), t._version, t.data_ptr(), t.dtype, t.device) for t in tensors)
    kept = owner.__dict__.get("_stacked_linear")
    if kept is None or kept[0] != key:
        kept = (key, *stack())
        owner.__dict__["_stacked_linear"] = kept
    return kept[1], kept[2]


def _share_parameters(graph: Graph, mods: NodeDict) -> None:
    """Nodes with ``share`` run their owner's module (one set of parameters, listed once
    by ``parameters()``); a linear with ``tie`` takes an embedding's table as its weight."""
    for node in graph.nodes:
        target = getattr(node.spec, "share", None) if node.spec is not None else None
        if isinstance(target, str):  # (a repeat's share is a flag of its own)
            mine = [tuple(p.shape) for p in mods[node.id].parameters()]
            theirs = [tuple(p.shape) for p in mods[target].parameters()]
            if mine != theirs:  # the shape rule compares counts; this, the shapes
                msg = (f"node '{node.id}': share: its parameters {mine} are not those of "
                       f"'{target}' {theirs}")
                raise LoweringError(msg, node.where("share"),
                                    "share between nodes of one kind with the same sizes")
            mods[node.id] = mods[target]
        tie = getattr(node.spec, "tie", None) if node.spec is not None else None
        if tie is not None:
            owner = mods[tie]
            table = owner if graph.node(tie).kind == "embedding" else \
                owner.get_submodule("embed")
            mods[node.id].weight = table.get_parameter("weight")
    _owners_first(graph, mods)


def _owners_first(graph: Graph, mods: NodeDict) -> None:
    """Register each owner of parameters before the nodes that use them (``share``,
    ``tie``): torch lists a shared parameter once, under the first module path that
    holds it, so ``named_parameters()`` and the state dict name the owner."""
    order: dict[str, None] = {}

    def place(nid: str, seen: frozenset[str]) -> None:
        if nid in order or nid in seen or nid not in mods:
            return
        spec = graph.node(nid).spec
        for target in (getattr(spec, "share", None), getattr(spec, "tie", None)):
            if isinstance(target, str):  # (a repeat's share is a flag of its own)
                place(target, seen | {nid})
        order[nid] = None

    for nid in mods.keys():
        place(nid, frozenset())
    placed = {module_key(nid): mods._modules[module_key(nid)] for nid in order}
    mods._modules.clear()
    mods._modules.update(placed)


def last_uses(schedule: list[Step], keep: set[str]) -> tuple[tuple[str, ...], ...]:
    """For each node of ``schedule``, the values it reads for the last time (none of
    ``keep``, which are read after the schedule): what :meth:`GraphModule._exec` may
    forget after running it."""
    last: dict[str, int] = {}
    for i, st in enumerate(schedule):
        for inp in st.inputs:
            last[inp.key] = i
    made = {st.node for st in schedule}
    out: list[list[str]] = [[] for _ in schedule]
    for k, i in last.items():
        if k not in keep and k.split(".")[0] in made:
            out[i].append(k)
    return tuple(tuple(d) for d in out)


def _no_global_hooks() -> bool:
    """No module hook is registered for every module, and no ``jit.trace`` is running
    (both go through ``Module.__call__``)."""
    return not (_torch_module._global_forward_hooks or _torch_module._global_forward_pre_hooks
                or _torch_module._global_backward_hooks
                or _torch_module._global_backward_pre_hooks or torch._C._get_tracing_state())


def _lowering_order(graph: Graph) -> list[Node[Any]]:
    """``graph.order()`` as it was before the hoisting pass added ``prepare`` nodes:
    each one comes just before the node whose part it is. Parameters are made in
    this order, so a seed gives the same weights with and without the pass."""
    prepared = {n.id: n for n in graph.nodes if n.kind == "prepare"}
    if not prepared:
        return graph.order()

    def through(e: Edge) -> Edge:
        return prepared[e.src].inputs[0] if e.src in prepared else e

    bare = graph.replace_nodes([replace(n, inputs=tuple(through(e) for e in n.inputs))
                                for n in graph.nodes if n.id not in prepared])
    before: dict[str, list[Node[Any]]] = {}
    for p in prepared.values():
        before.setdefault(p.spec.of, []).append(p)
    return [m for n in bare.order() for m in (*before.get(n.id, ()), graph.node(n.id))]


def _plugin_output(out: Any, ports: frozenset[str]) -> str | None:
    """What is wrong with the output of a plugin's module for a node of ``ports``
    (``""`` the default one): a tensor for a node of one port, else a dict of exactly
    its ports' tensors; None when it is right."""
    if isinstance(out, Tensor) and ports == frozenset({""}):
        return None
    if (isinstance(out, dict) and set(out) == ports
            and all(isinstance(v, Tensor) for v in out.values())):
        return None
    want = ("a tensor" if ports == frozenset({""}) else
            "a dict of tensors for the ports " + ", ".join(repr(p) for p in sorted(ports)))
    got = (f"a dict with keys {sorted(map(str, out))}" if isinstance(out, dict)
           else type(out).__name__)
    return f"forward returned {got}, not {want}"


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
            if node.kind == "prepare":  # a part of another node's work, with its parameters
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

    def _fail(self, nid: str, kind: str, exc: BaseException, text: str | None = None, *,
              plugin: bool = False) -> LoweringError:
        """The located error for a node (or stacked group) that raised at run time."""
        group = self.groups.get(nid, ())
        also = f", computed with {', '.join(group[1:])}" if group else ""
        msg = f"node '{nid}' ({kind}{also}) failed at run time: {text or exc}"
        hint = ("the error is in a plugin's code (named above), not in the spec: fix it "
                "there" if plugin else
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
        """Execute the schedule from input values; return the declared outputs."""
        vals = dict(values)
        self._exec(self.plan, vals, rt, self._drop)
        return self._outputs(vals)

    def forward(self, values: dict[str, Tensor], rt: Runtime) -> dict[str, Tensor]:
        return self.run(values, rt)


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


def lower_graph(graph: Graph) -> GraphModule:
    """Lower an inferred (body) graph to a :class:`GraphModule`."""
    return GraphModule(graph)
