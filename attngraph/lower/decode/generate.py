"""Generation without a target: greedy and beam search over a compiled model.

:func:`generate` produces token sequences from a model's decoder given only the
inputs the decoder conditions on (the source), where ``model(...)`` itself needs a
target whose length sets the number of decoder steps. Two kinds of decoder
generate:

- a ``loop`` whose ``feed`` has ``feedback:`` (an output fed back as the next
  token: the seq2seq decoders of the catalog). The nodes the loop reads run once
  (the encoder), then the loop is stepped one token at a time, its carried state
  following the beams;
- a causal decoder: a model output ``[T, vocab]`` over a ``tokens`` input of
  length ``T`` and that ``vocab`` (the target, shifted right behind the start id;
  given among the inputs, a prompt padded last). It steps through a key/value cache
  derived from the graph (:mod:`attngraph.lower.decode.cache`), or re-runs the whole
  prefix at each step (``cache=False``, or a graph the cache cannot step); a
  decoder that looks ahead is refused.

:mod:`attngraph.lower.decode.decoders` holds the two; this module, the searches.

Greedy search (``beam=1``) feeds back the argmax, exactly as the model's eval-mode
forward does, so ``model(source, target=tokens)`` reproduces its logits. Beam
search keeps, at every step, the ``beam`` best hypotheses of each example by summed
log-probability; a hypothesis that emitted ``eos`` stays in the beam with its score
fixed. The returned one is the best by ``score / length ** length_penalty``.

>>> import torch, attngraph
>>> model = attngraph.compile("specs/bahdanau_translation.yaml", seed=0)
>>> src = torch.tensor([[3, 5, 7, 9]])
>>> out = attngraph.generate(model, {"source": src}, max_length=4, beam=3)
>>> out.tokens.shape, out.lengths.tolist()
(torch.Size([1, 4]), [4])
>>> greedy = attngraph.generate(model, {"source": src}, max_length=4)
>>> ref = model.eval()(source=src, target=greedy.tokens)["logits"].argmax(-1)
>>> bool((ref == greedy.tokens).all())
True
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812 - the usual name
from torch import Tensor

from attngraph.errors import LoweringError, count_problem, flag_problem, whole
from attngraph.lower.decode.decoders import (
    Decoder,
    causal_decoder,
    generating_outputs,
    loop_decoder,
    no_generation,
)
from attngraph.lower.runtime.module import AttnModel

__all__ = ["Generation", "generate"]


@dataclass(frozen=True)
class Generation:
    """What :func:`generate` returns, for a batch of B examples.

    ``tokens`` (B, L) are the chosen ids, L the number of steps run (at most
    ``max_length``, the largest where each example has its own; fewer when every
    example emitted ``eos``), with ``pad`` after an example's ``eos`` or its own
    ``max_length``; ``lengths`` (B,) count the tokens up to and including
    ``eos``; ``scores`` (B,) are the summed log-probabilities of those tokens;
    ``attention`` maps each attention output of the decoder (softmax weights; named
    as the model output that reads it, else as the loop's port) to its weights at
    every step of the returned sequence, ``(B, L, ...)`` (``(B, h, L, ...)`` with
    heads), when asked for.
    """

    tokens: Tensor
    lengths: Tensor
    scores: Tensor
    attention: dict[str, Tensor] = field(default_factory=dict)

    def sequences(self) -> list[list[int]]:
        """Each example's ids up to and including its ``eos`` (no padding).

        >>> import torch
        >>> Generation(torch.tensor([[4, 2, 9], [5, 6, 2]]), torch.tensor([2, 3]),
        ...            torch.zeros(2)).sequences()
        [[4, 2], [5, 6, 2]]
        """
        return [row[:n] for row, n in zip(self.tokens.tolist(), self.lengths.tolist(),
                                          strict=True)]


def _log_softmax(logits: Tensor) -> Tensor:
    """Log-probabilities over the last axis, in float32 at least."""
    return F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)


def _greedy(dec: Decoder, b: int, limits: Tensor, eos: int | None,
            pad: int) -> tuple[Tensor, Tensor, Tensor, list[dict[str, Tensor]]]:
    """Feed back the argmax, as eval-mode forward does; stop each row at ``eos`` or
    after its ``limits`` tokens (B,)."""
    steps = int(limits.max())
    done = torch.zeros(b, dtype=torch.bool, device=dec.device)
    scores = torch.zeros(b, device=dec.device)
    lengths = torch.zeros(b, dtype=torch.long, device=dec.device)
    toks: list[Tensor] = []
    atts: list[dict[str, Tensor]] = []
    prev = None
    for _ in range(steps):
        logits, att = dec.step(prev)  # (B, V)
        tok = logits.argmax(-1)  # (B,)
        logp = _log_softmax(logits).gather(1, tok[:, None])[:, 0]
        scores = scores + logp.masked_fill(done, 0.0)
        lengths = lengths + (~done).long()
        toks.append(tok.masked_fill(done, pad))
        atts.append(att)
        if eos is not None:
            done = done | (tok == eos)
        done = done | (lengths >= limits)
        prev = tok
        if bool(done.all()):
            break
    return torch.stack(toks, 1), lengths, scores, atts


def _beam(dec: Decoder, b: int, k: int, limits: Tensor, eos: int | None, pad: int,
          alpha: float) -> tuple[Tensor, Tensor, Tensor, list[dict[str, Tensor]]]:
    """Keep the k best hypotheses of each row by summed log-probability; a finished
    one (``eos``, or its row's ``limits`` tokens) continues only with one id at no
    cost, so it keeps its place and score."""
    dev = dec.device
    steps = int(limits.max())
    rows = torch.arange(b, device=dev)
    dec.reorder(rows.repeat_interleave(k))  # (B·k): row b·k + j is beam j of example b
    scores = torch.full((b, k), float("-inf"), device=dev)
    scores[:, 0] = 0.0  # the k beams start as one hypothesis
    done = torch.zeros((b, k), dtype=torch.bool, device=dev)
    lengths = torch.zeros((b, k), dtype=torch.long, device=dev)
    hist: list[tuple[Tensor, Tensor, dict[str, Tensor]]] = []  # (token, parent, att)
    prev = None
    for _ in range(steps):
        logits, att = dec.step(prev)  # (B·k, V)
        v = logits.shape[-1]
        logp = _log_softmax(logits).view(b, k, v)
        if bool(done.any()):  # an ended hypothesis: only one id (eos), at no cost
            only = torch.full((v,), float("-inf"), device=dev)
            only[eos if eos is not None else 0] = 0.0
            logp = torch.where(done[..., None], only, logp)
        top, idx = (scores[..., None] + logp).view(b, k * v).topk(k, -1)  # (B, k)
        parent, tok = idx // v, idx % v
        flat = (parent + rows[:, None] * k).view(-1)  # the parents' rows
        was_done = done.gather(1, parent)
        scores, lengths = top, lengths.gather(1, parent) + (~was_done).long()
        done = was_done | (tok == eos) if eos is not None else was_done
        done = done | (lengths >= limits[:, None])
        hist.append((tok.masked_fill(was_done, pad), parent,
                     {n: a.index_select(0, flat) for n, a in att.items()}))
        dec.reorder(flat)
        prev = tok.view(-1)
        if bool((done | scores.isneginf()).all()):  # (-inf: fewer hypotheses than beams)
            break
    ranked = scores / lengths.clamp(min=1).float() ** alpha if alpha else scores
    best = ranked.argmax(1)  # (B,)
    toks: list[Tensor] = []
    atts: list[dict[str, Tensor]] = []
    pick = best
    for tok, parent, att in reversed(hist):  # follow the chosen beams back
        toks.append(tok.gather(1, pick[:, None])[:, 0])
        atts.append({n: a.view(b, k, *a.shape[1:])[rows, pick] for n, a in att.items()})
        pick = parent.gather(1, pick[:, None])[:, 0]
    sel = best[:, None]
    return (torch.stack(toks[::-1], 1), lengths.gather(1, sel)[:, 0],
            scores.gather(1, sel)[:, 0], atts[::-1])


def _check_options(model: AttnModel, steps: int | Sequence[int] | Tensor | None, beam: int,
                   alpha: float) -> int | list[int]:
    """The number of steps (or each example's), once the options are known to be
    usable."""
    if steps is None:
        msg = (f"generate needs max_length for {model.graph.name}: its decoder's steps "
               "come from an input that generation does not read")
        raise LoweringError(msg, None, "pass max_length=<the most tokens per sequence>")
    each = _lengths(steps)
    checks = [("max_length", n, 1) for n in (each if each is not None else [steps])]
    for name, value, low in [*checks, ("beam", beam, 1)]:
        problem = count_problem(name, value, low)
        if problem is not None:
            msg = f"generate: {problem}"
            raise LoweringError(msg, None, f"pass {name}={low} or more")
    if not isinstance(alpha, (int, float)) or alpha != alpha:
        msg = f"generate: length_penalty must be a number, not {alpha!r}"
        raise LoweringError(msg, None, "pass length_penalty=0.0 (none) or e.g. 0.6")
    return steps if each is None else each  # type: ignore[return-value]


def _lengths(steps: object) -> list[Any] | None:
    """One ``max_length`` per example, given as a list, tuple or 1-D tensor of them
    (None: one number, or anything else, checked as one)."""
    if isinstance(steps, Tensor):
        if steps.dim() != 1 or steps.is_floating_point() or steps.is_complex() \
                or steps.dtype == torch.bool or not steps.numel():
            msg = ("generate: max_length as a tensor holds one integer per example, not a "
                   f"{steps.dtype} tensor of shape {tuple(steps.shape)}")
            raise LoweringError(msg, None, "pass a 1-D integer tensor, or one number")
        return [int(n) for n in steps.tolist()]
    if isinstance(steps, (list, tuple)):
        if not steps:
            msg = "generate: max_length is an empty list"
            raise LoweringError(msg, None, "give one length per example, or one number for all")
        return list(steps)
    return None


def _check_ids(pad: object, start: object) -> None:
    """A padding id and a start id that are whole numbers, or None (the padding may lie
    outside the vocabulary: -1 marks it plainly; the start id is read as forward reads
    its tokens)."""
    for name, value in (("pad", pad), ("start", start)):
        if value is not None and not whole(value):
            msg = f"generate: {name}={value!r:.40} is not a whole number"
            raise LoweringError(msg, None, f"pass {name} as a token id, or leave it out")


def _check_eos(eos: int | None, vocab: int | None) -> None:
    """An end id the decoder can emit."""
    if eos is not None and (not whole(eos, 0) or (vocab is not None and eos >= vocab)):
        msg = f"generate: eos={eos!r} is not a token id of the decoder (0 ≤ id < {vocab})"
        raise LoweringError(msg, None, "pass the end id the model was trained with, or None")


def generate(model: Any, inputs: Mapping[str, Tensor], *,
             max_length: int | Sequence[int] | Tensor | None = None,
             beam: int = 1, eos: int | None = None, pad: int | None = None,
             length_penalty: float = 0.0, start: int | None = None, output: str | None = None,
             return_attention: bool = False, cache: bool = True) -> Generation:
    """Generate token sequences from a compiled model's decoder, without a target.

    Parameters
    ----------
    model : AttnModel
        A model from :func:`attngraph.compile` with a generating output (see the module
        doc: a ``loop`` that feeds back its own tokens, ``feed: {y: {feedback:
        logits}}``, or a causal decoder, refused if an earlier position's output moves
        when a token is appended). Run in eval mode without gradients; its mode is
        restored afterwards.
    inputs : mapping of str to Tensor
        The inputs the decoder conditions on, as forward takes them (``source``,
        ``source_mask``). A loop decoder ignores the others (the target); a causal
        decoder continues each row of its ``tokens`` input, if given, after it (the
        prompt, with ``<input>_mask``: padded last).
    max_length : int, or one int per example, optional
        The most tokens per sequence (a list or 1-D tensor: each example's own, so
        that an example gives the same tokens in any batch); required unless the
        loop has a fixed ``steps``.
    beam : int, optional
        1: greedy search, the argmax fed back as eval-mode forward does. K > 1: beam
        search keeping the K best hypotheses per example by summed log-probability.
    eos, pad : int, optional
        The end id: an example stops once it emits it (None, as the built-in tasks,
        whose targets have a known length: every sequence runs ``max_length``); the id
        written after it (default: ``eos``).
    length_penalty : float, optional
        Beam search returns the best ``score / length ** length_penalty`` (0: the
        summed log-probability itself).
    start : int, optional
        The id fed at the first step (default: the loop feed's ``start``; a causal
        decoder's first position: 0, the built-in tasks' BOS).
    output : str, optional
        Which model output to generate, when several can be.
    return_attention : bool, optional
        Also return the decoder's attention outputs at every step.
    cache : bool, optional
        A causal decoder computes only the new position at each step (default); False
        re-runs the prefix, as does a graph the cache cannot step, with a warning
        (:class:`~attngraph.lower.decode.decoders.CacheNote`, naming the node).

    Returns
    -------
    Generation
        ``tokens`` (B, L), ``lengths`` (B,), ``scores`` (B,) and ``attention``.

    Raises
    ------
    LoweringError
        A model with no generating output (saying what is missing), bad options, or
        inputs that forward would refuse.
    """
    how, output, where = _generated(model, output)
    if not isinstance(inputs, Mapping):
        msg = f"generate takes its inputs as a dict of name -> tensor, not {type(inputs).__name__}"
        raise LoweringError(msg, None, 'e.g. generate(model, {"source": ids}, max_length=20)')
    bad = flag_problem(return_attention=return_attention, cache=cache)
    if bad is not None:
        msg = f"generate: {bad[1]}"
        raise LoweringError(msg, None, f"pass {bad[0]}=True or False")
    steps = _check_options(model, _steps(model, how, where, max_length), beam, length_penalty)
    _check_ids(pad, start)
    with _evaluating(model):
        dec = _decoder(model, how, output, where, start, inputs, return_attention, cache)
        _check_eos(eos, dec.vocab)
        return _search(dec, steps, beam, eos, pad, length_penalty)


def _decoder(model: AttnModel, how: str, output: str, where: str, start: int | None,
             inputs: Mapping[str, Tensor], attend: bool, cache: bool) -> Decoder:
    """The decoder that steps ``output``: the loop ``where``, or a causal decoder over
    the tokens input ``where`` (through its key/value cache with ``cache``)."""
    if how == "loop":
        return loop_decoder(model, where, start, inputs, attend)
    return causal_decoder(model, output, where, start, inputs, attend, cache=cache)


def _search(dec: Decoder, steps: int | list[int], beam: int, eos: int | None,
            pad: int | None, alpha: float) -> Generation:
    """Greedy (``beam`` 1) or beam search over ``dec``'s rows, each for at most its
    ``steps`` (one number for all): what generate returns."""
    fill = (0 if eos is None else eos) if pad is None else pad
    if isinstance(steps, list) and len(steps) != dec.batch:
        msg = (f"generate: max_length gives {len(steps)} lengths, but the inputs hold "
               f"{dec.batch} example{'' if dec.batch == 1 else 's'}")
        raise LoweringError(msg, None, "give one length per example, or one number for all")
    limits = torch.as_tensor(steps, dtype=torch.long, device=dec.device).expand(dec.batch)
    if beam == 1:
        toks, lengths, scores, atts = _greedy(dec, dec.batch, limits, eos, fill)
    else:
        toks, lengths, scores, atts = _beam(dec, dec.batch, beam, limits, eos, fill, alpha)
    attention = {n: torch.stack([a[n] for a in atts], axis) for n, axis in dec.axes.items()}
    return Generation(toks, lengths, scores, attention)


def _generated(model: Any, output: str | None) -> tuple[str, str, str]:
    """How ``output`` (None: the one output that can be) is generated, and from where:
    ``("loop", output, loop id)`` or ``("causal", output, tokens input)``."""
    if not isinstance(model, AttnModel):
        msg = f"generate takes a model from attngraph.compile, not {type(model).__name__}"
        raise LoweringError(msg, None, "model = attngraph.compile(spec)")
    found = generating_outputs(model)
    if not found:
        raise no_generation(model, "no output is made by a loop that feeds back its own "
                            "tokens, or by a decoder over a token input")
    if output is not None and not isinstance(output, str):
        msg = f"generate: output names one of the model's outputs, not {output!r:.40}"
        raise LoweringError(msg, None, f"pass output='{next(iter(found))}', or leave it out")
    if output is None:
        if len(found) > 1:
            msg = f"{model.graph.name} can generate {', '.join(found)}: say which"
            raise LoweringError(msg, None, f"pass output='{next(iter(found))}'")
        output = next(iter(found))
    elif output not in found:
        raise no_generation(model, f"output '{output}' is not made by a loop that feeds back "
                            "its own tokens or by a decoder over a token input (these are: "
                            f"{', '.join(found)})")
    how, where = found[output]
    return how, output, where


def _steps(model: AttnModel, how: str, where: str,
           max_length: int | Sequence[int] | Tensor | None
           ) -> int | Sequence[int] | Tensor | None:
    """``max_length``, else a loop decoder's fixed number of steps (None: neither)."""
    if max_length is None and how == "loop":
        fixed = model.nodes[where].steps  # type: ignore[union-attr]
        return fixed if isinstance(fixed, int) else None
    return max_length


@contextmanager
def _evaluating(model: AttnModel) -> Iterator[None]:
    """``model`` in eval mode without gradients; its mode restored afterwards."""
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was)
