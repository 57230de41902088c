"""Python expressions that rebuild a lowered module's objects: the literal arguments.

:class:`Literals` writes, for a node module of a compiled model, the expression
that builds an equal one in a standalone file: ``nn.Linear(8, 8, bias=True)`` for a
torch module, ``ScaledDot(scale=0.35355339059327373, pairs=False, ...)`` for a
lowering class (its attributes, parameters and submodules as keyword arguments;
see :mod:`attngraph.lower.export.codegen_bundle`), ``Step("q", "queries", ...)`` for a
named tuple. Parameters and persistent buffers are made empty, to be filled by
``load_state_dict``; a buffer the state dict does not hold is written out. A module
or parameter met a second time (``share``, ``tie``) and a module held outside the
module tree (a ``prepare`` node's owner) become statements run after construction
(:attr:`Literals.fixups`), so the state dict keys are those of the compiled model.

Expressions are :class:`~attngraph.lower.export.codegen_text.Doc` trees, rendered on one
line when they fit and one item per line otherwise.
"""

from __future__ import annotations

import dataclasses
import inspect
import keyword
import math
import unicodedata
from typing import Any

import torch
from torch import Tensor, nn

from attngraph.lower.export.codegen_bundle import Bundle
from attngraph.lower.export.codegen_source import is_local
from attngraph.lower.export.codegen_text import Doc, Pair, flat, quote
from attngraph.lower.runtime.names import Mangler

__all__ = ["Literals", "ref"]

#: Attributes every nn.Module has (not the node's own).
_BASE = frozenset(nn.Module().__dict__) | {"training"}
#: Names ``self.<a>.<b>`` cannot reach by attribute (a ModuleDict's methods).
_UNSAFE = frozenset(dir(nn.ModuleDict()))
#: Largest tensor written out as a literal (a buffer the state dict does not hold).
MAX_LITERAL = 65536


def _safe(part: str) -> bool:
    """``part`` can follow a dot: an identifier as Python reads it, no keyword, no
    ModuleDict method, no ``__x`` (a class would mangle it)."""
    return part.isidentifier() and not keyword.iskeyword(part) and part not in _UNSAFE \
        and not part.startswith("__") and unicodedata.normalize("NFKC", part) == part


def ref(path: str, root: str = "self") -> str:
    """The expression for a submodule or parameter at ``path`` of ``root``.

    >>> ref("nodes.q.weight"), ref("nodes.@keys.weight")
    ('self.nodes.q.weight', "self.get_submodule('nodes.@keys').weight")
    """
    if not path:
        return root
    parts = path.split(".")
    if all(_safe(p) for p in parts):
        return ".".join([root, *parts])
    head, last = parts[:-1], parts[-1]
    base = f"{root}.get_submodule({quote('.'.join(head))})" if head else root
    return f"{base}.{last}" if _safe(last) else f"getattr({base}, {quote(last)})"


def _float(x: float) -> str:
    if math.isnan(x):
        return 'float("nan")'
    if math.isinf(x):
        return 'float("inf")' if x > 0 else '-float("inf")'
    return repr(x)


