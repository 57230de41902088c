"""Elementwise functions a spec names: activations (:data:`ACTIVATIONS`, the ``act``
of ``linear``, ``mlp`` and ``readout``) and feature maps (:data:`FEATURE_MAPS`, the
``fn`` of ``feature_map``), one definition each.

A definition holds the formula (the docs tables, diagrams) and the implementation,
a callable ``f(x) -> Tensor`` or a lazy ``"module:attribute"`` reference to one
(nothing imports torch before a spec is compiled); a new one is one registration
plus its function::

    register_activation(ActivationInfo("silu", "x σ(x)", impl="torch.nn.functional:silu"))

An activation may name ``module``, an ``nn.Module`` class built without arguments
that applies it (``torch.nn:ReLU``), for the layers a multi-layer perceptron stacks;
without one, the lowering wraps ``impl``. ``identity`` says it changes nothing
(``none``), so a lowering skips it and the fusion pass may take a readout that ends
with it. A feature map is ``positive`` when φ(x) >= 0 for every x: the dot product
of two such maps is a kernel score that a ``sum`` normaliser may divide by its row
sum (linear attention).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from attngraph.kinds.choices import Registered
from attngraph.registry import Registry
from attngraph.spec.models import Ident

__all__ = ["ActivationInfo", "ACTIVATIONS", "register_activation", "ActivationName",
           "FeatureMapInfo", "FEATURE_MAPS", "register_feature_map", "FeatureMapName"]


@dataclass(frozen=True)
class ActivationInfo:
    """An activation: formula, implementation, module class, identity (module doc)."""

    name: str
    formula: str
    impl: str | Callable[..., Any] | None = None
    module: str | Callable[[], Any] | None = None
    identity: bool = False
    doc: str = ""


@dataclass(frozen=True)
class FeatureMapInfo:
    """A feature map φ of kernel attention: formula, implementation, positivity."""

    name: str
    formula: str
    impl: str | Callable[..., Any]
    positive: bool = False
    doc: str = ""


#: Every activation by name; ``act: <name>`` refers to an entry.
ACTIVATIONS: Registry[ActivationInfo] = Registry("activation")
#: Every feature map by name; ``fn: <name>`` of a feature_map node refers to an entry.
FEATURE_MAPS: Registry[FeatureMapInfo] = Registry("feature map")

#: A field naming an activation (checked against :data:`ACTIVATIONS`).
ActivationName = Annotated[Ident, Registered(ACTIVATIONS, "an activation")]
#: A field naming a feature map (checked against :data:`FEATURE_MAPS`).
FeatureMapName = Annotated[Ident, Registered(FEATURE_MAPS, "a feature map")]


def register_activation(info: ActivationInfo) -> ActivationInfo:
    """Add an activation; ``act: <info.name>`` then refers to it.

    Raises
    ------
    RegistryError
        When an activation of that name is registered already.
    """
    ACTIVATIONS.register(info.name, info)
    return info


def register_feature_map(info: FeatureMapInfo) -> FeatureMapInfo:
    """Add a feature map; ``fn: <info.name>`` of a feature_map node then refers to it.

    Raises
    ------
    RegistryError
        When a feature map of that name is registered already.
    """
    FEATURE_MAPS.register(info.name, info)
    return info


_F = "torch.nn.functional"
for _act in (
    ActivationInfo("none", "x", module="torch.nn:Identity", identity=True,
                   doc="no activation"),
    ActivationInfo("relu", "max(x, 0)", f"{_F}:relu", "torch.nn:ReLU", doc="the rectifier"),
    ActivationInfo("tanh", "tanh x", "torch:tanh", "torch.nn:Tanh",
                   doc="the hyperbolic tangent"),
    ActivationInfo("sigmoid", "1 / (1 + e⁻ˣ)", "torch:sigmoid", "torch.nn:Sigmoid",
                   doc="the logistic function"),
    ActivationInfo("gelu", "x Φ(x)", f"{_F}:gelu", "torch.nn:GELU",
                   doc="the Gaussian error linear unit"),
    ActivationInfo("gelu_tanh", "x/2 (1 + tanh(√(2/π) (x + 0.044715 x³)))",
                   "attngraph.lower.rules.activations:gelu_tanh",
                   "attngraph.lower.rules.activations:GeluTanh",
                   doc="GELU's tanh form (GPT-2, BERT's TF code; Hendrycks & Gimpel 2016)"),
    ActivationInfo("leaky_relu", "x if x > 0 else 0.01 x", f"{_F}:leaky_relu",
                   "torch.nn:LeakyReLU", doc="the leaky rectifier (slope 0.01)"),
    ActivationInfo("elu", "x if x > 0 else eˣ − 1", f"{_F}:elu", "torch.nn:ELU",
                   doc="the exponential linear unit (GAT between layers)"),
):
    register_activation(_act)

for _phi in (
    FeatureMapInfo("elu1", "elu(x) + 1", "attngraph.lower.rules.activations:elu1", positive=True,
                   doc="always positive (Katharopoulos et al. 2020)"),
    FeatureMapInfo("relu", "max(x, 0)", f"{_F}:relu", positive=True, doc="zero or positive"),
):
    register_feature_map(_phi)
