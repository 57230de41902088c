"""Analysis of the IR, never importing torch.

- :mod:`attngraph.analysis.describe`: ``describe(graph)``, the taxonomy of attention
  sites (axes defined in :mod:`attngraph.analysis.axes`);
- :mod:`attngraph.analysis.formats`: text/json/markdown and ``axes_table(graphs)``;
- :mod:`attngraph.analysis.diff`: ``diff(a, b)``, how two specs relate.
"""
