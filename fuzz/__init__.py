"""A grammar-aware mutation fuzzer for attngraph specs.

Seeds are the catalog (``specs/*.yaml``), the mechanisms of the literature
(``mechanisms/*.yaml``), every whole spec in ``docs/spec-language.md`` and the
fuzzer's own specs of the open algebra (``fuzz/formula_seeds.yaml``);
:mod:`fuzz.mutate` derives mutants that know the language (kinds, fields,
references, blocks, the formula grammar and params) as well as plain text damage;
:mod:`fuzz.oracle` runs one mutant through the front end, the compiler and a
forward and backward pass and classifies what happened; :mod:`fuzz.run` drives
many mutants in worker processes with a time and memory limit each.

Around the spec, :mod:`fuzz.surface` and one module per surface
(:mod:`fuzz.surface_data`, :mod:`fuzz.surface_rundir`, :mod:`fuzz.surface_export`,
:mod:`fuzz.surface_plugin`) damage data files, run directories, names through every
export format, and plugins, under the same oracle (docs/fuzzing.md).

Run ``python -m fuzz.run --count 100000`` (``make fuzz`` runs it, then
``--surface around``); ``--focus formulas`` for the algebra.
"""
