"""Generation without a target: greedy and beam search over a compiled model.

- :mod:`~attngraph.lower.decode.generate`: :func:`generate`, the public entry;
- :mod:`~attngraph.lower.decode.decoders`: the decoders it drives one step at a time
  (a model's own loop, or a causal decoder over its prefix);
- :mod:`~attngraph.lower.decode.cache`: the key/value cache plan derived from a causal
  decoder's graph; :mod:`~attngraph.lower.decode.cached` runs it.
"""
