"""The spec language as pydantic v2 models: one frozen model per node kind.

Node models are a tagged union on ``kind``; every model forbids unknown fields.
Field validators check only what one field can know (positive sizes, identifiers,
enumerations). Graph rules (references resolve, shapes fit) live in
:mod:`attngraph.ir.verify` and :mod:`attngraph.ir.shapes`.

A *size* is a positive integer or the name of an entry of ``dims``. A *reference*
is ``node`` or ``node.port``, or the long form ``{ref: node.port, detach: true}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

__all__ = [
    "IDENT", "Ident", "Size", "RefStr", "RefLong", "Ref", "LearnedQuery",
    "InputSpec", "NodeSpec", "BlockSpec", "Spec", "MaskSpec", "CarrySpec", "FeedSpec",
    "NODE_MODELS", "INPUT_TYPES", "SCORER_FNS", "AnyNode", "TrainSpec",
]

IDENT = r"^[a-z][a-z0-9_]*$"
Ident = Annotated[str, StringConstraints(pattern=IDENT, max_length=64)]
#: Reference text: ``node`` or ``node.port``.
RefStr = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
]
#: A positive size or a dims name.
Size = Union[Annotated[int, Field(gt=0, le=1_000_000_000)], Ident]
PosInt = Annotated[int, Field(gt=0, le=1_000_000)]
Prob = Annotated[float, Field(ge=0.0, lt=1.0)]
PosFloat = Annotated[float, Field(gt=0.0, le=1e6)]

INPUT_TYPES = ("tokens", "vectors", "vector", "image", "graph", "labels")
SCORER_FNS = ("dot", "scaled_dot", "general", "additive", "cosine", "mlp", "location")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class RefLong(_Model):
    """Long reference form; ``detach: true`` stops the gradient on this edge."""

    ref: RefStr
    detach: bool = False


Ref = Union[RefStr, RefLong]


class LearnedQuery(_Model):
    """An inline learned query vector of the given size: ``query: {learned: d}``."""

    learned: Size


# ---------------------------------------------------------------------------
# inputs


class InputSpec(_Model):
    """A declared input. ``length`` names its symbolic length (default ``N``)."""

    type: Literal["tokens", "vectors", "vector", "image", "graph", "labels"]
    vocab: Size | None = None
    dim: Size | None = None
    channels: Size | None = None
    height: Size | None = None
    width: Size | None = None
    #: symbol of the item count; default ``N`` for the first collection input,
    #: ``N_<name>`` for the others (inputs share a length only when they say so)
    length: Annotated[str, StringConstraints(pattern=r"^[A-Z][A-Za-z0-9_]*$")] | None = None
    per_item: bool = False
    classes: Size | None = None
    label: str | None = None
    note: str | None = None


# ---------------------------------------------------------------------------
# node kinds


class _Node(_Model):
    label: str | None = None
    note: str | None = None


class _Proj(_Node):
    from_: Ref | None = Field(default=None, alias="from")
    dim: Size | None = None
    heads: Size | None = None
    proj: Literal["linear", "identity", "mlp"] = "linear"
    bias: bool = True
    hidden: Size | None = None


class ItemsSpec(_Node):
    kind: Literal["items"]
    from_: Ref = Field(alias="from")
    embed: Size | None = None
    patches: tuple[PosInt, PosInt] | None = None
    dim: Size | None = None
    bias: bool = True


class QueriesSpec(_Proj):
    kind: Literal["queries"]
    learned: Size | None = None


class KeysSpec(_Proj):
    kind: Literal["keys"]


class ValuesSpec(_Proj):
    kind: Literal["values"]


class ScorerSpec(_Node):
    kind: Literal["scorer"]
    #: a registered scorer function (built-ins: SCORER_FNS; users may add their own)
    fn: Ident
    query: Ref | LearnedQuery | None = None
    key: Ref | None = None
    pairs: Literal["all", "aligned"] = "all"
    hidden: Size | None = None
    beta: PosFloat | Literal["learned"] | None = None
    mode: Literal["learned", "gaussian"] | None = None
    max_len: Size | None = None
    sigma: PosFloat | None = None

    @field_validator("fn")
    @classmethod
    def _known_fn(cls, v: str) -> str:
        from attngraph.errors import did_you_mean
        from attngraph.kinds import SCORERS

        if v not in SCORERS:
            msg = f"'{v}' is not a scorer function; {did_you_mean(v, SCORERS)}"
            raise ValueError(msg)
        return v


class MaskSpec(_Model):
    """Masks a softmax may apply on top of the inputs' padding."""

    causal: bool = False
    window: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    adjacency: Ref | None = None
    self_loops: bool = True


