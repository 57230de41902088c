"""Values of one forward that depend on the positions alone, made once and shared.

A node of a repeat's body runs once per round; some of what it computes reads
nothing that changes from round to round, nor from node to node: the rotary
angles' cos and sin over N positions (the same for the queries and the keys of
every layer), a causal mask over M × N scores (the same for every layer's softmax),
a padding mask combined with it. :func:`shared` makes such a value the first time a
forward asks for it and gives the same tensor to every later request of that
forward, as a hand-written model computes them once before its layers.

Each value lives in the forward's :class:`~attngraph.lower.runtime.module.Runtime`
(``rt.memo``), which :meth:`~attngraph.lower.runtime.module.AttnModel.forward` makes anew at
every call: nothing is served across forwards. Within one runtime (a cached decoder
keeps its runtime from step to step) a value is served only while its key is the
one it was made for:

- the key names everything the value is computed from: sizes, dtype, device, and
  the tensors it reads (a padding mask, an adjacency), each compared by identity
  and by version (an in-place change bumps the version); the entry holds those
  tensors, so an identity cannot be reused while it is kept;
- at most :data:`KEEP` entries per name, the oldest dropped first: a forward
  asks for a few keys of a name (T5's decoder layers alternate between a causal
  mask and the source's padding), and a runtime that lives on (a decoder stepping
  through lengths 1, 2, …) keeps a few values, not one a length;
- a value that requires a gradient is not kept (a value of the positions alone
  never does; one made from parameters belongs to one autograd graph);
- a value made in inference mode is not served outside it (autograd refuses to
  save such a tensor for the backward pass);
- while torch.compile, torch.export or torch.jit.trace follows the forward, nothing
  is kept: the traced program computes each value where it is used, as before.

A value the same for every example is handed from node to node as a view over the
batch (``expand``: nothing copied), which :func:`broadcast` makes and remembers with
the batch-1 tensor it views; :func:`unbroadcast` gives that tensor back, so a node that
reads the view can compute once for the batch (T5's bucket of each pair of positions,
and the bias read from it, are made once a forward, not once an example) and its
gradient is summed over the batch where the value is used, as when a hand-written
model adds a ``(1, h, N, N)`` bias.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

__all__ = ["KEEP", "KEEP_BROADCAST", "broadcast", "shared", "same_key", "tracing",
           "unbroadcast"]

#: How many values of one name a runtime keeps (the newest).
KEEP = 8
#: How many views over the batch a runtime remembers the batch-1 tensor of (the newest).
KEEP_BROADCAST = 32


def same_key(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Whether two keys name the same value: tensors the same object at the same
    version (see :func:`shared`), anything else equal."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, Tensor) or isinstance(y, Tensor):
            if x is not y:
                return False
        elif x != y:
            return False
    return True


def _versioned(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """The key with each tensor's version after it (an in-place change gives a new key)."""
    out: list[Any] = []
    for x in key:
        out.append(x)
        if isinstance(x, Tensor):
            out.append(x._version)
    return tuple(out)


def tracing() -> bool:
    """Whether torch.compile, torch.export or torch.jit.trace is following the forward."""
    return bool(torch.compiler.is_compiling() or torch.jit.is_tracing())


def _tracing() -> bool:
    """Whether :func:`shared` keeps nothing: while tracing."""
    return tracing()


def shared(rt: Any, name: str, key: Callable[[], tuple[Any, ...]],
           make: Callable[[], Tensor]) -> Tensor:
    """The value ``name`` of this forward for ``key``: made by ``make()`` the first
    time, the same tensor afterwards (see the module docstring for when it is made
    again).

    Parameters
    ----------
    rt : Runtime
        The forward's runtime; its ``memo`` dict holds the values.
    name : str
        What the value is (``"rotary"``, ``"attention_mask"``).
    key : callable
        Gives everything ``make`` reads: sizes, dtypes, devices, tensors (compared by
        identity and version). Called only when the value may be kept (not while
        tracing, where a tensor's version is not a number to compare).
    make : callable
        Computes the value.

    Returns
    -------
    Tensor
        The value, shared by every node and round of the forward that asks with the
        same key.
    """
    memo = getattr(rt, "memo", None)
    if memo is None or _tracing():
        return make()
    full = _versioned(key())
    kept: list[tuple[tuple[Any, ...], Tensor]] = memo.setdefault(name, [])
    for i, (k, value) in enumerate(kept):
        if same_key(k, full):
            if value.is_inference() and not torch.is_inference_mode_enabled():
                del kept[i]  # made in inference mode: made again for autograd
                break
            return value
    value = make()
    if not value.requires_grad:
        kept.insert(0, (full, value))
        del kept[KEEP:]
    return value


def broadcast(rt: Any, one: Tensor, batch: int) -> Tensor:
    """``one (1, ...)``, the same for every example, as a view ``(batch, ...)``; the
    forward's runtime remembers ``one`` for :func:`unbroadcast` (the :data:`KEEP_BROADCAST`
    newest views, not while tracing)."""
    view = one.expand(batch, *one.shape[1:])
    memo = getattr(rt, "memo", None)
    if memo is None or batch == 1 or tracing():
        return view
    kept: list[tuple[tuple[Any, ...], Tensor]] = memo.setdefault("broadcast", [])
    kept.insert(0, ((view,), one))
    del kept[KEEP_BROADCAST:]
    return view


def unbroadcast(rt: Any, x: Tensor) -> Tensor:
    """What ``x`` holds for the whole batch at batch 1: the tensor :func:`broadcast` made
    ``x`` from (the same autograd node: its gradient is summed over the batch where it
    is read), else, for a view over the batch (stride 0) that needs no gradient, its
    first row; anything else is ``x``. Not while tracing (the traced program reads ``x``)."""
    if tracing() or x.dim() == 0 or x.shape[0] == 1 or x.stride(0) != 0:
        return x
    memo = getattr(rt, "memo", None)
    for key, one in (memo.get("broadcast", ()) if memo is not None else ()):
        if key[0] is x:
            return one
    return x if x.requires_grad else x[:1]
