"""The normalisers of a ``softmax`` node, one :class:`NormaliserInfo` each, in
:data:`NORMALISERS`.

A softmax node's ``fn`` names an entry. A definition holds what every part of
attngraph needs of it, so that a new normaliser is one registration plus its
function: its formula (``describe``, the docs table), its traits, which the
shape rule, the passes and ``describe`` read (never its name), and its
implementation (a lazy ``"module:attribute"`` reference for the built-ins, in
:mod:`attngraph.lower.rules.normalisers`, so nothing imports torch before compiling)::

    register_normaliser(NormaliserInfo("sqmax", "s_i² / Σ_j s_j²", impl=my_sqmax))

Traits:

- ``sparse``: weights may be exactly 0 for low scores (``describe`` says so);
- ``needs_k``: it keeps the ``k`` highest scores, so the node needs ``k`` and may
  say ``ties`` (both are refused for the others);
- ``kernel``: it divides scores by their row sum, so they must not be negative: a
  dot-product scorer of two positive feature maps (linear attention); the
  linear-attention pass may then run the chain in linear time;
- ``fusable``: it is softmax over the items, which ``scaled_dot_product_attention``
  computes: the fusion pass may replace scorer → softmax → readout by one call.

The implementation takes scores ``(.., N)`` and a bool mask broadcastable to them
(True = may be attended) or None, and returns weights over the last axis: masked
items get exactly 0 and a fully masked row is zeros; with ``needs_k`` it also takes
``k`` and ``ties`` (``impl(z, mask, k, ties)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from attngraph.kinds.choices import Registered
from attngraph.registry import Registry
from attngraph.spec.models import Ident

__all__ = ["NormaliserInfo", "NORMALISERS", "register_normaliser", "NormaliserName"]


@dataclass(frozen=True)
class NormaliserInfo:
    """A normaliser: its formula, traits and implementation (see the module docstring).

    ``doc`` is what the docs table adds to the formula; ``reference`` the paper.
    """

    name: str
    formula: str
    impl: str | Callable[..., Any]
    sparse: bool = False
    needs_k: bool = False
    kernel: bool = False
    fusable: bool = False
    doc: str = ""
    reference: str = ""


#: Every normaliser by name; ``fn: <name>`` of a softmax node refers to an entry.
NORMALISERS: Registry[NormaliserInfo] = Registry("normaliser")

#: A field naming a normaliser (checked against :data:`NORMALISERS`).
NormaliserName = Annotated[Ident, Registered(NORMALISERS, "a normaliser")]


def register_normaliser(info: NormaliserInfo) -> NormaliserInfo:
    """Add a normaliser; ``fn: <info.name>`` of a softmax node then refers to it.

    Raises
    ------
    RegistryError
        When a normaliser of that name is registered already.
    """
    NORMALISERS.register(info.name, info)
    return info


def _impl(name: str) -> str:
    return f"attngraph.lower.rules.normalisers:{name}"


for _info in (
    NormaliserInfo("softmax", "exp(s_i) / Σ_j exp(s_j)",
                   "attngraph.lower.rules.masks:masked_softmax",
                   fusable=True),
    NormaliserInfo("sparsemax", "max(s_i − τ, 0), τ such that they sum to 1",
                   _impl("masked_sparsemax"), sparse=True, doc="exact zeros for low scores",
                   reference="Martins & Astudillo 2016"),
    NormaliserInfo("entmax15", "max(s_i/2 − τ, 0)², τ such that they sum to 1",
                   _impl("masked_entmax15"), sparse=True,
                   doc="sparse, but smoother than sparsemax",
                   reference="Peters et al. 2019 (exact, by sorting)"),
    NormaliserInfo("topk", "softmax over the `k` highest scores, 0 elsewhere",
                   _impl("masked_topk"), sparse=True, needs_k=True,
                   doc="a score tied with the k-th highest is kept with `ties: keep`, and "
                   "with `ties: first` (the default) only as far as the first `k` in item "
                   "order; every real item when a row has fewer than `k`"),
    NormaliserInfo("sum", "s_i / Σ_j s_j", _impl("masked_ratio"), kernel=True,
                   doc="the scores over their row sum, for kernel scores φ(q)·φ(k) that "
                   "cannot be negative (the scores must come from a dot-product scorer of "
                   "two positive [`feature_map`](#feature_map)s)",
                   reference="Katharopoulos et al. 2020"),
):
    register_normaliser(_info)
