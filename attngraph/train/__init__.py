"""Training: tasks, data, the run and its files, reloaded runs, pictures, reports.

The sub-packages, each importing only those listed before it (type hints aside):

- :mod:`~attngraph.train.tasks`: what a spec learns: the built-in tasks, their
  metrics and objectives, and finding a spec's task.
- :mod:`~attngraph.train.store`: what a run keeps on disk: its directory, written
  whole or not at all, its checkpoints, the metrics table and TensorBoard events.
- :mod:`~attngraph.train.data`: the user's data: records read from files, their
  encoding (vocabularies, labels), the batches the loop draws, ``auto`` sizes.
- :mod:`~attngraph.train.engine`: what every way to train shares: the one step,
  its settings and RNG policy, the device, and the one step loop (with
  ``train()``, the Python API).
- :mod:`~attngraph.train.trained`: a trained run reloaded: predict, evaluate,
  export.
- :mod:`~attngraph.train.pictures`: pictures of what a model attended to
  (``attngraph attend``), and the confusion matrix.
- :mod:`~attngraph.train.run`: the run behind ``attngraph train``: its settings
  checked before it starts, the run, its record and model card, resume, early
  stopping, data-parallel ranks, and training in one's own loop.
- :mod:`~attngraph.train.report`: reports written from runs: ``attngraph
  compare``, docs/experiments.md and docs/training-results.md.
"""
