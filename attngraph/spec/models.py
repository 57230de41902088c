"""The spec language's shared types and its document-level models (pydantic v2).

Node kinds define their own models next to their shape rules (one module per
family under :mod:`attngraph.kinds`); this module holds what they share:

- *sizes* (:data:`Size`): a positive integer or the name of an entry of ``dims``;
- *references* (:data:`Ref`): ``node`` or ``node.port``, or the long form
  ``{ref: node.port, detach: true}``;
- *block names* (:data:`BlockName`): a block defined under ``blocks:``;

each marked in its annotation, so that :mod:`attngraph.spec.fields` derives once
which fields of any model are sizes, references and block names. Every model
forbids unknown fields and is frozen. Field validators check only what one field
can know; graph rules live in :mod:`attngraph.ir.verify` and shape inference.

Each field has a docstring under it, in the spec language's terms (what it means,
its shape role): the one description editors show on hover (``attngraph schema``)
and docs/spec-language.md's field reference prints. Defaults and allowed values
are the fields' own, never restated there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

__all__ = [
    "IDENT", "Ident", "BODY_ID", "BodyId",
    "Size", "RefStr", "RefLong", "Ref", "BlockName", "LearnedQuery",
    "PosInt", "Prob", "PosFloat", "Scale", "SCALE_RANGE", "PROB_MAX", "check_scale",
    "in_range", "SIZE", "REF", "BLOCK", "FORMULA", "Model", "NodeModel",
    "InputSpec", "BlockSpec", "Spec", "TrainSpec", "INPUT_TYPES", "AUTO",
]

#: The dims value that leaves a size for the training data to decide.
AUTO = "auto"


class _Marker:
    """A tag in a field's annotation: what kind of value the field holds."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: marks a size field (an integer or a dims name, resolved by ``build``)
SIZE = _Marker("SIZE")
#: marks a reference field (its values become edges of the IR)
REF = _Marker("REF")
#: marks a field naming a block (``block:``, ``body:``)
BLOCK = _Marker("BLOCK")
#: marks a formula field (an ``expr``'s): the nodes it names become edges of the IR
FORMULA = _Marker("FORMULA")

IDENT = r"^[a-z][a-z0-9_]*$"
Ident = Annotated[str, StringConstraints(pattern=IDENT, max_length=64)]
#: A node id inside a block: any name a reference can write (:data:`RefStr`'s part
#: before the port), ``keys`` or ``__call__`` included: never a '.', which would read
#: as a port and which no module name may hold, nor '-', spaces or other characters.
BODY_ID = r"^[A-Za-z_][A-Za-z0-9_]*$"
BodyId = Annotated[str, StringConstraints(pattern=BODY_ID, max_length=64)]
#: Reference text: ``node`` or ``node.port``.
RefStr = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
]
#: A positive size or a dims name.
Size = Annotated[Union[Annotated[int, Field(gt=0, le=1_000_000_000)], Ident], SIZE]
#: The name of a block defined under ``blocks:``.
BlockName = Annotated[Ident, BLOCK]
PosInt = Annotated[int, Field(gt=0, le=1_000_000)]
PosFloat = Annotated[float, Field(gt=0.0, le=1e6)]

#: The range of a scale: a softmax ``temperature``, a Gumbel ``tau``, a policy's
#: ``std``, a cosine ``beta``, a Gaussian ``sigma``. Scores of ±10,000 divided by
#: 0.001 are ±1e7, and their gradients grow by at most 1,000: finite in float32 and
#: bfloat16 (largest 3.4e38) with a wide margin, where a temperature of 1e-38 already
#: overflows float32 to inf and gives NaN weights.
SCALE_RANGE = (1e-3, 1e3)
#: The largest dropout probability: dropout scales what it keeps by 1/(1 - p), at
#: most 100 here; p near 1 scales by 1e16 and later layers overflow.
PROB_MAX = 0.99


