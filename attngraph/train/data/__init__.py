"""The user's data (``attngraph train --data``), made into what the loop draws.

- :mod:`~attngraph.train.data.records`: data files read into located records.
- :mod:`~attngraph.train.data.vocab`: tokenising, vocabularies, label names.
- :mod:`~attngraph.train.data.encoding`: how records become arrays (fields,
  vocabularies, labels).
- :mod:`~attngraph.train.data.datajson`: a data run's ``data.json``, checked whole.
- :mod:`~attngraph.train.data.batches`: every batch the loop trains on, through a
  ``DataLoader``: a data file's task and a built-in task's stream.
- :mod:`~attngraph.train.data.autosize`: the ``auto`` sizes decided by the data.
- :mod:`~attngraph.train.data.inputs`: what the Python workflow takes as a spec and
  as data, made into files.
- :mod:`~attngraph.train.data.runtext`: an imported run's text, read and written by
  its own tokenizer (else as ids).
- :mod:`~attngraph.train.data.tokenized`: records read by an imported model's
  tokenizer, and what it learns from them (fine-tuning an import).
"""
