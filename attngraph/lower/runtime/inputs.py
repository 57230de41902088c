"""Forward's arguments: bound to the graph's inputs and checked before any node runs.

``model(**inputs)`` takes one tensor per declared input, batch first, with
``<name>_mask`` (tokens, vectors and graph inputs; optional) and
``<name>_adjacency`` (graph inputs). Each argument is checked against its
declared type, and a failed check is a ``LoweringError`` that names the argument
(``input 'tokens_mask': ...``), points at the input's line in the spec and says
what to pass instead:

- its kind: ids are integer (``long`` or ``int32``), features float, masks and
  adjacency ``bool`` (True = a real item, an edge);
- its rank, ``1 +`` that of the type (the batch axis first), and every fixed size
  (``dim``, ``channels``, ``height``, ``width``);
- one batch size across all arguments, and one size per length symbol: inputs
  that share ``length: N``, a mask and its input, both axes of an adjacency;
- its device, the parameters' one; a float argument's dtype, the parameters' one
  (not checked under autocast);
- its values: ids below ``vocab`` (tokens) or ``classes`` (labels); masks whose
  rows are True at the real items, then False at the padding (padding is
  trailing); masks of inputs sharing a length, equal.

The value checks read the data (one host sync for all of them together). They and
the parameter checks are skipped while ``torch.compile`` traces the module; the
others read shapes and dtypes only, which a compiled module guards anyway.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

import torch
from torch import Tensor

from attngraph.errors import LoweringError, SourceLoc, did_you_mean
from attngraph.ir.graph import TensorType

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

__all__ = ["Arg", "InputBinder", "MASK_RULE"]

#: The mask convention, as the hints state it.
MASK_RULE = ("attngraph masks are bool, True at the real items and False at the padding, "
             "which comes last in each row (True ..., False ...)")

#: The spec field that sets each fixed axis of an input type (None: a length).
_FIELDS: dict[str, tuple[str | None, ...]] = {
    "vectors": (None, "dim"), "vector": ("dim",), "graph": (None, "dim"),
    "image": ("channels", "height", "width"),
}


@dataclass(frozen=True)
class Arg:
    """One tensor forward takes: its keyword, the input and port it fills, and
    the declared type it must fit."""

    name: str
    input: str
    port: str
    type: str
    t: TensorType
    loc: SourceLoc
    #: ids must lie below this (``vocab`` of tokens, ``classes`` of labels)
    high: int | None = None
    high_field: str | None = None
    #: positions: the input whose items they point at
    of: str | None = None

    def fail(self, message: str, hint: str) -> NoReturn:
        """Raise the error of this argument."""
        msg = f"input '{self.name}': {message}"
        raise LoweringError(msg, self.loc, hint)

    def shape(self) -> str:
        """The runtime shape, ``(B, N, 8)``."""
        return "(" + ", ".join(["B", *(str(d) for d in self.t.dims)]) + ")"

    def declared(self) -> str:
        """What the spec declares, ``vectors [N, 8]`` or ``mask of 'x' bool[N]``."""
        what = self.type if not self.port else f"{self.port} of '{self.input}'"
        return f"{what} {self.t}"


def _args(graph: Graph) -> list[Arg]:
    """Every argument of forward, each input followed by its ports."""
    args: list[Arg] = []
    for node in graph.inputs:
        s = node.spec
        for port, t in node.types.items():
            name = f"{node.id}_{port}" if port else node.id
            high, field = None, None
            if not port and s.type == "tokens" and s.vocab is not None:
                high, field = int(s.vocab), "vocab"
            elif not port and s.type == "labels" and s.classes is not None:
                high, field = int(s.classes), "classes"
            args.append(Arg(name, node.id, port, s.type, t, node.loc, high, field,
                            s.of if s.type == "positions" and not port else None))
    return args


def _names_clash(graph: Graph, args: list[Arg]) -> None:
    """Refuse inputs forward cannot take by keyword: ``self``, or an input named
    like another input's mask or adjacency argument."""
    ports = {a.name: a for a in args if a.port}
    for node in graph.inputs:
        if node.id == "self":
            msg = "input 'self' cannot be passed to forward: Module.__call__ takes self"
            raise LoweringError(msg, node.loc, "rename the input (e.g. 'x')")
        other = ports.get(node.id)
        if other is not None:
            msg = (f"input '{node.id}' has the name of the {other.port} argument of input "
                   f"'{other.input}' (forward takes {other.input}_{other.port}=)")
            raise LoweringError(msg, node.loc, "rename one of the two inputs")


