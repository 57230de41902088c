"""The decoders :func:`attngraph.lower.decode.generate.generate` drives, one step at a time.

A :class:`Decoder` runs a batch of rows (examples, then examples × beams): ``step``
feeds each row its previous token and returns the logits of the next one and the
step's attention; ``reorder`` makes row i a copy of row ``index[i]`` (a beam's
parent). Two kinds:

- :class:`LoopDecoder`: a ``loop`` whose feed has ``feedback:``. What the loop reads
  (the encoder) runs once; the loop is stepped by its step API
  (:meth:`~attngraph.lower.rules.loop.Loop.begin`, ``advance``), its carried state
  reordered with the beams.
- :class:`CausalDecoder`: an output ``[T, vocab]`` over a ``tokens`` input of length
  ``T`` and that ``vocab``, from a prompt (that input, padded last) or the start id.
  The whole model is re-run on the prefix at each step (O(L²) positions over L
  steps). A probe before the first step and a check at each step refuse a decoder
  whose earlier outputs move when a token is appended (one that looks ahead).
- :class:`~attngraph.lower.decode.cached.CachedDecoder`: the same decoder stepped through a
  key/value cache derived from its graph (:mod:`attngraph.lower.decode.cache`), the default;
  a graph the cache cannot step warns (:class:`CacheNote`) and is re-run instead.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, cast

import torch
from torch import Tensor

from attngraph.errors import LoweringError, did_you_mean
from attngraph.kinds.base import traits_of
from attngraph.lower.decode.cache import CacheRefused, plan_cache
from attngraph.lower.decode.cached import CachedDecoder
from attngraph.lower.rules.loop import Loop, LoopCursor
from attngraph.lower.runtime.module import AttnModel, Runtime, input_sizes
from attngraph.passes.hoist import ancestors

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

__all__ = ["BOS", "CacheNote", "CausalDecoder", "Decoder", "LoopDecoder", "causal_decoder",
           "generating_outputs", "loop_decoder", "next_token_input"]

#: The start id of a causal decoder's first position (the built-in tasks' BOS).
BOS = 0
#: How far a causal decoder's earlier outputs may move when a token is appended.
_CAUSAL_TOL = 1e-4

class Decoder(Protocol):
    """One way to run a decoder a step at a time, over a batch of rows (beams)."""

    #: the size of the distribution each step gives (None: known at run time only)
    vocab: int | None
    device: torch.device
    #: the rows it runs (examples, then examples × beams)
    batch: int
    #: each attention output's step axis in the stacked result (2 after a head axis)
    axes: dict[str, int]

    def step(self, prev: Tensor | None) -> tuple[Tensor, dict[str, Tensor]]:
        """The logits (rows, V) after feeding ``prev`` (None: the start), and the
        attention of that step by name."""

    def reorder(self, index: Tensor) -> None:
        """Row i becomes row ``index[i]``."""


class LoopDecoder:
    """A loop stepped by its step API; the nodes it reads have run once."""

    def __init__(self, loop: Loop, cur: LoopCursor, feed: str, out: str, start: int,
                 vocab: int | None, axes: dict[str, int], ports: dict[str, str]) -> None:
        self.loop, self.cur, self.feed, self.out = loop, cur, feed, out
        self.start, self.vocab, self.axes, self.ports = start, vocab, axes, ports
        self.device = cur.rt.device
        self.batch = cur.rt.batch

    def step(self, prev: Tensor | None) -> tuple[Tensor, dict[str, Tensor]]:
        rt = self.cur.rt
        if prev is None:
            prev = torch.full((rt.batch,), self.start, dtype=torch.long, device=rt.device)
        outs = self.loop.advance(self.cur, {self.feed: prev})
        return outs[self.out], {k: outs[port] for k, port in self.ports.items()}

    def reorder(self, index: Tensor) -> None:
        self.cur = self.cur.reorder(index)


class CausalDecoder:
    """The whole model re-run on the prefix; its earlier outputs must not move.

    Row i holds its prompt's real tokens (or the start id), then the tokens chosen so
    far, padded last; its next token's logits are read after its last real token."""

    def __init__(self, model: AttnModel, inputs: dict[str, Tensor], target: str, out: str,
                 start: int, vocab: int, axes: dict[str, int], prompt: Tensor | None = None,
                 prompt_mask: Tensor | None = None) -> None:
        self.model, self.inputs, self.target, self.out = model, inputs, target, out
        self.start, self.axes = start, axes
        self.vocab: int | None = vocab
        first = prompt if prompt is not None else next(iter(inputs.values()))
        self.device = first.device
        self.batch = int(first.shape[0])
        self.prefix = prompt if prompt is not None else torch.full(
            (self.batch, 1), start, dtype=torch.long, device=self.device)
        self.lens = (prompt_mask.sum(1) if prompt_mask is not None else torch.full(
            (self.batch,), self.prefix.shape[1], device=self.device)).long()
        self.started = False
        self.seen: Tensor | None = None  # the logits of every position so far
        self.real: Tensor | None = None  # and which of them were real

    def step(self, prev: Tensor | None) -> tuple[Tensor, dict[str, Tensor]]:
        from attngraph.lower.decode.cached import at_rows

        if self.started:
            if prev is None:  # (not reached: the searches feed back every step's token)
                msg = "a causal decoder's later steps need the previous token"
                raise LoweringError(msg)
            b = self.prefix.shape[0]
            if int(self.lens.max()) == self.prefix.shape[1]:  # one more column, padded
                self.prefix = torch.cat([self.prefix, self.prefix.new_zeros(b, 1)], 1)
            self.prefix = self.prefix.scatter(1, self.lens[:, None], prev[:, None])
            self.lens = self.lens + 1
        self.started = True
        w = self.prefix.shape[1]
        real = torch.arange(w, device=self.device)[None, :] < self.lens[:, None]  # (B, W)
        masks = {} if bool(real.all()) else {f"{self.target}_mask": real}
        res = self.model(**self.inputs, **{self.target: self.prefix}, **masks)
        logits = res[self.out]  # (B, W, V)
        if self.seen is not None and self.real is not None:
            n = self.seen.shape[1]
            if not _same(logits[:, :n][self.real], self.seen[self.real]):
                raise _not_causal(self.model, self.out, self.target, int(self.lens.min()) - 1)
        self.seen, self.real = logits, real
        last = self.lens - 1
        att = {k: at_rows(res[k], axis, last) for k, axis in self.axes.items()}
        return at_rows(logits, 1, last), att

    def reorder(self, index: Tensor) -> None:
        self.inputs = {k: v.index_select(0, index) for k, v in self.inputs.items()}
        self.prefix = self.prefix.index_select(0, index)
        self.lens = self.lens.index_select(0, index)
        self.batch = int(index.shape[0])
        if self.seen is not None and self.real is not None:
            self.seen = self.seen.index_select(0, index)
            self.real = self.real.index_select(0, index)


