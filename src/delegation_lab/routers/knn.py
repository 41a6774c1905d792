"""kNN router: a solver's predicted accuracy (and cost) on a question is its success rate (mean
cost) among the k most similar training questions (cosine of the embeddings, after a PCA fitted on
the training items); pick argmax accuracy - lambda * cost / reference cost. The field's strongest
simple baseline (RouterBench, LLMRouterBench).

Search is batched and, by default, inverted-file approximate (as faiss' IVF): the training items
are split into `cells` k-means cells; a question is compared with the items of the `probe` cells
nearest its own cell's centroid only, which keeps 1e5 questions well under a second. `cells: 0` is
the exact search (a test bounds the difference)."""

from __future__ import annotations

import numpy as np
import torch

from delegation_lab.routers.base import Inputs, Router
from delegation_lab.routers.cluster import kmeans


def pca(x: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean [d], components [d, dim]) of the rows of x: the top eigenvectors of the [d, d] covariance
    (an SVD of the [n, d] rows computed the [n, d] left factor we never use: 45 % of the stage's CPU).
    Each component's sign is fixed (largest entry positive) so the projection is reproducible."""
    mean = x.mean(axis=0)
    centred = x - mean
    values, vectors = np.linalg.eigh(centred.T @ centred)
    top = vectors[:, np.argsort(values, kind="stable")[::-1][: min(dim, x.shape[1], x.shape[0])]]
    signs = np.sign(top[np.abs(top).argmax(axis=0), np.arange(top.shape[1])])
    return mean, np.ascontiguousarray(top * np.where(signs == 0, 1.0, signs))


class KnnRouter(Router):
    features = "embedding (PCA)"

    def _project(self, emb: np.ndarray) -> torch.Tensor:
        z = (np.asarray(emb, dtype=np.float32) - self.pca_mean) @ self.components
        z /= np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)
        return torch.from_numpy(np.ascontiguousarray(z, dtype=np.float32))

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        mean, comp = pca(np.asarray(x.embedding, dtype=np.float64), self.params.search_dim)
        self.pca_mean, self.components = mean.astype(np.float32), comp.astype(np.float32)
        self.bank = self._project(x.embedding).numpy()
        self.bank_correct = np.asarray(correct, dtype=np.float32)
        self.bank_cost = np.asarray(cost, dtype=np.float32)
        self._index(seed)

    def _index(self, seed: int) -> None:
        """Cells (k-means on the projected bank) and each cell's candidate list (its `probe` nearest cells' items)."""
        cells = self.params.cells
        n = self.bank.shape[0]
        if cells == 0 or n < cells * self.params.k:
            self.centroids, self.candidates = np.zeros((0, self.bank.shape[1]), np.float32), np.zeros((0, 0), np.int64)
            return
        self.centroids = kmeans(self.bank, cells, 20, np.random.default_rng(seed)).astype(np.float32)
        assign = (self.bank @ self.centroids.T).argmax(axis=1)
        near = np.argsort(-(self.centroids @ self.centroids.T), axis=1, kind="stable")[:, : self.params.probe]
        lists = [np.flatnonzero(np.isin(assign, row)) for row in near]
        width = max(len(v) for v in lists)
        self.candidates = np.full((len(lists), width), -1, dtype=np.int64)
        for c, v in enumerate(lists):
            self.candidates[c, : len(v)] = v

    @torch.no_grad()
    def predict(self, x: Inputs, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray]:
        q = self._project(x.embedding)
        bank = torch.from_numpy(self.bank)
        labels = torch.from_numpy(np.concatenate([self.bank_correct, self.bank_cost], axis=1))
        out = torch.empty((q.shape[0], labels.shape[1]))
        if self.candidates.shape[0] == 0:  # exact
            k = min(self.params.k, bank.shape[0])
            for i in range(0, q.shape[0], chunk):
                idx = torch.topk(q[i:i + chunk] @ bank.T, k, dim=1, sorted=False).indices  # [c, k]
                out[i:i + chunk] = labels[idx].mean(dim=1)
        else:
            cell = (q @ torch.from_numpy(self.centroids).T).argmax(dim=1).numpy()
            order = np.argsort(cell, kind="stable")
            bounds = np.searchsorted(cell[order], np.arange(self.candidates.shape[0] + 1))
            for c in range(self.candidates.shape[0]):
                rows = torch.from_numpy(order[bounds[c]:bounds[c + 1]])
                if rows.numel() == 0:
                    continue
                cand = self.candidates[c]
                cand = torch.from_numpy(cand[cand >= 0])
                k = min(self.params.k, cand.numel())
                idx = torch.topk(q[rows] @ bank[cand].T, k, dim=1, sorted=False).indices
                out[rows] = labels[cand[idx]].mean(dim=1)
        out = out.numpy().astype(float)
        s = len(self.solvers)
        return out[:, :s], out[:, s:]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"pca_mean": self.pca_mean, "components": self.components, "bank": self.bank,
                "bank_correct": self.bank_correct, "bank_cost": self.bank_cost, "centroids": self.centroids,
                "candidates": self.candidates}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        for key in ("pca_mean", "components", "bank", "bank_correct", "bank_cost", "centroids"):
            setattr(self, key, np.asarray(arrays[key], dtype=np.float32))
        self.candidates = np.asarray(arrays["candidates"], dtype=np.int64)
