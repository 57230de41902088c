"""What a spec learns: the built-in tasks, their metrics and their objectives.

- :mod:`~attngraph.train.tasks.base`: the :class:`~attngraph.train.tasks.base.Task`
  base class and the task and metric registries (imports no task).
- :mod:`~attngraph.train.tasks.lookup`: a spec's task (:func:`task_for`, its options
  and targets checked at their place in ``train:``), feeding a batch to a spec's
  inputs, computing metrics; importing it registers every built-in task.
- :mod:`~attngraph.train.tasks.metrics`: the built-in metrics.
- :mod:`~attngraph.train.tasks.objectives`: what training minimises.
- The tasks, by field: :mod:`~attngraph.train.tasks.sequences`,
  :mod:`~attngraph.train.tasks.language`, :mod:`~attngraph.train.tasks.algorithms`,
  :mod:`~attngraph.train.tasks.graphs`, :mod:`~attngraph.train.tasks.images`,
  :mod:`~attngraph.train.tasks.objects`, :mod:`~attngraph.train.tasks.captions`,
  :mod:`~attngraph.train.tasks.drawing`, :mod:`~attngraph.train.tasks.handwriting`,
  :mod:`~attngraph.train.tasks.speech`.
"""