def _same(a: Tensor, b: Tensor) -> bool:
    """Equal up to the rounding of runs over different lengths."""
    return torch.allclose(a, b, atol=_CAUSAL_TOL, rtol=_CAUSAL_TOL)


def _not_causal(model: AttnModel, out: str, target: str, t: int) -> LoweringError:
    """The error of a decoder whose earlier outputs moved when token t was appended."""
    msg = (f"output '{out}' before position {t} changed when token {t} of '{target}' was "
           "appended: the decoder over it is not causal, so it cannot generate one token "
           "at a time")
    return LoweringError(msg, model.graph.node(target).loc,
                         "mask every attention over the target with mask: {causal: true}")


def _probe(model: AttnModel, given: dict[str, Tensor], target: str, out: str,
           start: int, vocab: int, batch: int) -> None:
    """Refuse a decoder that looks ahead before any step: its outputs over three
    seeded random tokens against those over the first one and the first two."""
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(vocab, (batch, 3), generator=gen).to(model_device(model, given))
    ids[:, 0] = start
    whole = model(**given, **{target: ids})[out]  # (B, 3, V)
    for t in (1, 2):
        if not _same(model(**given, **{target: ids[:, :t]})[out], whole[:, :t]):
            raise _not_causal(model, out, target, t)


def model_device(model: AttnModel, given: Mapping[str, Tensor]) -> torch.device:
    """Where the inputs are, else the parameters."""
    if given:
        return next(iter(given.values())).device
    ref = model._reference()
    return ref.device if ref is not None else torch.device("cpu")


def no_generation(model: AttnModel, detail: str) -> LoweringError:
    """The error of a model with no output that generation can produce."""
    msg = f"{model.graph.name} cannot generate: {detail}"
    hint = ("generation needs a loop whose feed has feedback: (e.g. feed: {y: {from: "
            "target, start: 0, feedback: logits}}), or an output [T, vocab] over a tokens "
            "input of length T (a causal decoder)")
    return LoweringError(msg, None, hint)


