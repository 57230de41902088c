"""External memory: the ``memory``, ``write`` and ``address`` kinds.

As in the Neural Turing Machine (Graves et al., 2014). A memory is ``S`` slots of
``width`` numbers per batch element. It is read by ordinary attention (the
``cosine`` scorer, β·cos(q, k), then a softmax over slots and a readout), and
written by erase/add heads (:class:`Write`). :class:`Address` turns content
weights into location-based ones: interpolation with the previous weights, a
circular shift, and sharpening.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.lower.rules.masks import masked_softmax, padding_mask
from attngraph.lower.runtime.module import LowerCtx, NodeModule, Runtime

__all__ = [
    "Memory", "Write", "Address", "write_memory", "circular_shift", "sharpen",
    "ntm_address", "CONSTANT_INIT", "MemoryNode", "WriteNode", "AddressNode",
]

#: Contents of every slot with ``init: constant`` (small, so cosine reads are defined).
CONSTANT_INIT = 1e-6
#: Floor of shifted weights before sharpening, so log w (and its gradient) is finite.
_FLOOR = 1e-30


class Memory(nn.Module):
    """Initial memory ``[B, S, width]``: learned, zeros, or a small constant.

    Parameters
    ----------
    slots, width : int
        Number of slots ``S`` and numbers per slot.
    init : {"learned", "zeros", "constant"}
        ``learned``: one parameter ``[S, width]`` shared by the batch (initialised
        uniformly in ±1/√width); ``constant``: every entry :data:`CONSTANT_INIT`.
    """

    def __init__(self, slots: int, width: int,
                 init: Literal["learned", "zeros", "constant"] = "constant") -> None:
        super().__init__()
        self.slots, self.width, self.init = int(slots), int(width), init
        self.initial: Tensor
        if init == "learned":
            bound = 1.0 / self.width ** 0.5
            self.initial = nn.Parameter(torch.empty(self.slots, self.width).uniform_(-bound, bound))
        else:
            fill = CONSTANT_INIT if init == "constant" else 0.0
            # a buffer, so the contents follow .to(device, dtype); not saved in state dicts
            self.register_buffer("initial", torch.full((self.slots, self.width), fill),
                                 persistent=False)

    def extra_repr(self) -> str:
        return f"slots={self.slots}, width={self.width}, init={self.init}"

    def forward(self, batch_size: int) -> Tensor:
        """The initial memory ``[batch_size, S, width]``."""
        return self.initial.unsqueeze(0).expand(batch_size, -1, -1)  # (B, S, width)


def write_memory(memory: Tensor, weights: Tensor, erase: Tensor, add: Tensor) -> Tensor:
    """NTM write: ``M' = M ⊙ (1 - w eᵀ) + w aᵀ`` with ``e = sigmoid(erase)``.

    Parameters
    ----------
    memory : Tensor
        ``[B, S, width]``.
    weights : Tensor
        ``[B, S]``: write weights over slots (a softmax).
    erase : Tensor
        ``[B, width]``: erase logits; ``+inf`` erases fully, ``-inf`` keeps.
    add : Tensor
        ``[B, width]``: the vector added where the head writes.

    Returns
    -------
    Tensor
        The new memory ``[B, S, width]``.
    """
    w = weights.unsqueeze(-1)  # (B, S, 1)
    e = torch.sigmoid(erase).unsqueeze(-2)  # (B, 1, width)
    a = add.unsqueeze(-2)  # (B, 1, width)
    return memory * (1 - w * e) + w * a


def circular_shift(weights: Tensor, shift: Tensor, mask: Tensor | None = None) -> Tensor:
    """Circular convolution of weights ``[B, S]`` with a shift distribution ``[B, 2n+1]``.

    With a padding ``mask [B, S]``, each row wraps around its real slots only and its
    padded slots get 0.

    ``shift[:, k]`` is the probability of moving by ``k - n`` slots:
    ``w̃_i = Σ_k shift_k · w_{(i - (k - n)) mod S}``; a shift of +1 moves every
    weight to the next slot (``torch.roll(w, 1)``).
    """
    n = (shift.shape[-1] - 1) // 2
    out = torch.zeros_like(weights)
    if mask is not None:  # wrap around each row's real slots, not its padding
        length = mask.sum(-1, keepdim=True).clamp(min=1)  # (B, 1)
        i = torch.arange(weights.shape[-1], device=weights.device)[None, :]
        for k in range(shift.shape[-1]):
            src = torch.remainder(i - (k - n), length)  # (B, S)
            out = out + shift[:, k:k + 1] * weights.gather(-1, src)
        return out * mask.to(out.dtype)
    for k in range(shift.shape[-1]):
        out = out + shift[:, k:k + 1] * torch.roll(weights, k - n, dims=-1)
    return out


def sharpen(weights: Tensor, gamma: Tensor, mask: Tensor | None = None) -> Tensor:
    """``w^γ / Σ w^γ`` over the last axis (the real slots of ``mask``), ``gamma [B] >= 1``.

    Computed as ``softmax(γ · log w)``, which cannot underflow to 0/0 for large γ.
    """
    logits = gamma.unsqueeze(-1) * weights.clamp_min(_FLOOR).log()
    if mask is None:
        return torch.softmax(logits, -1)
    return masked_softmax(logits, mask)


def ntm_address(content: Tensor, prev: Tensor, gate: Tensor, shift: Tensor,
                gamma: Tensor, mask: Tensor | None = None) -> Tensor:
    """NTM location addressing from explicit parameters.

    Parameters
    ----------
    content, prev : Tensor
        ``[B, S]`` content weights (this step) and the head's previous weights.
    gate : Tensor
        ``[B]`` interpolation gate in ``[0, 1]``; 1 keeps the content weights.
    shift : Tensor
        ``[B, 2n+1]`` distribution over shifts ``-n..n``.
    gamma : Tensor
        ``[B]`` sharpening exponent, ``>= 1``.
    mask : Tensor, optional
        ``[B, S]`` padding of the slots (True = real): shifts wrap around the real
        slots and padded ones get no weight.

    Returns
    -------
    Tensor
        ``[B, S]`` weights summing to one.
    """
    g = gate.unsqueeze(-1)  # (B, 1)
    wg = g * content + (1 - g) * prev  # (B, S)
    return sharpen(circular_shift(wg, shift, mask), gamma, mask)


class Address(nn.Module):
    """NTM location addressing whose gate, shift and sharpening come from a controller.

    A linear map of the control vector ``[B, d]`` gives ``1 + (2·shifts + 1) + 1``
    numbers: the gate ``g = sigmoid(.)``, the shift distribution ``softmax(.)`` and
    the sharpening ``γ = 1 + softplus(.)``; then :func:`ntm_address`.
    """

    def __init__(self, control_dim: int, shifts: int = 1) -> None:
        super().__init__()
        self.shifts = int(shifts)
        self.proj = nn.Linear(int(control_dim), 2 * self.shifts + 3)

    def extra_repr(self) -> str:
        return f"shifts={self.shifts}"

    def forward(self, content: Tensor, prev: Tensor, control: Tensor,
                mask: Tensor | None = None) -> Tensor:
        """``content [B, S]``, ``prev [B, S]``, ``control [B, d]`` -> weights ``[B, S]``."""
        p = self.proj(control)  # (B, 2n+3)
        gate = torch.sigmoid(p[:, 0])
        shift = torch.softmax(p[:, 1:-1], -1)
        gamma = 1 + F.softplus(p[:, -1])
        return ntm_address(content, prev, gate, shift, gamma, mask)


class Write(nn.Module):
    """The erase/add write head as a module (no parameters); see :func:`write_memory`."""

    def forward(self, memory: Tensor, weights: Tensor, erase: Tensor, add: Tensor) -> Tensor:
        """``[B, S, width]`` memory after one write."""
        return write_memory(memory, weights, erase, add)


# --- lowering rules --------------------------------------------------------------------


class MemoryNode(Memory):
    """A ``memory`` node: the initial slots, batched like ``from`` (or the inputs)."""

    def __init__(self, ctx: LowerCtx) -> None:
        s = ctx.spec
        super().__init__(s.slots, s.width, s.init)

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:  # type: ignore[override]
        ref = x.get("from")
        return super().forward(rt.batch if ref is None else ref.shape[0])  # (B, S, width)


class WriteNode(NodeModule):
    """A ``write`` node: :func:`write_memory` on its ``memory``, ``weights``, ``erase``, ``add``."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__()

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:
        return write_memory(x["memory"], x["weights"], x["erase"], x["add"])  # (B, S, width)


class AddressNode(Address):
    """An ``address`` node: gate, shift and sharpening predicted from ``control``."""

    def __init__(self, ctx: LowerCtx) -> None:
        super().__init__(int(ctx.t("control").dims[0]), ctx.spec.shifts)
        self.ctype = ctx.t("content")

    def forward(self, x: dict[str, Tensor], rt: Runtime) -> Tensor:  # type: ignore[override]
        mask = padding_mask(rt, self.ctype)  # slots that are padded items
        return super().forward(x["content"], x["prev"], x["control"], mask)  # (B, S)
