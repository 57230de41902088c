"""A plugin module as a user would write one: scorer functions for `--plugin`.

``bilinear_heads`` is a correct scorer with its own parameters per head (it is told
the head count) that reads the keys' padding mask; the others fail in each way a
registered function can, for the tests of located errors.
"""

from __future__ import annotations

from attngraph.kinds import SCORERS, ScorerInfo, register_scorer


def make_bilinear(dq, dk, hidden, heads=None):
    """qᵀ W_h k per head h; padded keys are pushed down (the softmax masks them too)."""
    import torch
    from torch import nn

    class Bilinear(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            shape = ((heads,) if heads else ()) + (dq, dk)
            self.W = nn.Parameter(torch.randn(shape) / dq**0.5)

        def forward(self, q, k, mask=None):  # (B, [h,] M, dq), (B, [h,] N, dk)
            s = q @ self.W @ k.transpose(-1, -2)
            if mask is not None:
                s = s.masked_fill(~mask, -1e4)
            return s

    return Bilinear()


def make_raising(dq, dk, hidden):
    msg = "this scorer needs dq == 3"
    raise ValueError(msg)


def make_forward_raises(dq, dk, hidden):
    from torch import nn

    class Broken(nn.Module):
        def forward(self, q, k):
            return {}["missing"]

    return Broken()


def make_wrong_shape(dq, dk, hidden):
    from torch import nn

    class Flat(nn.Module):
        def forward(self, q, k):
            return q.sum(-1)  # (B, M), not (B, M, N)

    return Flat()


def make_headless(dq, dk, hidden):
    """Parameters, but no way to be told the head count."""
    return make_bilinear(dq, dk, hidden)


def _bad_params(dq, dk, hidden):
    return 1 // 0


def make_two_params(dq, dk, hidden, heads=None):
    import torch
    from torch import nn

    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Parameter(torch.zeros(2))

        def forward(self, q, k):
            return q @ k.transpose(-1, -2)

    return Two()


for info in (
    ScorerInfo("bilinear_heads", "qᵀ W_h k", params=lambda dq, dk, h: dq * dk,
               make=make_bilinear),
    ScorerInfo("raising_make", "!", make=make_raising),
    ScorerInfo("raising_forward", "!", same_size=True, make=make_forward_raises),
    ScorerInfo("wrong_shape", "!", same_size=True, make=make_wrong_shape),
    ScorerInfo("raising_params", "!", params=_bad_params, make=make_two_params),
    ScorerInfo("headless", "qᵀ W k", params=lambda dq, dk, h: dq * dk, make=make_headless),
    ScorerInfo("miscounted", "!", same_size=True, params=lambda dq, dk, h: 5,
               make=make_two_params),
):
    if info.name not in SCORERS:
        register_scorer(info)
