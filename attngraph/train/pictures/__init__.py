"""Pictures of what a model attended to (``attngraph attend``), and of a report.

- :mod:`~attngraph.train.pictures.attend`: picks the view for a spec and draws it;
  draws a trained run's example.
- The views: :mod:`~attngraph.train.pictures.matrix` (a heatmap with named axes),
  :mod:`~attngraph.train.pictures.image` (glimpses, tiles),
  :mod:`~attngraph.train.pictures.steps` (one panel per step),
  :mod:`~attngraph.train.pictures.window` (Graves' window),
  :mod:`~attngraph.train.pictures.drawing` (a canvas drawn step by step),
  :mod:`~attngraph.train.pictures.heads` (a memory's write and read heads),
  :mod:`~attngraph.train.pictures.layers` (every layer's and head's weights of an
  imported model over a text).
- :mod:`~attngraph.train.pictures.confusion`: a classifier's confusion matrix.
- :mod:`~attngraph.train.pictures.plot`: headless pyplot and saving, shared by all.
"""