def generating_outputs(model: AttnModel) -> dict[str, tuple[str, str]]:
    """The outputs that can be generated: name -> ("loop", loop id) or ("causal", input)."""
    graph = model.graph
    found: dict[str, tuple[str, str]] = {}
    for name, e in graph.outputs:
        node = graph.node(e.src)
        if traits_of(node).body == "steps":  # a loop, stepped by its step API
            loop = cast(Loop, model.nodes[node.id])
            port = e.port or loop.out_keys[0][0]
            if any(f.feedback == port for f in loop.feed):
                found[name] = ("loop", node.id)
            continue
        inp = next_token_input(graph, name)
        if inp is not None:
            found[name] = ("causal", inp)
    return found


def next_token_input(graph: Graph, output: str) -> str | None:
    """The token input whose next token ``output`` scores: a float ``[N, vocab]`` per
    example over that input's own length and vocabulary (a causal decoder's logits;
    None when it is no such output). The last such input, as generation takes it."""
    e = dict(graph.outputs)[output]
    t = graph.node(e.src).types[e.port]
    if t.heads or t.rank != 2 or t.dtype != "float" or not isinstance(t.dims[0], str):
        return None
    found = None
    for inp in graph.inputs:
        s = inp.spec
        if s.type == "tokens" and inp.types[""].dims == (t.dims[0],) \
                and s.vocab is not None and int(s.vocab) == t.dims[1]:
            found = inp.id
    return found


def _known(model: AttnModel, inputs: Mapping[str, Tensor]) -> None:
    """Refuse a name that is no argument of the model's forward."""
    unknown = sorted(set(inputs) - model.binder.names)
    if unknown:
        msg = f"generate got unknown input '{unknown[0]}'"
        raise LoweringError(msg, None, did_you_mean(unknown[0], model.binder.names))


def _bind(model: AttnModel, graph_inputs: set[str],
          inputs: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], Runtime]:
    """The inputs the decoder reads, checked as forward checks them, and their runtime."""
    from attngraph.lower.runtime.inputs import InputBinder

    graph = model.graph
    _known(model, inputs)
    part = graph.replace_nodes([n for n in graph.nodes
                                if not n.is_input or n.id in graph_inputs])
    binder = InputBinder(part)
    given = {k: v for k, v in inputs.items() if k in binder.names and v is not None}
    ref = model._reference()
    vals, masks, batch = binder.bind(given, ref)
    rt = Runtime(masks=masks, batch=int(batch), sizes=input_sizes(binder.args, vals))
    floats = [v for v in vals.values() if v.is_floating_point()]
    rt.dtype = floats[0].dtype if floats else (ref.dtype if ref is not None else rt.dtype)
    if vals:
        rt.device = next(iter(vals.values())).device
    elif ref is not None:
        rt.device = ref.device
    return vals, rt


def loop_decoder(model: AttnModel, loop_id: str, start: int | None,
                 inputs: Mapping[str, Tensor], attention: bool) -> LoopDecoder:
    """Run what the loop reads (not its steps or feeds), and begin the loop."""
    graph = model.graph
    node = graph.node(loop_id)
    loop = cast(Loop, model.nodes[loop_id])
    feeds = [f for f in loop.feed if f.feedback is None]
    if feeds or len(loop.feed) != 1:
        names = ", ".join(f.name for f in loop.feed)
        msg = (f"loop '{loop_id}' has feeds {names}: generation feeds back one token, so the "
               "loop needs exactly one feed, with feedback: (a feed read from an input has "
               "no value past that input's end)")
        raise LoweringError(msg, node.where("feed"), "generate from a loop with one "
                            "feedback feed, e.g. feed: {y: {from: target, feedback: logits}}")
    feed = loop.feed[0]
    (step,) = [st for st in model.plan if st.node == loop_id]
    read = [inp for inp in step.inputs if inp.role != "steps" and not inp.role.startswith("feed.")]
    srcs = {e.src for e in node.inputs if str(e.role) in {inp.role for inp in read}}
    needed = ancestors(graph, srcs)
    skipped = {e.src for e in node.inputs if e.src not in srcs}
    if needed & skipped:
        which = sorted(needed & skipped)[0]
        msg = (f"loop '{loop_id}' reads '{which}' through its inputs or carries, and through "
               "its steps or feed too: generation cannot run it without that value")
        raise LoweringError(msg, node.loc, "the loop's inputs and carries should depend on "
                            "the source only")
    vals, rt = _bind(model, {n.id for n in graph.inputs if n.id in needed}, inputs)
    groups = model.groups
    prefix = [st for st in model.plan
              if any(n in needed for n in groups.get(st.node, (st.node,)))]
    model._exec(prefix, vals, rt)
    x = {inp.role: vals[inp.key].detach() if inp.detach else vals[inp.key] for inp in read}
    cur = loop.begin(x, rt)
    port = str(feed.feedback)
    vocab = node.types[port].dims[-1]
    named = {e.port: name for name, e in graph.outputs if e.src == loop_id}
    # the attention outputs, named as the model's outputs that read them, else by port
    ports = {named.get(k, k): k for k, t in node.types.items()
             if attention and k and (t.simplex or t.weights)}
    axes = {name: loop.stack_axis[k] for name, k in ports.items()}
    return LoopDecoder(loop, cur, feed.name, port, feed.start if start is None else start,
                       vocab if isinstance(vocab, int) else None, axes, ports)