class SoftmaxSpec(_Node):
    kind: Literal["softmax"]
    scores: Ref
    mask: MaskSpec | None = None
    temperature: PosFloat = 1.0
    fn: Literal["softmax", "sparsemax"] = "softmax"


class ReadoutSpec(_Node):
    kind: Literal["readout"]
    weights: Ref
    values: Ref
    combine: Literal["concat", "mean"] = "concat"
    out: Size | None = None
    bias: bool = True


class PolicySpec(_Node):
    kind: Literal["policy"]
    scores: Ref | None = None
    mean: Ref | None = None
    dist: Literal["categorical", "gaussian"] = "categorical"
    std: PosFloat = 0.1
    estimator: Literal["reinforce", "straight_through", "gumbel"] = "reinforce"
    baseline: Ref | bool = True
    tau: PosFloat = 1.0


class LinearSpec(_Node):
    kind: Literal["linear"]
    from_: Ref = Field(alias="from")
    out: Size
    bias: bool = True
    act: Literal["none", "relu", "tanh", "sigmoid", "gelu", "leaky_relu"] = "none"


class MlpSpec(_Node):
    kind: Literal["mlp"]
    from_: Ref = Field(alias="from")
    hidden: Size
    out: Size
    act: Literal["relu", "tanh", "gelu", "sigmoid"] = "relu"
    layers: Annotated[int, Field(ge=1, le=16)] = 1


class EmbeddingSpec(_Node):
    kind: Literal["embedding"]
    from_: Ref = Field(alias="from")
    dim: Size
    vocab: Size | None = None


class PositionSpec(_Node):
    kind: Literal["position"]
    from_: Ref = Field(alias="from")
    dim: Size | None = None
    encoding: Literal["sinusoidal", "learned", "xy"] = "sinusoidal"
    max_len: Size | None = None


class RnnSpec(_Node):
    kind: Literal["rnn"]
    from_: Ref = Field(alias="from")
    cell: Literal["gru", "lstm"] = "gru"
    hidden: Size
    bidirectional: bool = False
    layers: Annotated[int, Field(ge=1, le=16)] = 1
    init: Ref | None = None


class NormSpec(_Node):
    kind: Literal["norm"]
    from_: Ref = Field(alias="from")
    fn: Literal["layer", "rms"] = "layer"


class AddSpec(_Node):
    kind: Literal["add"]
    from_: Annotated[list[Ref], Field(min_length=2, max_length=64)] = Field(alias="from")


class ConcatSpec(_Node):
    kind: Literal["concat"]
    from_: Annotated[list[Ref], Field(min_length=2, max_length=64)] = Field(alias="from")


class DropoutSpec(_Node):
    kind: Literal["dropout"]
    from_: Ref = Field(alias="from")
    p: Prob = 0.1


class GlimpseSpec(_Node):
    kind: Literal["glimpse"]
    image: Ref
    loc: Ref
    size: PosInt
    scales: Annotated[int, Field(ge=1, le=8)] = 1


class MemorySpec(_Node):
    kind: Literal["memory"]
    slots: Size
    width: Size
    init: Literal["learned", "zeros", "constant"] = "constant"
    from_: Ref | None = Field(default=None, alias="from")


class WriteSpec(_Node):
    kind: Literal["write"]
    memory: Ref
    weights: Ref
    erase: Ref
    add: Ref


class AddressSpec(_Node):
    """NTM location addressing: interpolate, shift and sharpen content weights."""

    kind: Literal["address"]
    content: Ref
    prev: Ref
    control: Ref
    shifts: Annotated[int, Field(ge=1, le=8)] = 1


