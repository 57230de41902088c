"""Graph node classification: Zachary's karate club and stochastic block models."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from attngraph.train.tasks.base import IGNORE, Task, register_task

if TYPE_CHECKING:
    import numpy as np


def _split(rng: np.random.Generator, labels: np.ndarray, per_class: int) -> np.ndarray:
    """Boolean mask of ``per_class`` training nodes drawn from each class."""
    import numpy as np

    train = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        nodes = np.flatnonzero(labels == c)
        train[rng.choice(nodes, size=min(per_class, len(nodes) - 1), replace=False)] = True
    return train


def _targets(labels: np.ndarray, train: np.ndarray, split: str) -> np.ndarray:
    """Labels of the split's nodes, :data:`IGNORE` elsewhere."""
    import numpy as np

    keep = train if split == "train" else ~train
    return np.where(keep, labels, IGNORE)


@register_task("karate")
class Karate(Task):
    """Which of the two factions each of the 34 karate club members joined.

    Features are one-hot node ids [34, 34] (the model learns from the graph
    only); adjacency is the friendship graph. The same graph comes in every
    batch; ``train_per_class`` members per faction are labelled for training
    (drawn with the seed) and the rest are the validation nodes.
    """

    provides = {"graph": "graph"}
    area = "graph modeling"
    defaults = {"train_per_class": 4}

    def check(self) -> None:
        if self.opts["train_per_class"] < 1:
            self.fail("train_per_class must be >= 1")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import networkx as nx
        import numpy as np

        g = nx.karate_club_graph()
        n = g.number_of_nodes()
        labels = np.array([0 if g.nodes[i]["club"] == "Mr. Hi" else 1 for i in range(n)])
        adj = nx.to_numpy_array(g, nodelist=range(n)) > 0
        split_rng = np.random.default_rng([self.seed, 2])
        train = _split(split_rng, labels, self.opts["train_per_class"])
        target = _targets(labels, train, split)
        feats = np.eye(n, dtype=np.float32)
        return {"graph": np.broadcast_to(feats, (size, n, n)),
                "graph_adjacency": np.broadcast_to(adj, (size, n, n)),
                "target": np.broadcast_to(target, (size, n))}


@register_task("sbm")
class StochasticBlockModel(Task):
    """Node classification on graphs from a stochastic block model.

    Each example is a fresh graph of ``nodes`` nodes in ``blocks`` equal
    communities, edges with probability ``p_in`` within and ``p_out`` across.
    A node's features [dim] are Gaussian noise plus ``signal`` times a one-hot
    of its community in the first ``blocks`` coordinates, so neighbours'
    features help. Training graphs label ``train_per_class`` nodes per
    community; validation graphs label every node.
    """

    provides = {"graph": "graph"}
    area = "graph modeling"
    defaults = {"nodes": 40, "blocks": 2, "p_in": 0.3, "p_out": 0.02, "dim": 16,
                "signal": 0.7, "train_per_class": 4}

    def check(self) -> None:
        o = self.opts
        if o["blocks"] < 2 or o["nodes"] < 2 * o["blocks"] or o["dim"] < o["blocks"]:
            self.fail("needs blocks >= 2, nodes >= 2·blocks and dim >= blocks")
        if not (0 <= o["p_out"] <= 1 and 0 <= o["p_in"] <= 1):
            self.fail("p_in and p_out are probabilities")

    def sample(self, rng: np.random.Generator, size: int, split: str) -> dict[str, Any]:
        import numpy as np

        o = self.opts
        n, k = o["nodes"], o["blocks"]
        feats = np.empty((size, n, o["dim"]), dtype=np.float32)
        adj = np.empty((size, n, n), dtype=bool)
        target = np.empty((size, n), dtype=np.int64)
        for b in range(size):
            labels = rng.permutation(np.arange(n) % k)
            same = labels[:, None] == labels[None, :]
            prob = np.where(same, o["p_in"], o["p_out"])
            upper = np.triu(rng.random((n, n)) < prob, 1)
            adj[b] = upper | upper.T
            feats[b] = rng.normal(size=(n, o["dim"]))
            feats[b, np.arange(n), labels] += o["signal"]
            if split == "train":
                target[b] = _targets(labels, _split(rng, labels, o["train_per_class"]), split)
            else:
                target[b] = labels
        return {"graph": feats, "graph_adjacency": adj, "target": target}
