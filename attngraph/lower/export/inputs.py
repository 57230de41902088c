"""What an exported program takes: every argument of the model's forward, the optional
padding masks included, in the model's order.

A ``torch.export`` program and an ONNX model have no optional inputs: an argument is
either an input of the program or a constant baked into it. A program traced without
masks computes as if every item were real, and a padded batch through it is silently
wrong; so the programs take every ``<input>_mask`` the model takes (bool, True at the
real items, the padding after them), and a batch without padding passes all-True
masks. :func:`with_masks` adds padded masks to an example (the first example of the
batch full, the others shorter), :func:`program_inputs` says what each input is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch import Tensor

__all__ = ["ProgramInput", "full_masks", "program_inputs", "with_masks"]

#: torch's dtype names as the programs' users know them (numpy's, ONNX's)
_DTYPES = {"long": "int64", "float": "float32", "bool": "bool"}


@dataclass(frozen=True)
class ProgramInput:
    """One input of an exported program: its name, dtype and shape (``(B, N)``)."""

    name: str
    dtype: str
    shape: str
    #: the input this is the padding mask of (None for the model's own inputs)
    mask_of: str | None = None

    def __str__(self) -> str:
        what = f"{self.name}: {self.dtype} {self.shape}"
        return f"{what} (True = a real item of {self.mask_of})" if self.mask_of else what


def program_inputs(model: Any) -> list[ProgramInput]:
    """The inputs of ``model``'s exported programs, in the order they take them.

    Examples
    --------
    >>> import attngraph
    >>> model = attngraph.compile("specs/global_attention.yaml")
    >>> [str(i) for i in program_inputs(model)]
    ['tokens: int64 (B, N)', 'tokens_mask: bool (B, N) (True = a real item of tokens)']
    """
    args = {a.name: a for a in model.binder.args}
    out = []
    for name in model._positional or list(args):
        a = args[name]
        out.append(ProgramInput(name, _DTYPES.get(a.t.dtype, a.t.dtype), a.shape(),
                                a.input if a.port == "mask" else None))
    return out


def _lengths(n: int, batch: int, generator: torch.Generator) -> Tensor:
    """Per example a real length in 1..n: the first example full, then shorter ones."""
    import torch

    drawn = torch.randint(1, max(n, 2), (batch,), generator=generator).clamp(max=n)
    drawn[0] = n
    return drawn


def with_masks(model: Any, inputs: dict[str, Tensor], *,
               generator: torch.Generator | None = None) -> dict[str, Tensor]:
    """``inputs`` with a padding mask for every input that takes one (inputs that
    share a length share their mask), and positions that point at real items.

    A mask over nested items (sentences of words, ``bool[S, W]``) pads whole
    sentences after the real ones and words after the real words of each sentence.
    """
    import torch

    g = generator if generator is not None else torch.Generator().manual_seed(0)
    out = dict(inputs)
    by_symbol: dict[tuple[Any, ...], Tensor] = {}
    for a in model.binder.args:
        if a.port != "mask" or a.input not in inputs:
            continue
        x = inputs[a.input]
        sizes = tuple(x.shape[:1 + a.t.rank])
        key = (*a.t.dims, sizes)
        if key not in by_symbol:
            by_symbol[key] = _mask(sizes, g)
        out[a.name] = by_symbol[key]
    for a in model.binder.args:  # positions point at real items of their input
        items = out.get(f"{a.of}_mask") if a.of is not None and not a.port else None
        if items is not None and items.dim() == 2:
            out[a.input] = inputs[a.input] % items.sum(-1).clamp(min=1)[:, None]
    return out


def _mask(sizes: tuple[int, ...], g: torch.Generator) -> Tensor:
    """A trailing-padding mask of shape ``sizes`` (batch first, one or two lengths)."""
    import torch

    batch, n = sizes[0], sizes[1]
    real = torch.arange(n)[None, :] < _lengths(n, batch, g)[:, None]  # (B, N)
    if len(sizes) == 2:
        return real
    w = sizes[2]
    words = torch.arange(w)[None, None, :] < torch.stack(
        [_lengths(w, n, g) for _ in range(batch)])[:, :, None]  # (B, N, W)
    return words & real[:, :, None]


def full_masks(model: Any, inputs: dict[str, Tensor]) -> dict[str, Tensor]:
    """``inputs`` with an all-True mask for every mask it lacks: what a program takes
    for a batch without padding (the same as the model without masks)."""
    import torch

    out = dict(inputs)
    for a in model.binder.args:
        if a.port == "mask" and a.name not in out and a.input in inputs:
            x = inputs[a.input]
            out[a.name] = torch.ones(x.shape[:1 + a.t.rank], dtype=torch.bool)
    return out