def _check_kind(a: Arg, x: object) -> Tensor:
    """A tensor of the declared dtype kind, rank and fixed sizes."""
    if not isinstance(x, Tensor):
        a.fail(f"expected a tensor {a.shape()} ({a.declared()}), got {type(x).__name__}",
               f"pass torch.as_tensor({a.name})")
    if a.t.dtype == "long" and x.dtype not in (torch.long, torch.int32):
        a.fail(f"expected integer ids (torch.long), got {x.dtype}",
               f"pass {a.name}.long() if it holds ids; features go in an input of "
               "type vectors, vector or image")
    if a.t.dtype == "bool" and x.dtype != torch.bool:
        if a.port == "mask":
            a.fail(f"expected a bool mask (True = a real item), got {x.dtype}",
                   f"{MASK_RULE}. A 0/1 mask: pass {a.name}.bool(); an additive one (0 at "
                   f"real items, -inf at padding): {a.name} == 0; a PyTorch key_padding_mask "
                   f"(True = padding): ~{a.name}")
        a.fail(f"expected a bool adjacency (True = an edge), got {x.dtype}",
               f"a 0/1 or weighted adjacency: pass {a.name} != 0; an additive one (0 at "
               f"edges, -inf elsewhere): {a.name} == 0")
    if a.t.dtype == "float" and not x.is_floating_point():
        a.fail(f"expected float features, got {x.dtype}",
               f"pass {a.name}.float(); ids go in an input of type tokens")
    want = 1 + a.t.rank
    if x.dim() != want:
        hint = (f"the batch axis comes first: for one example pass {a.name}.unsqueeze(0)"
                if x.dim() == want - 1 else f"pass a tensor of shape {a.shape()}")
        a.fail(f"expected a {want}-D tensor {a.shape()} ({a.declared()}), got shape "
               f"{tuple(x.shape)}", hint)
    fields = _FIELDS.get(a.type, ()) if not a.port else ()
    for i, d in enumerate(a.t.dims):
        if not isinstance(d, int):
            continue  # a length known at run time (left symbolic under torch.export)
        got = int(x.shape[i + 1])
        if got != d:
            field = fields[i] if i < len(fields) else None
            where = f"axis {i + 1}" + (f" ({field})" if field else "")
            fix = f"; or set the input's {field} to {got} in the spec" if field else ""
            a.fail(f"expected shape {a.shape()} ({a.declared()}), got {tuple(x.shape)}: "
                   f"{where} is {got}, not {d}", f"pass data of shape {a.shape()}{fix}")
    return x


def _check_sizes(bound: list[tuple[Arg, Tensor]]) -> None:
    """One batch size, and one size per length symbol, across the arguments."""
    first_arg, first = bound[0]
    batch = int(first.shape[0])
    seen: dict[str, tuple[int, Arg, int]] = {}
    for a, x in bound:
        if int(x.shape[0]) != batch:
            a.fail(f"batch size {int(x.shape[0])} (axis 0), but input '{first_arg.name}' has "
                   f"batch size {batch}",
                   "every argument is batch first (B, ...): a sequence-first tensor "
                   f"(N, B, ...) needs {a.name}.transpose(0, 1)")
        for i, d in enumerate(a.t.dims):
            if not isinstance(d, str):
                continue
            got = int(x.shape[i + 1])
            prev = seen.setdefault(d, (got, a, i + 1))
            if prev[0] == got:
                continue
            size, other, axis = prev
            there = f"'{other.name}' has {size} on axis {axis}" if other is not a \
                else f"axis {axis} has {size}"
            if a.port and other.name == a.input:
                hint = (f"the {a.port} has one entry per item of '{a.input}': pass a tensor of "
                        f"shape {a.shape()} with {d} = {size}")
            elif other is a:
                hint = f"pass a square {a.port} of shape {a.shape()}"
            else:
                hint = (f"inputs that share the length {d} have equal lengths: pad them to one "
                        "length (with their masks), or give them their own length symbols "
                        "in the spec (length:)")
            a.fail(f"axis {i + 1} has {got} items, but {there}; both are the length {d}", hint)


