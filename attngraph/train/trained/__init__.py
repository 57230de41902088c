"""A trained run, reloaded: predict, evaluate and export.

- :mod:`~attngraph.train.trained.reloaded`: :func:`load_run` and its
  :class:`Run` (public as ``attngraph.load_run``); :mod:`~attngraph.train.trained.rows`
  makes the rows of its ``predict``.
- :mod:`~attngraph.train.trained.evaluation`: the evaluation report of a model on
  labelled data; :mod:`~attngraph.train.trained.evaluation_text` prints it.
- :mod:`~attngraph.train.trained.evaluate_run`: a reloaded run's report on records.
- :mod:`~attngraph.train.trained.imported`: the predictions and report of a run of
  ``attngraph import``, its records read by its own tokenizer.
- :mod:`~attngraph.train.trained.export`: a run's model as a file that runs without
  attngraph.
- :mod:`~attngraph.train.trained.finite`: refusing NaN and infinity in what a run
  gives out.
"""
