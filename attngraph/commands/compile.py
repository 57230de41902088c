"""``attngraph compile SPEC``: lower a spec, list its parameters, run one forward."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from attngraph.cli import main, run_stage, spec_or_run_argument
from attngraph.commands import MAX_BATCH, MAX_LENGTH, MAX_SEED, load_spec_or_run

if TYPE_CHECKING:
    from attngraph.passes import Pipeline


def param_table(model: object) -> str:
    """Parameters per node: ``node  kind  count  name shape, ...``; a node that shares
    another's parameters (``share``, ``tie``) says whose, and counts none of them."""
    graph = model.graph  # type: ignore[attr-defined]
    kinds = {n.id: n.kind for n in graph.nodes}
    rows = []
    owner: dict[int, str] = {}
    total = 0
    for nid, mod in model.nodes.items():  # type: ignore[attr-defined]
        params = list(mod.named_parameters())
        own = [(k, p) for k, p in params if id(p) not in owner]
        shared = sorted({owner[id(p)] for _, p in params if id(p) in owner})
        for _, p in own:
            owner[id(p)] = nid
        count = sum(p.numel() for _, p in own)
        total += count
        shapes = ", ".join(f"{k} {tuple(p.shape)}" for k, p in own)
        if shared:
            shapes = ", ".join(x for x in (shapes, f"shares those of {', '.join(shared)}") if x)
        rows.append((nid, kinds.get(nid, ""), count, shapes))
    w_id = max((len(r[0]) for r in rows), default=4)
    w_kind = max((len(r[1]) for r in rows), default=4)
    lines = [f"  {n:<{w_id}}  {k:<{w_kind}}  {c:>10,}  {sh}".rstrip() for n, k, c, sh in rows]
    lines.append(f"parameters: {total:,}")
    return "\n".join(lines)




def _names(pipeline: Pipeline) -> set[str]:
    return {p.name for p in pipeline.passes}


@main.command("compile")
@spec_or_run_argument
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True,
              help="Initialisation seed (0 to 2**63-1).")
@click.option("--batch", type=click.IntRange(1, MAX_BATCH), default=2, show_default=True,
              help=f"Batch of the test run (1 to {MAX_BATCH}).")
@click.option("--length", type=click.IntRange(1, MAX_LENGTH), default=5, show_default=True,
              help=f"Size given to every symbolic length (N, T, ...), 1 to {MAX_LENGTH}.")
@click.option("--no-fuse", is_flag=True,
              help="Skip the optimising passes (attention fusion, linear attention, hoisting "
              "out of loops).")
@click.option("--module", "show_module", is_flag=True, help="Also print the nn.Module tree.")
@click.option("--print-after", "print_after", multiple=True, metavar="PASS",
              help="Print the IR after this pass (infer_shapes, fuse_attention, "
              "linear_attention, hoist_invariants); repeatable.")
@click.option("--allow-large", is_flag=True, help="Accept specs over the size limits.")
@run_stage
def compile_cmd(spec: str, seed: int, batch: int, length: int, no_fuse: bool,
                show_module: bool, print_after: tuple[str, ...], allow_large: bool) -> None:
    """Lower SPEC (a spec file, or a run directory: its spec) to a PyTorch module, list
    parameters per node, run one forward.

    The forward runs on random inputs of the declared types; errors at run time
    name the node and its line in SPEC. ``--print-after PASS`` prints the IR as
    that pass leaves it (the pipelines verify the graph after every pass).
    """
    import torch

    from attngraph.lower import compile as lower
    from attngraph.lower.runtime.examples import random_inputs
    from attngraph.passes import FRONT, OPTIMIZE, PASSES

    for name in print_after:
        PASSES[name]  # noqa: B018 - an unknown pass fails with the known names
    front, optimize = (
        pipe.with_print_after([p for p in print_after if p in _names(pipe)], click.echo)
        for pipe in (FRONT, OPTIMIZE)
    )
    # the guard checks the sizes this command will run at
    graph = load_spec_or_run(spec, allow_large=allow_large, front=front, batch=batch,
                             length=length)
    model = lower(graph, seed=seed, fuse=not no_fuse, optimize=optimize)
    click.echo(f"{spec}: {model.graph.name}")
    if show_module:
        click.echo(str(model))
    click.echo(param_table(model))
    gen = torch.Generator().manual_seed(seed)
    try:
        inputs = random_inputs(model.graph, batch=batch, length=length, generator=gen)
    except (MemoryError, RuntimeError) as exc:
        from attngraph.errors import LoweringError, SourceLoc

        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        msg = f"cannot make test inputs of batch {batch} and length {length}: {first}"
        raise LoweringError(msg, SourceLoc(spec), "give a smaller --batch or --length") from None
    click.echo("inputs:  " + ", ".join(f"{k} {tuple(v.shape)}" for k, v in inputs.items()))
    model.eval()
    with torch.no_grad():
        out = model(**inputs)
    click.echo("outputs: " + ", ".join(f"{k} {tuple(v.shape)}" for k, v in out.items()))