def in_range(lo: float, hi: float, why: str) -> Callable[[float], float]:
    """A check refusing a number outside ``[lo, hi]`` with ``"<range>, found <v>; <why>"``
    (validation shows the part after ``"; "`` as the hint)."""

    def check(v: float) -> float:
        if not lo <= v <= hi:
            msg = f"must be from {lo:g} to {hi:g}, found {v:g}; {why}"
            raise ValueError(msg)
        return v

    return check


#: Refuses a scale outside :data:`SCALE_RANGE`, saying the range.
check_scale = in_range(
    *SCALE_RANGE, f"write a value from {SCALE_RANGE[0]:g} to {SCALE_RANGE[1]:g}: beyond it, "
    "numbers divided or multiplied by it leave the finite range of float32 and bfloat16 "
    "(NaN results)")
#: A positive scale within :data:`SCALE_RANGE`.
Scale = Annotated[
    float, AfterValidator(check_scale),
    Field(json_schema_extra={"minimum": SCALE_RANGE[0], "maximum": SCALE_RANGE[1]}),
]
#: A dropout probability, 0 to :data:`PROB_MAX`.
Prob = Annotated[
    float,
    AfterValidator(in_range(0.0, PROB_MAX, f"write a value from 0 to {PROB_MAX:g}: dropout "
                            "scales what it keeps by 1/(1 - p)")),
    Field(json_schema_extra={"minimum": 0.0, "maximum": PROB_MAX}),
]

INPUT_TYPES = ("tokens", "vectors", "vector", "image", "graph", "labels")


class Model(BaseModel):
    """Base of every spec model: unknown fields are errors; values are frozen."""

    # The docstring under each field is its description: attngraph.kinds.schema reads
    # them from the source when it writes the JSON Schema (and the field reference).
    # Not ``use_attribute_docstrings``, which parses them at import, 30 ms of every
    # command's start, for text that only the schema shows.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class RefLong(Model):
    """Long reference form; ``detach: true`` stops the gradient on this edge."""

    ref: RefStr
    """The node or input read: ``node`` (its default port) or ``node.port``."""
    detach: bool = False
    """Stop the gradient along this one edge (diagrams draw it dashed)."""


#: A reference: short text or the long form.
Ref = Annotated[Union[RefStr, RefLong], REF]


class LearnedQuery(Model):
    """An inline learned query vector of the given size: ``query: {learned: d}``."""

    learned: Size
    """Size of the learned query vector (per head when the keys have heads)."""


class NodeModel(Model):
    """Base of every node kind's model: a ``kind`` tag, an optional label and note, and
    ``share``: the id of a node of the same kind whose parameters this one uses."""

    kind: str
    """The node kind: what the node computes and which fields it takes."""
    label: str | None = None
    """The node's math label in diagrams (``x``, ``p``, ``query``); the node id if unset."""
    note: str | None = None
    """Free text, shown by ``attngraph describe`` and in diagram tooltips."""
    share: Ident | None = None
    """Id of a node of the same kind whose parameters this node uses instead of its own
    (counted once, at that node)."""


# ---------------------------------------------------------------------------
# the document


class InputSpec(Model):
    """A declared input. ``length`` names its symbolic length (default ``N``)."""

    type: Literal["tokens", "vectors", "vector", "image", "graph", "labels", "positions"]
    """What the input holds: token ids ``long[N]``, vectors ``[N, dim]``, one vector
    ``[dim]``, an image ``[channels, height, width]``, a graph (node features
    ``[N, dim]`` and an adjacency), class labels, or positions into another input."""
    vocab: Size | None = None
    """tokens: the number of token ids (ids are below it); a size."""
    dim: Size | None = None
    """vectors, vector, graph: the feature size of each vector; a size."""
    channels: Size | None = None
    """image: the number of channels C (1 if unset); a size."""
    height: Size | None = None
    """image: the height H in pixels; a size."""
    width: Size | None = None
    """image: the width W in pixels; a size."""
    length: Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Za-z0-9_]*$")] | None = None
    """Symbol of the items axis, a length known when a batch arrives (``N``, ``T``); if
    unset, ``N`` for the first collection input and ``N_<name>`` for the others (inputs
    share a length only when they say so)."""
    per_item: bool = False
    """labels: one label per item, ``long[N]``, instead of one per example."""
    classes: Size | None = None
    """labels: the number of classes (labels are below it); a size."""
    of: Ident | None = None
    """positions: the tokens, vectors or graph input whose items they point at."""
    nested: bool = False
    """tokens: a document as items of items (sentences of words), ids ``[N, W]``."""
    inner: Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Za-z0-9_]*$")] | None = None
    """nested tokens: the symbol of the inner length, words per sentence (``W`` if
    unset)."""
    label: str | None = None
    """The input's label in diagrams; the input's name if unset."""
    note: str | None = None
    """Free text, shown by ``attngraph describe`` and in diagram tooltips."""

    #: the IR kind of an input node
    kind: ClassVar[str] = "input"


