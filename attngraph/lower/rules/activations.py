"""Activations and feature maps as the lowerings call them, read from their registries
(:mod:`attngraph.kinds.activations`): a function, or a module for a layer stack."""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from attngraph.kinds.activations import ACTIVATIONS, FEATURE_MAPS
from attngraph.kinds.choices import load

__all__ = ["Activation", "GeluTanh", "activation_fn", "activation_module", "elu1",
           "feature_map_fn", "gelu_tanh"]


def elu1(x: Tensor) -> Tensor:
    """elu(x) + 1: always positive (Katharopoulos et al. 2020)."""
    return F.elu(x) + 1


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh form, x/2 (1 + tanh(√(2/π) (x + 0.044715 x³))): GPT-2's ``gelu_new``."""
    return F.gelu(x, approximate="tanh")


class GeluTanh(nn.GELU):
    """GELU's tanh form as a layer (built without arguments, as an mlp stacks it)."""

    def __init__(self) -> None:
        super().__init__(approximate="tanh")


class Activation(nn.Module):
    """An activation function as a module, for one without a module class of its own."""

    def __init__(self, fn: Callable[[Tensor], Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: Tensor) -> Tensor:
        return self.fn(x)


def activation_fn(name: str) -> Callable[[Tensor], Tensor] | None:
    """The function of activation ``name``; None for one that changes nothing."""
    info = ACTIVATIONS[name]
    if info.identity or info.impl is None:
        return None
    return load(info.impl)


def activation_module(name: str) -> nn.Module:
    """Activation ``name`` as a module: its own class, or its function wrapped."""
    info = ACTIVATIONS[name]
    if info.module is not None:
        module: nn.Module = load(info.module)()
        return module
    fn = activation_fn(name)
    return nn.Identity() if fn is None else Activation(fn)


def feature_map_fn(name: str) -> Callable[[Tensor], Tensor]:
    """The function φ of feature map ``name``."""
    return load(FEATURE_MAPS[name].impl)