class InputBinder:
    """Binds forward's keyword arguments to a graph's inputs (see the module doc).

    ``bind(kwargs, ref)`` returns the values keyed as the schedule reads them
    (``tokens``, ``tokens.mask``) and the padding masks by length symbol; ``ref``
    is a parameter of the model (its dtype and device), or None.
    """

    def __init__(self, graph: Graph) -> None:
        self.args = _args(graph)
        _names_clash(graph, self.args)
        self.names = frozenset(a.name for a in self.args)

    def signature(self) -> inspect.Signature | None:
        """forward's parameters: the inputs (and a graph input's adjacency) in the
        spec's order, then the optional masks (default None); None when an input's
        name cannot be a Python parameter (a keyword such as ``lambda``)."""
        required = [a.name for a in self.args if a.port != "mask"]
        optional = [a.name for a in self.args if a.port == "mask"]
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        try:
            params = [inspect.Parameter(n, kind) for n in required]
            params += [inspect.Parameter(n, kind, default=None) for n in optional]
        except ValueError:
            return None
        return inspect.Signature(params)

    def _missing(self, a: Arg) -> NoReturn:
        if a.port:
            msg = f"forward needs '{a.name}' for input '{a.input}'"
            raise LoweringError(msg, a.loc, f"pass {a.name}=<bool tensor {a.shape()}>")
        msg = f"forward needs input '{a.name}' ({a.type})"
        raise LoweringError(msg, a.loc, f"call the model with {a.name}=<tensor {a.shape()}>")

    def bind(self, kwargs: dict[str, Tensor],
             ref: Tensor | None) -> tuple[dict[str, Tensor], dict[str, Tensor], int]:
        """Checked values, padding masks by symbol, and the batch size."""
        unknown = sorted(set(kwargs) - self.names)
        if unknown:
            msg = f"forward got unknown input '{unknown[0]}'"
            raise LoweringError(msg, hint=did_you_mean(unknown[0], self.names))
        bound: list[tuple[Arg, Tensor]] = []
        for a in self.args:
            x = kwargs.get(a.name)
            if x is None:
                if a.port != "mask":
                    self._missing(a)
                continue
            bound.append((a, _check_kind(a, x)))
        checking = not torch.compiler.is_compiling()
        if bound and checking:  # (while tracing, comparing sizes would fix them)
            _check_sizes(bound)
        if checking and ref is not None:
            _check_reference(bound, ref)
        vals: dict[str, Tensor] = {}
        masks: dict[str, Tensor] = {}
        mask_of: dict[str, Arg] = {}
        same: list[tuple[Arg, Tensor, Arg, Tensor]] = []
        for a, x in bound:
            if not a.port:
                vals[a.input] = x
                continue
            vals[f"{a.input}.{a.port}"] = x
            if a.port == "mask" and a.t.rank == 2:
                # nested tokens: a sentence is real when a word of it is; the word mask
                # (B, N, W) is read by the map that runs per sentence
                masks[str(a.t.dims[0])] = x.any(-1)
                masks[str(a.t.dims[1])] = x
            elif a.port == "mask":
                sym = str(a.t.dims[0])
                if sym in masks:
                    same.append((a, x, mask_of[sym], masks[sym]))
                else:
                    masks[sym], mask_of[sym] = x, a
        for a in self.args:
            if a.port == "mask" and a.name not in kwargs:
                x = vals[a.input]
                vals[f"{a.input}.mask"] = torch.ones(x.shape[:1 + a.t.rank], dtype=torch.bool,
                                                     device=x.device)
        if checking:
            _check_values(bound, same)
            _check_positions(self.args, vals, masks)
        _pad_positions(self.args, vals, masks)
        # the batch size as the tensor gives it: an int, or a symbol under torch.export
        batch = bound[0][1].shape[0] if bound else 1
        return vals, masks, batch


def _check_reference(bound: list[tuple[Arg, Tensor]], ref: Tensor) -> None:
    """Arguments on the parameters' device; float ones in their dtype (outside autocast)."""
    for a, x in bound:
        if x.device != ref.device:
            a.fail(f"is on {x.device}, but the model's parameters are on {ref.device}",
                   f"move one to the other: {a.name}.to('{ref.device}'), or "
                   f"model.to('{x.device}')")
        if (x.is_floating_point() and x.dtype != ref.dtype
                and not torch.is_autocast_enabled(x.device.type)):
            a.fail(f"is {x.dtype}, but the model's parameters are {ref.dtype}",
                   f"convert one to the other: {a.name}.to({ref.dtype}), or "
                   f"model.to({x.dtype})")


