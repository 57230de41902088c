"""What a training run keeps on disk, written whole or not at all.

- :mod:`~attngraph.train.store.directory`: the run directory: never overwritten,
  every file written atomically, each read only as a regular file.
- :mod:`~attngraph.train.store.checkpoints`: checkpoints, atomic and tied to their
  spec; :mod:`~attngraph.train.store.checkpoint_data` checks what one holds, and
  :mod:`~attngraph.train.store.optimizer_state` its optimiser state.
- :mod:`~attngraph.train.store.seeds`: the range of a run's seed.
- :mod:`~attngraph.train.store.metrics_csv`: ``metrics.csv``, beside ``metrics.jsonl``.
- :mod:`~attngraph.train.store.board`: TensorBoard scalars, when it is installed.
- :mod:`~attngraph.train.store.imported`: runs written by ``attngraph import``.
"""
