"""A real model as a compiled spec with its weights; written as a run directory.

:func:`load_model` picks the real-model spec for a checkpoint's ``model_type``
(or takes the one given), sets its dims from the configuration (through the name
map's ``dims`` formulas), compiles it, and fills every parameter from the
checkpoint through the name map (:func:`attngraph.realmodels.mapping.map_tensors`).
:func:`import_model` then writes a run directory that ``load_run`` and every
command reading runs accept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attngraph.errors import SourceLoc, SpecError, TrainingError
from attngraph.realmodels.mapping import map_tensors, strip_prefixes
from attngraph.realmodels.names import NameMap, config_dims, load_names, names_path
from attngraph.realmodels.source import Checkpoint, read_source

if TYPE_CHECKING:
    from torch import nn

    from attngraph.ir.graph import Graph

__all__ = ["REAL_SPECS", "Imported", "load_model", "real_specs", "spec_for", "with_dims"]

#: The folder of real-model specs and their name maps.
REAL_SPECS = Path(__file__).resolve().parent.parent.parent / "specs" / "real"
_DIMS = re.compile(r"^dims:[ \t]*\{[^\n]*\}[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Imported:
    """A real model as a spec: its text (dims set), graph, model and where it came from."""

    spec_text: str
    spec_file: str
    graph: Graph
    model: nn.Module
    names: NameMap
    dims: dict[str, int]
    source: Checkpoint


def real_specs(folder: str | Path = REAL_SPECS) -> dict[str, Path]:
    """``model_type`` -> the spec that reads it, for every name map in ``folder``."""
    out: dict[str, Path] = {}
    for names_file in sorted(Path(folder).glob("*.names.yaml")):
        spec = names_file.with_name(names_file.name.removesuffix(".names.yaml") + ".yaml")
        for t in load_names(names_file).model_types:
            out.setdefault(t, spec)
    return out


def spec_for(config: dict[str, Any], config_file: str) -> Path:
    """The real-model spec for a configuration's ``model_type``.

    Raises
    ------
    TrainingError
        At the configuration: no ``model_type``, or one no spec reads.
    """
    known = real_specs()
    kind = config.get("model_type")
    if kind not in known:
        msg = f"no real-model spec reads model_type {kind!r}"
        raise TrainingError(msg, SourceLoc(config_file), "specs/real/ reads: "
                            f"{', '.join(sorted(known))}; give your own with --spec "
                            "(and its .names.yaml beside it)")
    return known[kind]


def with_dims(text: str, dims: dict[str, int], file: str = "<spec>") -> str:
    """``text`` with its one-line ``dims: {...}`` mapping set to ``dims``.

    The rest of the text (comments, positions of every other line) is unchanged.

    Examples
    --------
    >>> with_dims("name: x\\ndims: {d: 768}\\n", {"d": 32})
    'name: x\\ndims: {d: 32}\\n'
    """
    if len(_DIMS.findall(text)) != 1:
        msg = "a real-model spec writes its dims on one line, `dims: {name: size, ...}`"
        raise SpecError(msg, SourceLoc(file), "write the dims mapping on one line")
    line = "dims: {" + ", ".join(f"{k}: {v}" for k, v in dims.items()) + "}"
    return _DIMS.sub(line, text, count=1)


def load_model(source: str | Path, *, spec: str | Path | None = None,
               config: str | Path | None = None, dims: dict[str, int] | None = None,
               seed: int = 0) -> Imported:
    """A real model as a compiled spec holding the checkpoint's weights.

    Parameters
    ----------
    source : str or Path
        A ``transformers`` model directory, or a safetensors file.
    spec : str or Path, optional
        The spec (its name map beside it); default: the one of specs/real/ for the
        configuration's ``model_type``.
    config : str or Path, optional
        The ``config.json`` (default: the one in or beside ``source``).
    dims : dict, optional
        Dims to set besides those the name map computes from the configuration.
    seed : int
        The compile seed (every parameter is then overwritten).

    Raises
    ------
    TrainingError
        The source cannot be read, or its tensors do not fit the spec (a missing,
        extra or wrongly-shaped tensor, named with the parameter and both shapes).
    SpecError
        The spec, its name map, or a setting of the configuration the spec does not
        compute.
    """
    import torch

    from attngraph.frontend import loads_spec
    from attngraph.lower import compile as lower
    from attngraph.source import load

    ck = read_source(source, config=config)
    spec_path = Path(spec) if spec is not None else spec_for(ck.config, ck.config_file)
    names = load_names(names_path(spec_path))
    if ck.config.get("model_type") not in names.model_types:
        msg = (f"the model's model_type is {ck.config.get('model_type')!r}, but the name map "
               f"of {spec_path.name} reads {', '.join(names.model_types)}")
        raise SpecError(msg, SourceLoc(ck.config_file), "give the spec of this model's family, "
                        "or none: import picks it by model_type")
    got = {**config_dims(names, ck.config, ck.config_file), **(dims or {})}
    text = with_dims(load(spec_path).text, got, str(spec_path))
    graph = loads_spec(text, str(spec_path), allow_large=True)
    model = lower(graph, seed=seed)
    params = _distinct(model)
    tensors = strip_prefixes(ck.tensors, names.prefixes)
    state = map_tensors(names, got, tensors, {k: tuple(p.shape) for k, p in params.items()},
                        file=ck.weights_file)
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(state[name])
    model.eval()
    return Imported(text, str(spec_path), graph, model, names, got, ck)


def _distinct(model: nn.Module) -> dict[str, Any]:
    """The model's parameters by name, each once (a tied table under its first name)."""
    return dict(model.named_parameters())
