"""The algebra under the named kinds: formulas, their functions, named axes.

- :mod:`~attngraph.algebra.formula`: the grammar (text -> tree, located errors), whose
  node types and walks are :mod:`~attngraph.algebra.tree`;
- :mod:`~attngraph.algebra.functions`: the registry of formula functions, with traits;
- :mod:`~attngraph.algebra.axes`: what each axis of a value means;
- :mod:`~attngraph.algebra.program`: a formula's static meaning and its program, over
  the values of :mod:`~attngraph.algebra.values`, constants folded by
  :mod:`~attngraph.algebra.fold`; :mod:`~attngraph.algebra.take` lays out ``take()``.

The ``expr`` and ``param`` kinds (:mod:`attngraph.kinds.algebra`) are built on it;
nothing here imports torch.
"""

from attngraph.algebra.formula import FormulaError, parse
from attngraph.algebra.functions import FUNCTIONS, Function, register_function

__all__ = ["FUNCTIONS", "Function", "FormulaError", "parse", "register_function"]
