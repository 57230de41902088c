"""Checkpoint tensors onto a compiled spec's parameters, through a name map.

:func:`map_tensors` expands each rule of a :class:`~attngraph.realmodels.names.NameMap`
over the layers (``{i}`` = 0 … layers − 1), reads the tensor (or its fallback),
applies the rule's transforms (transpose, the rotary halves-to-pairs permutation,
split) and checks every result against the parameter's shape (a tensor fills a
parameter of its shape with leading axes of size one: a ``param`` node's). It refuses, each with
both names and both shapes:

- a tensor the map names that the checkpoint lacks (``missing``);
- a checkpoint tensor no rule reads and ``ignore`` does not list (``extra``);
- a parameter of the spec that no rule fills (``unfilled``);
- a tensor whose shape, after its transforms, is not the parameter's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from attngraph.errors import SourceLoc, TrainingError
from attngraph.realmodels.names import NameMap, TensorRule, pattern

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["map_tensors", "strip_prefixes"]


def _shape(t: Tensor | tuple[int, ...]) -> str:
    dims = t if isinstance(t, tuple) else tuple(t.shape)
    return "(" + ", ".join(str(n) for n in dims) + ")"


def strip_prefixes(tensors: Mapping[str, Tensor], prefixes: list[str]) -> dict[str, Tensor]:
    """The checkpoint's names without the first of ``prefixes`` each starts with."""
    out = {}
    for name, t in tensors.items():
        short = next((name[len(p):] for p in prefixes if p and name.startswith(p)), name)
        out[short] = t
    return out


def _expand(template: str, i: int | None) -> str:
    return template if i is None else template.replace("{i}", str(i))


