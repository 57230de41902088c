"""Numbers a run gives out are finite: where a prediction or a metric is not.

:meth:`attngraph.train.trained.reloaded.Run.predict` and
:meth:`~attngraph.train.trained.reloaded.Run.evaluate`
refuse NaN and infinity (an error at the example) rather than print them or write
them into a JSON file, which ``NaN`` would make invalid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["nonfinite_at"]


def nonfinite_at(value: Any, where: str = "") -> str | None:
    """Where in ``value`` (a prediction's row, metrics) a number is NaN or infinite.

    Examples
    --------
    >>> nonfinite_at({"probabilities": {"a": 0.5, "b": float("nan")}})
    'probabilities.b'
    """
    if isinstance(value, float):
        return None if math.isfinite(value) else where or "value"
    items: Iterable[tuple[str, Any]] = ()
    if isinstance(value, Mapping):
        items = ((f"{where}.{k}" if where else str(k), v) for k, v in value.items())
    elif isinstance(value, list | tuple):
        items = ((f"{where}[{j}]", v) for j, v in enumerate(value))
    for at, v in items:
        bad = nonfinite_at(v, at)
        if bad is not None:
            return bad
    return None
