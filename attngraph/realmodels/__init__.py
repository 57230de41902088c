"""Real models in: the transformer families as specs, with their weights.

The specs of specs/real/ (GPT-2, Llama, BERT, T5) equal their ``transformers``
models; each has a name map beside it that says which checkpoint tensor is which
parameter. :func:`load_model` reads a ``transformers`` directory or safetensors
file into the compiled spec, :func:`import_model` writes it as a run directory
(``attngraph import``), and :func:`attend_text` draws every layer's and head's
weights over a text. See docs/real-models.md.
"""

from attngraph.realmodels.build import REAL_SPECS, Imported, load_model, real_specs, with_dims
from attngraph.realmodels.names import NameMap, load_names
from attngraph.realmodels.rundir import import_model
from attngraph.train.pictures.layers import attend_text

__all__ = ["REAL_SPECS", "Imported", "NameMap", "attend_text", "import_model", "load_model",
           "load_names", "real_specs", "with_dims"]