def _prompt(model: AttnModel, target: str, inputs: Mapping[str, Tensor]
            ) -> tuple[Tensor | None, Tensor | None]:
    """The prompt (the target given among the inputs) and its mask, padded last."""
    prompt, mask = inputs.get(target), inputs.get(f"{target}_mask")
    if prompt is None:
        if mask is not None:
            msg = f"generate got '{target}_mask' without '{target}' (the prompt)"
            raise LoweringError(msg, model.graph.node(target).loc, f"pass '{target}' too")
        return None, None
    where = model.graph.node(target).loc
    if not isinstance(prompt, Tensor) or prompt.dim() != 2 or prompt.shape[1] == 0 \
            or prompt.is_floating_point():
        msg = f"generate: the prompt '{target}' must be token ids (B, P), P >= 1"
        raise LoweringError(msg, where, "pass a long tensor (B, P) of ids")
    if mask is not None:
        mask = mask.to(torch.bool)
        lens = mask.sum(1)
        first = torch.arange(mask.shape[1], device=mask.device)[None, :] < lens[:, None]
        if mask.shape != prompt.shape or not torch.equal(mask, first) or bool((lens == 0).any()):
            msg = (f"generate: '{target}_mask' must mark each prompt's real tokens first, "
                   "then its padding, with one real token at least")
            raise LoweringError(msg, where, "pad prompts last (right padding)")
    return prompt.long(), mask


def causal_decoder(model: AttnModel, out: str, target: str, start: int | None,
                   inputs: Mapping[str, Tensor], attention: bool,
                   cache: bool = True) -> CausalDecoder | CachedDecoder:
    """The model over a growing target prefix, given the other inputs: the prompt
    (``inputs[target]``, padded last) or the start id first; with ``cache``, stepped
    through a key/value cache derived from the graph where it can be."""
    graph = model.graph
    _known(model, inputs)
    given = {k: v for k, v in inputs.items()
             if v is not None and k not in (target, f"{target}_mask")}
    prompt, prompt_mask = _prompt(model, target, inputs)
    if not given and prompt is None:
        msg = (f"the causal decoder of output '{out}' reads only '{target}': generate "
               "needs a prompt (the batch's first tokens) or another input to condition on")
        raise LoweringError(msg, graph.node(target).loc,
                            f"pass '{target}' (and '{target}_mask'), or the source inputs")
    types = graph.output_types()
    t_sym = str(types[out].dims[0])
    # the attention outputs over another length (the source); over the target they grow
    axes = {k: 2 if t.heads else 1 for k, t in types.items()
            if attention and (t.simplex or t.weights) and t.dims[:1] == (t_sym,)
            and t.dims[-1] != t_sym}
    first = BOS if start is None else start
    vocab = int(types[out].dims[1])
    _probe(model, {k: v[:1] for k, v in given.items()}, target, out, first, vocab, 1)
    if cache:
        try:
            plan = plan_cache(model, graph, {target}, t_sym)
        except CacheRefused as exc:
            warnings.warn(f"generate: no key/value cache for {graph.name}: {exc.message}; "
                          "re-running the prefix at every step", CacheNote, stacklevel=3)
        else:
            return CachedDecoder(model, plan, given, target, out, first, vocab, axes,
                                 prompt, prompt_mask, t_sym)
    return CausalDecoder(model, given, target, out, first, vocab, axes, prompt, prompt_mask)


class CacheNote(UserWarning):
    """Generation runs without a key/value cache (the note says which node and why)."""
