"""The range of a run's seed: what torch, numpy and ``random`` all accept.

A run's seed seeds torch's generator (:func:`torch.manual_seed`, at most
``2**64 - 1``), numpy's (:func:`numpy.random.default_rng`, never negative) and
each epoch's shuffle (``seed * 1_000_003 + epoch``, which must stay below
``2**64``). ``0 .. 2**32 - 1`` fits all of them, so ``train --seed``,
``compare --seeds`` and a seed stored in a run's checkpoint are held to it.

Examples
--------
>>> seed_problem(7) is None, seed_problem(-1)
(True, 'seed -1 is out of range (0 to 4294967295)')
"""

from __future__ import annotations

from attngraph.errors import whole

__all__ = ["MAX_SEED", "SEED_HINT", "seed_problem"]

#: Largest seed a run takes (the smallest of torch's, numpy's and the shuffle's limits).
MAX_SEED = 2**32 - 1
#: What to do about a seed out of range.
SEED_HINT = f"give a seed from 0 to {MAX_SEED}"


def seed_problem(value: object) -> str | None:
    """What is wrong with ``value`` as a run's seed, or None when it is one."""
    if not whole(value):
        return f"seed {value!r:.40} is not a whole number"
    if not 0 <= value <= MAX_SEED:
        shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:20]}..."
        return f"seed {shown} is out of range (0 to {MAX_SEED})"
    return None