def _check_positions(args: list[Arg], vals: dict[str, Tensor],
                     masks: dict[str, Tensor]) -> None:
    """Positions point at real items of their input: 0 <= p < that example's length
    (checked at the positions' own real entries)."""
    for a in args:
        if a.port or a.type != "positions" or a.input not in vals:
            continue
        x = vals[a.input]  # (B, T)
        sym = a.t.index_of
        items = masks.get(str(sym))
        length = items.sum(-1) if items is not None else torch.full(
            (x.shape[0],), vals[str(a.of)].shape[1], device=x.device)
        own = masks.get(str(a.t.dims[0]), torch.ones_like(x, dtype=torch.bool))
        bad = ((x < 0) | (x >= length[:, None])) & own
        if bool(bad.any()):
            b, t = (int(v) for v in bad.nonzero()[0])
            a.fail(f"position {int(x[b, t])} at example {b}, entry {t}, is past the "
                   f"{int(length[b])} real items of '{a.of}'",
                   f"positions count from 0 and point at real items of '{a.of}' (its mask); "
                   "padded entries of the positions (their own mask) are not read")


def _pad_positions(args: list[Arg], vals: dict[str, Tensor],
                   masks: dict[str, Tensor]) -> None:
    """A positions input's padded entries (its own mask) become position 0: only the
    real entries are checked and mean anything, so whatever padding holds (-1, -100, a
    past item) never indexes outside the items (a gather at a padded entry reads item 0)."""
    for a in args:
        if a.port or a.type != "positions" or a.input not in vals:
            continue
        own = masks.get(str(a.t.dims[0]))
        if own is not None:
            vals[a.input] = vals[a.input].masked_fill(~own, 0)  # (B, T)


def _check_nested_mask(a: Arg, x: Tensor) -> None:
    """A nested mask (B, N, W): each sentence's padding trails its words, and padded
    sentences (no real word) trail the document's."""
    if x.shape[2] > 1 and not torch.equal(x, x.cummin(2).values):
        b, s = (int(v) for v in (x[..., 1:] & ~x[..., :-1]).any(-1).nonzero()[0])
        a.fail(f"sentence {s} of example {b} has a real word after padding",
               f"{MASK_RULE}; in nested tokens, for the words of each sentence")
    real = x.any(-1)
    if real.shape[1] > 1 and not torch.equal(real, real.cummin(1).values):
        b = int((real[:, 1:] & ~real[:, :-1]).any(-1).nonzero()[0, 0])
        a.fail(f"example {b} has a sentence with words after a sentence without any",
               "padded sentences (no real word) come last in each document")


def _check_values(bound: list[tuple[Arg, Tensor]],
                  same: list[tuple[Arg, Tensor, Arg, Tensor]]) -> None:
    """Ids in range, masks trailing, shared masks equal (each reads the data once)."""
    for a, x in bound:
        if a.high is not None and x.numel():
            lo_t, hi_t = torch.aminmax(x)
            lo, hi = int(lo_t), int(hi_t)
            if lo < 0 or hi >= a.high:
                a.fail(f"ids must lie in 0..{a.high - 1} ({a.high_field} = {a.high}), found "
                       f"ids from {lo} to {hi}",
                       f"every id, padding included, indexes a table of {a.high_field} "
                       f"rows: give padded items an id below {a.high} (the mask hides "
                       f"them), or raise {a.high_field} in the spec")
        elif a.port == "mask" and x.dim() == 3:
            _check_nested_mask(a, x)
        elif a.port == "mask" and x.shape[1] > 1 and not torch.equal(x, x.cummin(1).values):
            # a trailing-padded row never rises from False to True
            r = int((x[:, 1:] & ~x[:, :-1]).any(-1).nonzero()[0, 0])
            row = "".join("1" if v else "0" for v in x[r, :16].tolist())
            more = "..." if x.shape[1] > 16 else ""
            a.fail(f"row {r} ({row}{more}) has a real item after padding",
                   f"{MASK_RULE}. A PyTorch key_padding_mask (True = padding) is the "
                   f"inverse: pass ~{a.name}. Left padding is not supported: pad at the end")
    for a, x, other, m in same:
        if not torch.equal(x, m):
            a.fail(f"differs from '{other.name}', though inputs '{a.input}' and "
                   f"'{other.input}' share the length {a.t.dims[0]}",
                   "inputs that share a length share its padding: pass equal masks, or "
                   "give the inputs their own length symbols in the spec (length:)")
