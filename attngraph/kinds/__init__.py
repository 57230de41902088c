"""Node kinds: each module registers shape rules (and lowering rules) by kind."""

from attngraph.kinds import attention, inputs, memory, structure, support  # noqa: F401
from attngraph.kinds.registry import (
    LOWERINGS,
    SCORERS,
    SHAPES,
    ScorerInfo,
    lowering_rule,
    register_scorer,
    shape_rule,
)

__all__ = [
    "LOWERINGS", "SCORERS", "SHAPES", "ScorerInfo", "lowering_rule", "register_scorer",
    "shape_rule",
]
