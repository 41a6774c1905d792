"""Cluster router: the single-nearest-cluster form of Avengers-Pro. k-means on the question
embeddings of the training items; per cluster, each solver's accuracy and mean cost, each min-max
normalised across the solvers of that cluster (the paper's normalisation); a question goes to the
argmax of alpha * accuracy~ + (1 - alpha) * (1 - cost~) in its one nearest cluster. alpha = 1 is
pure performance, alpha = 0 pure thrift.

`avengers_pro` (routers/avengers_pro.py) is the paper's router: the same profiles, but a question
aggregates the scores of its top-p nearest clusters (distance-weighted). It subclasses this one and
changes only `cluster_weights`; with top_p = 1 the two choose alike (a test checks)."""

from __future__ import annotations

import numpy as np

from delegation_lab.routers.base import Inputs, Outcome, Router, kept


def kmeans(x: np.ndarray, k: int, iterations: int, rng: np.random.Generator) -> np.ndarray:
    """Centroids [k, d]: k-means++ start, then batched Lloyd iterations."""
    k = min(k, x.shape[0])
    centres = [x[rng.integers(x.shape[0])]]
    d2 = ((x - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        centres.append(x[rng.choice(x.shape[0], p=d2 / d2.sum()) if d2.sum() > 0 else rng.integers(x.shape[0])])
        d2 = np.minimum(d2, ((x - centres[-1]) ** 2).sum(axis=1))
    c = np.stack(centres)
    for _ in range(iterations):
        assign = nearest(x, c)
        onehot = (assign[:, None] == np.arange(k)[None, :]).astype(x.dtype)  # [n, k]: sums as one matmul
        counts = onehot.sum(axis=0)
        new = np.where(counts[:, None] > 0, (onehot.T @ x) / np.maximum(counts, 1)[:, None], c)
        if np.array_equal(new, c):
            break
        c = new
    return c


def sq_distances(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """[n, k] squared Euclidean distances less each row's own |x|^2 (no order or softmax sees it)."""
    return (centres**2).sum(axis=1)[None, :] - 2.0 * (x @ centres.T)


def nearest(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    return sq_distances(x, centres).argmin(axis=1)


def _minmax(v: np.ndarray) -> np.ndarray:
    lo, hi = v.min(axis=1, keepdims=True), v.max(axis=1, keepdims=True)
    return np.where(hi > lo, (v - lo) / np.where(hi > lo, hi - lo, 1.0), 1.0)


class ClusterRouter(Router):
    knob = "alpha"
    features = "embedding"

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        emb = np.asarray(x.embedding, dtype=np.float32)
        self.centres = kmeans(emb, self.params.clusters, self.params.iterations, np.random.default_rng(seed)).astype(np.float32)
        assign = nearest(emb, self.centres)
        k, s = self.centres.shape[0], len(self.solvers)
        counts = np.bincount(assign, minlength=k).astype(float)
        acc, cst = np.zeros((k, s)), np.zeros((k, s))
        np.add.at(acc, assign, correct.astype(float))
        np.add.at(cst, assign, cost)
        empty = counts == 0  # an empty cluster falls back to the global rates
        self.cluster_accuracy = np.where(empty[:, None], correct.mean(axis=0), acc / np.maximum(counts, 1)[:, None])
        self.cluster_cost = np.where(empty[:, None], cost.mean(axis=0), cst / np.maximum(counts, 1)[:, None])

    def cluster_weights(self, x: Inputs) -> np.ndarray:
        """[n, k]: how much each cluster's profile counts for each question (here: 1 for its nearest)."""
        c = nearest(np.asarray(x.embedding, dtype=np.float32), self.centres)
        return (c[:, None] == np.arange(self.centres.shape[0])[None, :]).astype(float)

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        w = self.cluster_weights(x)
        return w @ self.cluster_accuracy, w @ self.cluster_cost

    def _choose(self, x: Inputs, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w = self.cluster_weights(x)
        score = alpha * _minmax(self.cluster_accuracy) + (1 - alpha) * (1 - _minmax(self.cluster_cost))  # [k, S]
        return (w @ score).argmax(axis=1), w @ self.cluster_accuracy, w @ self.cluster_cost

    def evaluate(self, x, item_ids, correct, cost, knob, verifier, seed) -> Outcome:
        chosen, acc, _ = self._choose(x, knob)
        return kept(chosen, correct, cost, acc)

    def route(self, x: Inputs, knob: float):
        chosen, acc, exp_cost = self._choose(x, knob)
        return chosen, acc, exp_cost[np.arange(len(chosen)), chosen]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"centres": self.centres, "cluster_accuracy": self.cluster_accuracy, "cluster_cost": self.cluster_cost}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.centres = np.asarray(arrays["centres"], dtype=np.float32)
        self.cluster_accuracy = np.asarray(arrays["cluster_accuracy"], dtype=float)
        self.cluster_cost = np.asarray(arrays["cluster_cost"], dtype=float)
