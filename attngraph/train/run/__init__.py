"""The training run behind ``attngraph train``, and training in one's own loop.

- :mod:`~attngraph.train.run.config`: a run's settings (:class:`RunConfig`) and
  their check before anything is written (:func:`settle`).
- :mod:`~attngraph.train.run.sized`: the graph a run trains, its ``auto`` sizes
  decided by the run's data.
- :mod:`~attngraph.train.run.runner`: :func:`run`, the run itself, driving
  :func:`attngraph.train.engine.loop.step_loop`.
- :mod:`~attngraph.train.run.record`: rank 0's record: the run's files, its summary.
- :mod:`~attngraph.train.run.modelcard`: the run's ``README.md``.
- :mod:`~attngraph.train.run.progress`: the progress bar or lines.
- :mod:`~attngraph.train.run.resume`: what ``--resume`` continues.
- :mod:`~attngraph.train.run.earlystop`: ``--patience``, keeping the best weights.
- :mod:`~attngraph.train.run.distributed` (``--nproc``) and
  :mod:`~attngraph.train.run.ddp` (what one rank does differently).
- :mod:`~attngraph.train.run.ownloop`: ``attngraph.dataset`` and ``attngraph.save``.
"""
