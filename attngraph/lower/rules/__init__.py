"""The lowering rules: each kind's ``nn.Module``, in the module of its family.

A kind names its lowering (:attr:`attngraph.kinds.base.Kind.lowering`, a class or a
lazy ``"module:attribute"``), which lives here: ``attention`` (items, projections,
softmax, readout, the fused attention), ``scorers`` (with ``scorers_base``,
``scorers_additive`` and ``scorers_user``), ``relative`` (ALiBi, T5 biases,
rotary), ``support`` (linear, mlp, embedding, position, norm, add, concat, dropout),
``algebra`` (``expr`` and ``param``; the torch form of the formula functions),
``structure`` (block, map, repeat) and ``loop``, ``rnn``, ``memory``, ``hard`` (policies and
REINFORCE), ``glimpse``, ``window``, ``latent``, ``conv``, ``indexing``.

Shared numerics that the rules call: ``masks`` (padding, causal, window and adjacency
masks; the masked softmax), ``normalisers`` (the softmax node's other normalisers),
``banded`` (local attention at N·w cost), ``activations``, ``scan`` (recurrences as
torch's ``scan`` while exporting), ``algebra_take``.
"""
