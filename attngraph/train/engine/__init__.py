"""What every way to train shares: the step, the device and the one step loop.

- :mod:`~attngraph.train.engine.step`: the one training step, its settings and
  defaults, the evaluation and the RNG policy.
- :mod:`~attngraph.train.engine.device`: where training and inference run.
- :mod:`~attngraph.train.engine.loop`: the step loop
  (:func:`~attngraph.train.engine.loop.step_loop`), which both the Python API
  :func:`~attngraph.train.engine.loop.train` and the CLI's run
  (:func:`attngraph.train.run.runner.run`) drive.
"""
