"""Reports written from runs: comparisons, docs/experiments.md, training results.

- :mod:`~attngraph.train.report.compare`: ``attngraph compare``, over seeds, with
  :mod:`~attngraph.train.report.variants` (overrides of a spec) and
  :mod:`~attngraph.train.report.compare_figures` (curves, attention side by side) and
  :mod:`~attngraph.train.report.compare_table` (runs read back, the table, the report).
- :mod:`~attngraph.train.report.experiments`: docs/experiments.md.
- :mod:`~attngraph.train.report.results`: measuring the catalog's specs, and
  :mod:`~attngraph.train.report.results_page`: docs/training-results.md.
"""
