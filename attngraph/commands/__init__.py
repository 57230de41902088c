"""CLI subcommands; every module here registers its commands on ``attngraph.cli.main``.

The bounds shared by the commands' options live here, in a module that imports
nothing of the CLI, so that any command module can be imported first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attngraph.ir.graph import Graph

#: Bounds of a compile or export's test run: a seed torch takes, and sizes that fit
#: a shape check (a larger forward belongs in a benchmark or in training).
MAX_SEED = 2**63 - 1
MAX_BATCH = 256
MAX_LENGTH = 4096


def load_spec_or_run(path: str, *, allow_large: bool = False, **front: Any) -> Graph:
    """The spec at ``path``: a spec file, or a run directory (``attngraph train`` or
    ``attngraph import`` wrote it): its ``spec.yaml`` where it has one, else the spec
    text its checkpoint holds (the spec it was trained from). ``front``: what
    :func:`~attngraph.frontend.load_spec` takes besides (its passes, and the batch and
    length the resource guard checks at).

    Raises
    ------
    AttnGraphError
        What reading the spec raises; a directory that is neither is a located error.
    """
    from pathlib import Path

    from attngraph.errors import SourceLoc, SpecError
    from attngraph.frontend import load_spec, loads_spec

    folder = Path(path)
    try:
        is_dir = folder.is_dir()
    except OSError:  # a name the system refuses (too long): load_spec says so, located
        is_dir = False
    if not is_dir:
        return load_spec(path, allow_large=allow_large, **front)
    from attngraph.train.data.inputs import SPEC_FILE
    from attngraph.train.store.checkpoints import CHECKPOINT, load_checkpoint

    if (folder / SPEC_FILE).is_file():
        return load_spec(str(folder / SPEC_FILE), allow_large=allow_large, **front)
    if (folder / CHECKPOINT).is_file():
        ckpt = load_checkpoint(folder)
        # the run's spec was accepted when it trained: its size is not checked again,
        # unless the caller runs it at sizes of its own
        sized = front.get("batch") is not None or front.get("length") is not None
        return loads_spec(ckpt.spec_text, ckpt.spec_file,
                          allow_large=allow_large or not sized, **front)
    msg = f"a directory, but neither a spec file nor a run (it has no {SPEC_FILE} or {CHECKPOINT})"
    raise SpecError(msg, SourceLoc(path), "give a spec file, or a run directory that "
                    "attngraph train or attngraph import wrote")
