"""Node kinds: one :class:`~attngraph.kinds.base.Kind` per kind, one module per family.

=============  ==================================================================
module         kinds
=============  ==================================================================
``inputs``     input
``attention``  items, queries, keys, values, softmax, readout, (fused) attention
``scorers``    scorer, and every scorer function (:data:`SCORERS`)
``hard``       policy
``glimpse``    glimpse
``memory``     memory, write, address
``rnn``        rnn
``structure``  block, repeat, loop
``support``    linear, mlp, embedding, position, norm, add, concat, dropout
=============  ==================================================================

Each kind's lowering is in the module of the same name under :mod:`attngraph.lower`.
Importing this package registers every built-in kind; it never imports torch.
"""

from attngraph.kinds import (  # noqa: F401  (each module registers its kinds)
    attention,
    glimpse,
    hard,
    inputs,
    memory,
    rnn,
    scorers,
    structure,
    support,
)
from attngraph.kinds.base import KINDS, Kind, RuleCtx, Style, kind, spec_kinds
from attngraph.kinds.scorers import SCORERS, ScorerInfo, register_scorer

__all__ = [
    "KINDS", "Kind", "RuleCtx", "SCORERS", "ScorerInfo", "Style", "kind", "register_scorer",
    "spec_kinds",
]
