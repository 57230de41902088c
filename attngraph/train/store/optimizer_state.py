"""Checking a checkpoint's optimiser state against the optimiser a run builds.

``torch.optim.Optimizer.load_state_dict`` takes whatever it is given: a scalar
where Adam keeps a moment tensor, ``lr`` as text, a group without ``betas`` or a
NaN moment all load, and fail (or train to NaN) at the first step. So a stored
state is compared with the freshly built optimiser first, by what that
optimiser itself does, never by a table of one optimiser's fields:

- every parameter group has exactly the fresh groups' keys, each value of the
  fresh value's kind (a number, a flag, a pair of numbers, ``None``...), finite,
  and accepted by the optimiser's own constructor (which checks the ranges:
  ``lr >= 0``, ``0 <= beta < 1``...);
- every parameter's state has exactly the keys that one step of the same
  optimiser (built with the stored group's settings, on a scratch parameter)
  makes, a tensor where that step makes a tensor, of the parameter's shape where
  the step's is of its parameter's shape (else of the step's shape), of the
  step's dtype, and finite.

:func:`optimizer_problems` returns what is wrong, in words; the caller
(:func:`attngraph.train.store.checkpoints.restore`) names the file.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["optimizer_problems"]

#: Shape of the scratch parameter: a state entry of this shape is per-element.
_SCRATCH = (2, 3)


def _shape(t: Any) -> str:
    return "(" + ", ".join(str(n) for n in t.shape) + ")"


def _kind(value: Any) -> str:
    """The kind of a plain value, as a group setting is compared."""
    import torch

    if value is None:
        return "None"
    if isinstance(value, bool):
        return "a flag"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, torch.Tensor):
        return "a tensor"
    if isinstance(value, tuple | list):
        return f"{len(value)} values"
    return type(value).__name__


def _setting_problem(name: str, value: Any, fresh: Any) -> str | None:
    """What is wrong with a stored group setting, judged by the fresh one."""
    want, got = _kind(fresh), _kind(value)
    if want != got:
        return f"{name} is {got} ({value!r:.40}), not {want}"
    if isinstance(fresh, tuple | list):
        for i, (v, f) in enumerate(zip(value, fresh, strict=True)):
            problem = _setting_problem(f"{name}[{i}]", v, f)
            if problem is not None:
                return problem
    if got == "a number" and not math.isfinite(value):
        return f"{name} is {value}, not a finite number"
    return None


def _group_problems(i: int, group: Any, fresh: dict[str, Any], cls: type) -> list[str]:
    """What is wrong with stored parameter group ``i`` (the fresh group gives the keys)."""
    import torch

    if not isinstance(group, dict):
        return [f"parameter group {i} is not a mapping"]
    where = f"parameter group {i}"
    missing = [k for k in fresh if k not in group]
    extra = [str(k) for k in group if k not in fresh]
    if missing or extra:
        parts = ([f"lacks {', '.join(missing)}"] if missing else []) + \
            ([f"has unknown {', '.join(extra)}"] if extra else [])
        return [f"{where} {' and '.join(parts)}"]
    found = [f"{where}: {p}" for k, f in fresh.items() if k != "params"
             for p in [_setting_problem(k, group[k], f)] if p is not None]
    if found:
        return found
    try:  # the optimiser's own checks of its settings' ranges
        cls([torch.nn.Parameter(torch.zeros(_SCRATCH))],
            **{k: v for k, v in group.items() if k != "params"})
    except (ValueError, TypeError, RuntimeError) as exc:
        return [f"{where}: {str(exc).strip() or type(exc).__name__}"]
    return []


def _reference(cls: type, group: dict[str, Any]) -> dict[str, Any]:
    """The state one step of ``cls`` with ``group``'s settings makes for a parameter."""
    import torch

    p = torch.nn.Parameter(torch.zeros(_SCRATCH))
    opt = cls([p], **{k: v for k, v in group.items() if k != "params"})
    p.grad = torch.zeros(_SCRATCH)
    opt.step()
    return dict(opt.state.get(p, {}))


def _entry_problem(name: str, value: Any, ref: Any, param: Tensor) -> str | None:
    """What is wrong with one stored state entry, judged by the reference step's."""
    import torch

    if not isinstance(ref, torch.Tensor):
        want, got = _kind(ref), _kind(value)
        return None if want == got else f"{name} is {got}, not {want}"
    if not isinstance(value, torch.Tensor):
        return f"{name} is {_kind(value)} ({value!r:.40}), not a tensor"
    each = tuple(ref.shape) == _SCRATCH  # one value per element of its parameter
    like = param if each else ref
    dtype = like.dtype
    if value.shape != like.shape:
        return f"{name} has shape {_shape(value)}, not {_shape(like)}"
    if value.dtype != dtype:
        return f"{name} is {value.dtype}, not {dtype}"
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        return f"{name} holds NaN or infinity"
    return None


def optimizer_problems(stored: Any, opt: Any) -> list[str]:
    """What in a stored optimiser state does not fit ``opt``, in words (empty when it fits).

    Parameters
    ----------
    stored : Any
        What the checkpoint holds as the optimiser's state dict.
    opt : torch.optim.Optimizer
        The optimiser the run built, over the model's parameters.

    Returns
    -------
    list of str
        Each problem, naming the group, the parameter and the entry.
    """
    if not isinstance(stored, dict) or not isinstance(stored.get("state"), dict) \
            or not isinstance(stored.get("param_groups"), list):
        return ["the optimizer state has no state and param_groups"]
    cls = type(opt)
    fresh = opt.state_dict()["param_groups"]
    groups = stored["param_groups"]
    if len(groups) != len(fresh):
        return [f"{len(groups)} parameter groups, the optimizer has {len(fresh)}"]
    found = [p for i, (g, f) in enumerate(zip(groups, fresh, strict=True))
             for p in _group_problems(i, g, f, cls)]
    if found:
        return found
    sizes = [len(g["params"]) if isinstance(g["params"], list) else -1 for g in groups]
    if sizes != [len(g["params"]) for g in fresh]:
        return [f"optimizer groups of sizes {sizes}, the model's are "
                f"{[len(g['params']) for g in fresh]}"]
    params, refs = {}, {}
    for g, pg in zip(groups, opt.param_groups, strict=True):
        ref = _reference(cls, g)
        for i, p in zip(g["params"], pg["params"], strict=True):
            params[i], refs[i] = p, ref
    for i, st in stored["state"].items():
        if i not in params or not isinstance(st, dict):
            found.append(f"optimizer state for an unknown parameter {i!r:.40}")
            continue
        ref = refs[i]
        missing = [k for k in ref if k not in st]
        extra = [str(k) for k in st if k not in ref]
        if missing or extra:
            parts = ([f"lacks {', '.join(missing)}"] if missing else []) + \
                ([f"has unknown {', '.join(extra)}"] if extra else [])
            found.append(f"optimizer state of parameter {i} {' and '.join(parts)}")
            continue
        found.extend(f"optimizer state of parameter {i}: {p}" for k in ref
                     for p in [_entry_problem(k, st[k], ref[k], params[i])] if p is not None)
    return found