def _permute_halves(w: Tensor, heads: int) -> Tensor:
    """Rows per head from the halves layout (f, f + d/2 rotate together) to pairs (2f, 2f+1)."""
    rows = w.shape[0]
    hd = rows // heads
    rest = tuple(w.shape[1:])
    return w.reshape(heads, 2, hd // 2, *rest).transpose(1, 2).reshape(rows, *rest)


def _apply(rule: TensorRule, t: Tensor, dims: Mapping[str, int], src: str,
           where: SourceLoc) -> list[Tensor]:
    """The tensors ``rule`` makes of ``t``, one per target."""
    if rule.transpose:
        if t.dim() != 2:
            msg = f"tensor '{src}' {_shape(t)} is not a matrix, but the name map transposes it"
            raise TrainingError(msg, where, "drop transpose: true from its rule")
        t = t.t()
    if rule.heads is not None:
        h = dims.get(rule.heads)
        if h is None or t.shape[0] % h or (t.shape[0] // h) % 2:
            msg = (f"tensor '{src}' {_shape(t)}: its {t.shape[0]} rows are not {rule.heads} "
                   f"= {h} heads of an even size")
            raise TrainingError(msg, where, "check the configuration's head counts")
        t = _permute_halves(t, h)
    targets = [rule.to] if isinstance(rule.to, str) else list(rule.to)
    if len(targets) == 1:
        return [t.contiguous()]
    if rule.split >= t.dim() or t.shape[rule.split] % len(targets):
        msg = (f"tensor '{src}' {_shape(t)} does not split into {len(targets)} equal parts "
               f"along axis {rule.split}")
        raise TrainingError(msg, where, "check the rule's split axis")
    return [p.contiguous() for p in t.chunk(len(targets), dim=rule.split)]


def map_tensors(names: NameMap, dims: Mapping[str, int], tensors: Mapping[str, Tensor],
                params: Mapping[str, tuple[int, ...]], *, file: str) -> dict[str, Tensor]:
    """The spec's parameters, by name, from a checkpoint's ``tensors``.

    Parameters
    ----------
    names : NameMap
        The spec's name map.
    dims : mapping
        The spec's dims for this model (``{i}`` runs over the dims of ``names.layers``).
    tensors : mapping
        The checkpoint's tensors by name (prefixes already stripped).
    params : mapping
        The compiled spec's parameters to fill: name -> shape.
    file : str
        The checkpoint's path, for messages.

    Raises
    ------
    TrainingError
        At ``file``: a missing, extra or wrongly-shaped tensor, or a parameter no rule
        fills; the message names the checkpoint's tensor and the spec's parameter, with
        both shapes.
    """
    where = SourceLoc(file)
    out: dict[str, Tensor] = {}
    used: set[str] = set()
    for template in names.tensors:
        rule = names.rule(template)
        stack = names.layers_of(template) if "{i}" in template else None
        for i in (range(int(dims[stack])) if stack is not None else [None]):
            targets = [_expand(t, i) for t in ([rule.to] if isinstance(rule.to, str)
                                               else rule.to)]
            read = _tensor_read(_expand(template, i), rule, i, tensors, targets, params, where)
            used.add(read)
            made = _apply(rule.model_copy(update={"to": targets}), tensors[read], dims, read,
                          where)
            for target, t in zip(targets, made, strict=True):
                out[target] = _fitted(t, read, target, rule, params, where)
    _check_complete(names, tensors, used, params, out, where)
    return out


def _tensor_read(src: str, rule: TensorRule, i: int | None, tensors: Mapping[str, Tensor],
                 targets: list[str], params: Mapping[str, tuple[int, ...]],
                 where: SourceLoc) -> str:
    """The checkpoint tensor a rule reads for ``src``: ``src`` or its fallback; a
    :class:`TrainingError` when the checkpoint has neither."""
    read = src if src in tensors else (
        _expand(rule.fallback, i) if rule.fallback is not None else None)
    if read is None or read not in tensors:
        want = ", ".join(f"'{t}' {_shape(params[t])}" for t in targets if t in params)
        msg = f"the checkpoint has no tensor '{src}', which the name map reads into {want}"
        raise TrainingError(msg, where, _missing_hint(src, tensors))
    return read


def _fitted(t: Tensor, read: str, target: str, rule: TensorRule,
            params: Mapping[str, tuple[int, ...]], where: SourceLoc) -> Tensor:
    """``t`` as parameter ``target`` takes it (a param node's leading axes of one
    added); a :class:`TrainingError` when ``target`` is no parameter or the shapes
    differ."""
    if target not in params:
        msg = (f"the name map reads tensor '{read}' {_shape(t)} into '{target}', "
               "which is not a parameter of the spec")
        raise TrainingError(msg, where, "parameters: " + _few(sorted(params)))
    if tuple(t.shape) != tuple(params[target]) and _leading_ones(
            tuple(params[target])) == tuple(t.shape):
        t = t.reshape(params[target])  # a param node's leading axis of one
    if tuple(t.shape) != tuple(params[target]):
        msg = (f"tensor '{read}' has shape {_shape(t)}"
               f"{' after its transforms' if _transforms(rule) else ''}, but "
               f"parameter '{target}' has {_shape(params[target])}")
        raise TrainingError(msg, where, "the spec's dims do not fit this model: "
                            "import reads them from its config.json")
    return t


def _check_complete(names: NameMap, tensors: Mapping[str, Tensor], used: set[str],
                    params: Mapping[str, tuple[int, ...]], out: Mapping[str, Tensor],
                    where: SourceLoc) -> None:
    """Refuse a checkpoint tensor nothing read (unless ignored) and a parameter
    nothing filled."""
    ignored = [pattern(n) for n in names.ignore]
    extra = [n for n in tensors if n not in used and not any(p.match(n) for p in ignored)]
    if extra:
        msg = (f"the checkpoint's tensor '{extra[0]}' {_shape(tensors[extra[0]])} is not read "
               f"by the name map{_more(extra)}")
        raise TrainingError(msg, where, "is this a model of another architecture? A tensor "
                            "that is not a parameter (a buffer) goes under ignore:")
    unfilled = [p for p in params if p not in out]
    if unfilled:
        msg = (f"no tensor of the checkpoint fills parameter '{unfilled[0]}' "
               f"{_shape(params[unfilled[0]])}{_more(unfilled)}")
        raise TrainingError(msg, where, "add a rule for it to the spec's name map")


def _leading_ones(shape: tuple[int, ...]) -> tuple[int, ...]:
    """``shape`` without its leading axes of size one."""
    k = 0
    while k < len(shape) and shape[k] == 1:
        k += 1
    return shape[k:]


def _transforms(rule: TensorRule) -> bool:
    return rule.transpose or rule.heads is not None or not isinstance(rule.to, str)


def _more(items: list[str]) -> str:
    return f" (and {len(items) - 1} more: {_few(items[1:])})" if len(items) > 1 else ""


def _few(items: list[str]) -> str:
    return ", ".join(items[:4]) + (", …" if len(items) > 4 else "")


def _missing_hint(src: str, tensors: Mapping[str, Tensor]) -> str:
    from difflib import get_close_matches

    close = get_close_matches(src, list(tensors), n=3)
    if close:
        return "the checkpoint has " + ", ".join(f"'{c}' {_shape(tensors[c])}" for c in close)
    return "is this a model of another architecture? Its tensors: " + _few(sorted(tensors))