class BlockSpec(Model):
    """A reusable subgraph: named inputs, nodes, and one ``output`` or many ``outputs``."""

    inputs: list[Ident] = Field(default_factory=list)
    """Names of the block's inputs; their types are bound where the block is used."""
    # validated one node at a time by its kind's model (see ``attngraph.spec.validate``)
    nodes: dict[BodyId, Any]
    """The block's nodes by id, reading its inputs and each other."""
    output: Ref | None = None
    """The one value the block returns (give ``output`` or ``outputs``)."""
    outputs: dict[Ident, Ref] | None = None
    """Several named results, by name: the ports of the node that uses the block (the
    first is its default port)."""
    label: str | None = None
    """The block's box label in diagrams; the block's name if unset."""
    note: str | None = None
    """Free text, shown by ``attngraph describe`` and in diagram tooltips."""


class TrainSpec(Model):
    """Defaults for ``attngraph train``: the built-in task and its settings."""

    task: Ident
    """The built-in training task that makes the data in-process (``needle``,
    ``reversal``, ...)."""
    steps: PosInt = 300
    """Number of optimiser steps."""
    batch: PosInt = 32
    """Examples per batch."""
    lr: PosFloat = 1e-3
    """Learning rate."""
    optimizer: Literal["adam", "sgd"] = "adam"
    """The optimiser."""
    target: dict[Ident, float] = Field(default_factory=dict)
    """What a run should reach, by metric (``accuracy: 0.95``); the catalog tests check
    it."""
    options: dict[Ident, int | float | str | bool] = Field(default_factory=dict)
    """The task's own options by name (document length, vocabulary, ...)."""


class Spec(Model):
    """A whole spec document."""

    attngraph: Literal[1]
    """The spec language version."""
    name: Ident
    """The spec's name: an identifier, at most 64 characters."""
    title: str | None = None
    """A one-line title (diagrams, ``attngraph describe``)."""
    summary: str | None = None
    """A sentence or two on what the mechanism does."""
    dims: dict[Ident, Union[Annotated[int, Field(gt=0, le=1_000_000_000)], Literal["auto"]]] = \
        Field(default_factory=dict)
    """Named sizes: a positive integer by name; any size field may name one. ``auto``
    leaves a vocabulary or a class count for the training data to decide (``attngraph
    train --data``); without data it is an error."""
    inputs: dict[Ident, InputSpec]
    """The model's inputs by name: the arguments of the compiled module's ``forward``."""
    # validated one node at a time by its kind's model (see ``attngraph.spec.validate``)
    nodes: dict[Ident, Any]
    """The nodes by id, each a mapping with a ``kind``; at least one."""
    blocks: dict[Ident, BlockSpec] = Field(default_factory=dict)
    """Reusable subgraphs by name, used by ``block``, ``map``, ``repeat`` and ``loop``
    nodes."""
    outputs: dict[Ident, Ref]
    """What ``forward`` returns: a reference by output name; at least one."""
    train: TrainSpec | None = None
    """Defaults for ``attngraph train``: the task and its settings."""

    @field_validator("nodes", "outputs")
    @classmethod
    def _not_empty(cls, v: dict[str, object], info: ValidationInfo) -> dict[str, object]:
        if not v:
            what = {"nodes": "node", "outputs": "output"}[str(info.field_name)]
            msg = f"a spec needs at least one {what}"
            raise ValueError(msg)
        return v
