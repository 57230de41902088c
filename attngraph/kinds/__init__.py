"""Node kinds: one :class:`~attngraph.kinds.base.Kind` per kind, one module per family.

=============  ==================================================================
module         kinds
=============  ==================================================================
``inputs``     input
``algebra``    expr, param (formulas over named values; free parameters)
``attention``  items, queries, keys, values, feature_map, softmax, readout, (fused)
               attention, linear_attention
``scorers``    scorer, and every scorer function (:data:`SCORERS`)
``relative``   position_bias (ALiBi, T5 buckets), rotary
``hard``       policy
``indexing``   gather, onehot
``glimpse``    glimpse, filterbank (DRAW read and write)
``latent``     latent (a reparameterised Gaussian code and its KL)
``memory``     memory, write, address
``window``     window (Graves' soft window over a string)
``rnn``        rnn
``structure``  block, repeat, loop, map
``support``    linear, mlp, embedding, position, norm, add, mul, gain, pool, concat,
               dropout
``conv``       conv (over items or an image), to_image
=============  ==================================================================

Each kind's lowering is in the module of the same name under :mod:`attngraph.lower`.

The open choices of those kinds are registries with traits, one definition per
entry: :data:`SCORERS` (``scorers``), :data:`NORMALISERS` (``normalisers``: a
softmax's ``fn``), :data:`ACTIVATIONS` and :data:`FEATURE_MAPS` (``activations``:
``act``, a feature map's ``fn``). :mod:`attngraph.kinds.choices` marks the fields
that name an entry; :mod:`attngraph.kinds.tables` writes the docs' tables of them.
Importing this package registers every built-in kind; it never imports torch.
"""

# each family module registers its kinds when imported
import attngraph.kinds.algebra
import attngraph.kinds.attention
import attngraph.kinds.combine
import attngraph.kinds.conv
import attngraph.kinds.fused
import attngraph.kinds.glimpse
import attngraph.kinds.hard
import attngraph.kinds.indexing
import attngraph.kinds.inputs
import attngraph.kinds.latent
import attngraph.kinds.loop
import attngraph.kinds.memory
import attngraph.kinds.relative
import attngraph.kinds.rnn
import attngraph.kinds.scorer_location  # after the scorers' own functions
import attngraph.kinds.scorers
import attngraph.kinds.structure
import attngraph.kinds.support
import attngraph.kinds.window
from attngraph.kinds.activations import (
    ACTIVATIONS,
    FEATURE_MAPS,
    ActivationInfo,
    FeatureMapInfo,
    register_activation,
    register_feature_map,
)
from attngraph.kinds.base import KINDS, Kind, RuleCtx, Style, kind, spec_kinds
from attngraph.kinds.normalisers import NORMALISERS, NormaliserInfo, register_normaliser
from attngraph.kinds.scorers import SCORERS, ScorerInfo, register_scorer

__all__ = ["KINDS", "SCORERS", "NORMALISERS", "ACTIVATIONS", "FEATURE_MAPS", "Kind",
           "RuleCtx", "ScorerInfo", "NormaliserInfo", "ActivationInfo", "FeatureMapInfo",
           "Style", "kind", "register_scorer", "register_normaliser", "register_activation",
           "register_feature_map", "spec_kinds"]