class BlockUseSpec(_Node):
    kind: Literal["block"]
    block: Ident
    from_: Ref | dict[Ident, Ref] = Field(alias="from")


class RepeatSpec(_Node):
    kind: Literal["repeat"]
    block: Ident
    times: Annotated[int, Field(ge=1, le=1024)] | Ident
    from_: Ref = Field(alias="from")
    share: bool = False


class CarrySpec(_Model):
    """Carried loop state: starts from ``init``, then takes body output ``next``."""

    init: Ref | None = None
    zeros: Size | None = None
    next: Ident


class FeedSpec(_Model):
    """Per-step input: ``from``[t] (teacher forcing) or the previous step's output."""

    from_: Ref | None = Field(default=None, alias="from")
    feedback: Ident | None = None
    start: Annotated[int, Field(ge=0)] = 0
    teacher_forcing: bool = True


class LoopSpec(_Node):
    kind: Literal["loop"]
    body: Ident
    steps: PosInt | Ref
    inputs: dict[Ident, Ref] = Field(default_factory=dict)
    carry: dict[Ident, CarrySpec] = Field(default_factory=dict)
    feed: dict[Ident, FeedSpec] = Field(default_factory=dict)


AnyNode = Union[
    ItemsSpec, QueriesSpec, KeysSpec, ValuesSpec, ScorerSpec, SoftmaxSpec, ReadoutSpec,
    PolicySpec, LinearSpec, MlpSpec, EmbeddingSpec, PositionSpec, RnnSpec, NormSpec,
    AddSpec, ConcatSpec, DropoutSpec, GlimpseSpec, MemorySpec, WriteSpec, AddressSpec,
    BlockUseSpec, RepeatSpec, LoopSpec,
]
#: The tagged union of node kinds (used for the JSON Schema; validation dispatches
#: on ``kind`` itself so that only the kinds a spec uses are built).
NodeSpec = Annotated[AnyNode, Field(discriminator="kind")]

NODE_MODELS: dict[str, type[_Node]] = {
    m.model_fields["kind"].annotation.__args__[0]: m  # type: ignore[union-attr]
    for m in AnyNode.__args__  # type: ignore[attr-defined]
}


class BlockSpec(_Model):
    """A reusable subgraph: named inputs, nodes, and one ``output`` or many ``outputs``."""

    inputs: list[Ident] = Field(default_factory=list)
    #: validated one node at a time by its kind's model (see ``attngraph.spec.validate``)
    nodes: dict[Ident, Any]
    output: Ref | None = None
    outputs: dict[Ident, Ref] | None = None
    label: str | None = None
    note: str | None = None


class TrainSpec(_Model):
    """Defaults for ``attngraph train``: the built-in task and its settings."""

    task: Ident
    steps: PosInt = 300
    batch: PosInt = 32
    lr: PosFloat = 1e-3
    optimizer: Literal["adam", "sgd"] = "adam"
    target: dict[Ident, float] = Field(default_factory=dict)
    options: dict[Ident, int | float | str | bool] = Field(default_factory=dict)


class Spec(_Model):
    """A whole spec document."""

    attngraph: Literal[1]
    name: Ident
    title: str | None = None
    summary: str | None = None
    dims: dict[Ident, Annotated[int, Field(gt=0, le=1_000_000_000)]] = Field(
        default_factory=dict
    )
    inputs: dict[Ident, InputSpec]
    #: validated one node at a time by its kind's model (see ``attngraph.spec.validate``)
    nodes: dict[Ident, Any]
    blocks: dict[Ident, BlockSpec] = Field(default_factory=dict)
    outputs: dict[Ident, Ref]
    train: TrainSpec | None = None

    @field_validator("nodes")
    @classmethod
    def _some_nodes(cls, v: dict[str, object]) -> dict[str, object]:
        if not v:
            msg = "a spec needs at least one node"
            raise ValueError(msg)
        return v

    @field_validator("outputs")
    @classmethod
    def _some_outputs(cls, v: dict[str, object]) -> dict[str, object]:
        if not v:
            msg = "a spec needs at least one output"
            raise ValueError(msg)
        return v