class Literals:
    """Writes the expressions that rebuild a model's node modules (module doc).

    ``model`` is the compiled model (its module tree gives the canonical path of
    every module and parameter); names come from and go into ``bundle``.
    """

    def __init__(self, model: nn.Module, bundle: Bundle, *,
                 classes: dict[str, str] | None = None) -> None:
        self.bundle = bundle
        #: the class to build the module at a path with, where not its own
        self.classes = classes or {}
        self.home: dict[int, str] = {}
        for name, m in model.named_modules():
            self.home.setdefault(id(m), name)
        for name, p in model.named_parameters():
            self.home.setdefault(id(p), name)
        #: (target path, value expression) set after construction, in order
        self.fixups: list[tuple[str, Doc | Pair | str]] = []
        self._refs_ok = False
        #: a schedule's steps, each written once as a local of ``__init__``: value ->
        #: its name; ``pending`` the (name, expression) not yet written out
        self.steps: dict[Any, str] = {}
        self.pending: list[tuple[str, Doc | Pair | str]] = []
        #: the names of ``__init__``'s locals (the steps)
        self.locals = Mangler(bundle.names)

    # -- modules ----------------------------------------------------------------

    def module(self, m: nn.Module, path: str) -> Doc | Pair | str:
        """The expression that builds ``m``, which lives at ``path`` of the model."""
        home = self.home.get(id(m))
        if home is not None and home != path:
            self.fixups.append((path, ref(home)))
            return "None"
        cls = type(m)
        if cls.__module__.split(".")[0] == "torch":
            return self._torch(m, path)
        if isinstance(m, (nn.ModuleDict, nn.ModuleList, nn.Sequential)):
            return self._container(self.bundle.require(cls), m, path)
        return self._configured(m, path)

    def _children(self, m: nn.Module, path: str) -> list[tuple[str, Doc | Pair | str]]:
        return [(k, self.module(c, f"{path}.{k}") if c is not None else "None")
                for k, c in m._modules.items()]

    def _container(self, name: str, m: nn.Module, path: str) -> Doc:
        kids = self._children(m, path)
        if isinstance(m, nn.ModuleDict):
            return Doc(f"{name}({{", [_kv(repr(k), v) for k, v in kids], "})")
        return Doc(f"{name}([" if isinstance(m, nn.ModuleList) else f"{name}(",
                   [v for _, v in kids], "])" if isinstance(m, nn.ModuleList) else ")")

    def _torch(self, m: nn.Module, path: str) -> Doc:
        nn_name = self.bundle.add_import("torch", "nn", "nn")
        cls = type(m)
        name = cls.__name__
        if getattr(nn, name, None) is not cls:
            msg = f"cannot write a {cls.__module__}.{name} into a standalone file"
            raise TypeError(msg)
        ctor = f"{nn_name}.{name}("
        self._params_moved(m, path)
        if isinstance(m, (nn.ModuleDict, nn.ModuleList, nn.Sequential)):
            return self._container(f"{nn_name}.{name}", m, path)
        if isinstance(m, nn.Linear):
            args = [str(m.in_features), str(m.out_features), f"bias={m.bias is not None}"]
        elif isinstance(m, nn.Embedding):
            args = [str(m.num_embeddings), str(m.embedding_dim)]
            if m.padding_idx is not None:
                args.append(f"padding_idx={m.padding_idx}")
            if m.max_norm is not None or m.scale_grad_by_freq or m.sparse:
                msg = "cannot write an nn.Embedding with max_norm, scale_grad_by_freq or sparse"
                raise TypeError(msg)
        elif isinstance(m, (nn.Conv1d, nn.Conv2d)):
            args = [str(m.in_channels), str(m.out_channels), f"kernel_size={m.kernel_size!r}",
                    f"stride={m.stride!r}", f"padding={m.padding!r}",
                    f"dilation={m.dilation!r}", f"groups={m.groups}",
                    f"bias={m.bias is not None}", f"padding_mode={m.padding_mode!r}"]
        elif isinstance(m, nn.LayerNorm):
            args = [repr(tuple(m.normalized_shape)), f"eps={m.eps!r}",
                    f"elementwise_affine={m.elementwise_affine}",
                    f"bias={getattr(m, 'bias', None) is not None}"]
        elif isinstance(m, nn.Dropout):
            args = [f"p={m.p!r}"]
        elif isinstance(m, (nn.GRUCell, nn.LSTMCell, nn.RNNCell)):
            args = [str(m.input_size), str(m.hidden_size), f"bias={m.bias}"]
            if isinstance(m, nn.RNNCell):
                args.append(f"nonlinearity={m.nonlinearity!r}")
        elif not m._parameters and not m._modules:
            args = _stateless(m)
        else:
            msg = f"cannot write an nn.{name} ({m.extra_repr()}) into a standalone file"
            raise TypeError(msg)
        return Doc(ctor, list(args), ")")

    def _params_moved(self, m: nn.Module, path: str) -> None:
        """A torch module's parameters that live elsewhere (``tie``): set afterwards."""
        for k, p in m._parameters.items():
            if p is not None and self.home.get(id(p)) != f"{path}.{k}":
                self.fixups.append((f"{path}.{k}", ref(self.home[id(p)])))

    def _configured(self, m: nn.Module, path: str) -> Doc:
        """A lowering class's instance, built by keyword: attributes, parameters,
        submodules, then buffers (``buffers={name: (tensor, persistent)}``)."""
        name = self.classes.get(path) or self.bundle.require(type(m))
        items: list[Doc | Pair | str] = []
        for k, v in m.__dict__.items():
            if k in _BASE or (k == "_locs" and path in self.classes):
                # (a body's node locations serve only the interpreter's errors; the
                # generated class runs the body itself)
                continue
            try:
                items.append(_kv(k, self.value(v), eq=True))
            except _NeedsRefs:
                self._refs_ok = True
                try:
                    self.fixups.append((f"{path}.{k}", self.value(v)))
                finally:
                    self._refs_ok = False
        for k, p in m._parameters.items():
            if p is None:
                items.append(f"{k}=None")
            elif self.home.get(id(p)) != f"{path}.{k}":
                # made here (the parameter keeps its place), then set to the owner's
                items.append(_kv(k, self.parameter(p), eq=True))
                self.fixups.append((f"{path}.{k}", ref(self.home[id(p)])))
            else:
                items.append(_kv(k, self.parameter(p), eq=True))
        kids = [_kv(k, child, eq=True) for k, child in self._children(m, path)]
        if any(isinstance(c, (nn.ModuleDict, nn.ModuleList)) for c in m._modules.values()):
            items = kids + items  # what a block holds first, its schedule after
        else:
            items += kids
        if m._buffers:
            bufs = [_kv(repr(k), Doc("(", [self.buffer(b, k not in m._non_persistent_buffers_set),
                                           str(k not in m._non_persistent_buffers_set)], ")"))
                    for k, b in m._buffers.items() if b is not None]
            items.append(Doc("buffers={", bufs, "}"))
        return Doc(f"{name}(", items, ")")

    # -- tensors ------------------------------------------------------------------

    def _torch_name(self) -> str:
        return self.bundle.add_import("torch", None, "torch")

    def _dtype(self, t: Tensor) -> str:
        return "" if t.dtype == torch.float32 else f", dtype={t.dtype}"

    def parameter(self, p: Tensor) -> str:
        """An empty parameter of ``p``'s shape (its values come from the state dict)."""
        nn_name = self.bundle.add_import("torch", "nn", "nn")
        shape = ", ".join(str(s) for s in p.shape) or "()"
        grad = "" if p.requires_grad else ", requires_grad=False"
        return f"{nn_name}.Parameter({self._torch_name()}.empty({shape}{self._dtype(p)}){grad})"

    def buffer(self, b: Tensor, persistent: bool) -> Doc | str:
        """A persistent buffer empty (the state dict fills it), another written out."""
        if persistent:
            shape = ", ".join(str(s) for s in b.shape) or "()"
            return f"{self._torch_name()}.empty({shape}{self._dtype(b)})"
        return self.tensor(b)

    def tensor(self, t: Tensor) -> Doc | str:
        """``torch.tensor([...], dtype=...)``: the exact values of a small tensor."""
        if t.numel() > MAX_LITERAL:
            msg = f"a tensor of {t.numel()} elements outside the state dict is too large to write"
            raise TypeError(msg)
        values = t.detach().cpu().tolist()
        conv = _float if t.is_floating_point() else repr
        body = _nested(values, conv)
        return Doc(f"{self._torch_name()}.tensor(", [body, f"dtype={t.dtype}"], ")")

    # -- plain values -----------------------------------------------------------------

    def value(self, v: Any) -> Doc | Pair | str:
        """The literal of a plain attribute value."""
        if v is None or isinstance(v, (bool, int, str)):
            return repr(v)
        if isinstance(v, float):
            return _float(v)
        if isinstance(v, torch.dtype):
            return f"{self._torch_name()}.{str(v).split('.')[-1]}"
        if isinstance(v, torch.device):
            return f'{self._torch_name()}.device("{v}")'
        if isinstance(v, torch.Size):
            return self.value(tuple(v))
        if isinstance(v, Tensor):
            return self.tensor(v)
        if isinstance(v, nn.Module):
            if not self._refs_ok:
                raise _NeedsRefs
            if id(v) not in self.home:
                msg = f"a {type(v).__name__} held outside the model cannot be written"
                raise TypeError(msg)
            return ref(self.home[id(v)])
        if type(v).__name__ == "SourceLoc":
            return repr(str(v))  # where an error points: the file's line, as text
        if isinstance(v, tuple) and hasattr(v, "_fields"):
            return self._named_tuple(v)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            fields = [f for f in dataclasses.fields(v) if f.init and not _default(f, v)]
            return Doc(f"{self.bundle.require(type(v))}(",
                       [_kv(f.name, self.value(getattr(v, f.name)), eq=True) for f in fields], ")")
        if isinstance(v, (tuple, list)):
            elems = [self.value(x) for x in v]
            atoms = all(isinstance(i, str) for i in elems)  # names, numbers: packed
            if isinstance(v, list):
                return Doc("[", elems, "]", fill=atoms)
            return Doc("(", elems, ")", single_comma=True, fill=atoms)
        if isinstance(v, dict):
            return Doc("{", [_kv(flat(self.value(k)), self.value(x)) for k, x in v.items()], "}")
        if isinstance(v, (set, frozenset)):
            members = sorted((self.value(x) for x in v), key=flat)
            if not members:
                return f"{type(v).__name__}()"
            return Doc(f"{type(v).__name__}({{", members, "})")
        if callable(v):
            return self._callable(v)
        msg = f"cannot write a value of type {type(v).__name__} into a standalone file"
        raise TypeError(msg)

    def _named_tuple(self, v: Any) -> Doc | str:
        """``Name(a, b)`` when short and plain, else ``Name(field=...)``; a schedule's
        ``Step`` is a local named after its node (its loops list it several times)."""
        name = self.bundle.require(type(v))
        scalar = all(x is None or isinstance(x, (bool, int, float, str)) for x in v)
        is_step = type(v).__name__ == "Step" and is_local(type(v).__module__)
        if is_step or (scalar and len(v) <= 3):
            doc = Doc(f"{name}(", [self.value(x) for x in v], ")")
        else:
            doc = Doc(f"{name}(", [_kv(f, self.value(x), eq=True)
                                   for f, x in zip(v._fields, v, strict=True)], ")")
        if not is_step:
            return doc
        if v not in self.steps:
            self.locals.reserve(*self.bundle.names)  # what the bundle holds by now
            var = self.locals.fresh(f"step_{v[0]}")
            self.bundle.reserve(var)
            self.steps[v] = var
            self.pending.append((var, doc))
        return self.steps[v]

    def _callable(self, v: Any) -> str:
        import torch.nn.functional as F

        name = getattr(v, "__name__", "")
        if getattr(torch, name, None) is v:
            return f"{self._torch_name()}.{name}"
        if getattr(F, name, None) is v:
            return f"{self.bundle.add_import('torch.nn.functional', None, 'F')}.{name}"
        return self.bundle.require(v)


