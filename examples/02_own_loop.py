"""Train a spec in your own loop, with the REINFORCE term for hard attention.

A compiled module returns its declared outputs; the loss is cross-entropy on
``logits``. A spec whose policy samples (``estimator: reinforce``) records each
step's log-probabilities on the module, and ``model_reinforce_loss`` turns a
per-example reward into the policy-gradient term (with a learned baseline).
The built-in training (``attngraph train``, ``attngraph.train.engine.loop.train``)
runs the same step as :func:`attngraph.train.engine.step.train_step`.

    python examples/02_own_loop.py [STEPS]
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import attngraph
from attngraph import load_spec
from attngraph.lower.rules.hard import model_reinforce_loss
from attngraph.train.tasks.lookup import bind_inputs, get_task

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)  # these models are tiny: more threads only add overhead


def train(spec: str, steps: int, batch: int = 32, lr: float = 3e-3) -> list[float]:
    """Train ``spec`` on its own task for ``steps`` steps; the losses."""
    torch.manual_seed(0)
    graph = load_spec(spec)
    task = get_task(graph.train.task, seed=0, **graph.train.options)
    model = attngraph.compile(graph, seed=0)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        b = task.batch(batch)
        out = model(**bind_inputs(graph, task, b))        # spec inputs <- batch fields
        logits, target = out["logits"], b[task.target]
        loss = F.cross_entropy(logits, target)
        # REINFORCE: reward 1 for a right answer; zero for specs without a policy
        reward = (logits.argmax(-1) == target).float()
        loss = loss + model_reinforce_loss(model, reward)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main(steps: int = 20) -> dict[str, list[float]]:
    res = {}
    for name in ("global_attention", "glimpse_hard"):  # soft, then hard attention
        losses = train(str(ROOT / "specs" / f"{name}.yaml"), steps)
        print(f"{name:<18} loss {losses[0]:.3f} -> {losses[-1]:.3f} in {steps} steps")
        res[name] = losses
    return res


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