def _stateless(m: nn.Module) -> list[str]:
    """The constructor arguments of a parameter-free torch module (an activation), read
    back from the attributes of the same names (those not at their default)."""
    args = []
    for p in list(inspect.signature(type(m).__init__).parameters.values())[1:]:
        if p.name in ("device", "dtype") or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if not hasattr(m, p.name):
            msg = f"cannot write an nn.{type(m).__name__}: its {p.name} is not an attribute"
            raise TypeError(msg)
        value = getattr(m, p.name)
        if p.default is inspect.Parameter.empty or value != p.default:
            args.append(f"{p.name}={value!r}")
    return args


class _NeedsRefs(Exception):
    """A value holds a module: it is set after construction, by reference."""


def _default(f: dataclasses.Field[Any], v: Any) -> bool:
    """The field holds its default (left out of the constructor call)."""
    value = getattr(v, f.name)
    if f.default is not dataclasses.MISSING:
        return bool(type(value) is type(f.default) and value == f.default)
    return False


def _kv(k: str, v: Doc | Pair | str, *, eq: bool = False) -> Pair:
    return Pair(f"{k}=" if eq else f"{k}: ", v)


def _nested(values: Any, conv: Any) -> Doc | str:
    if isinstance(values, list):
        leaf = not values or not isinstance(values[0], list)
        return Doc("[", [conv(x) if leaf else _nested(x, conv) for x in values], "]", fill=leaf)
    return conv(values)
