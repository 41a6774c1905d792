"""kNN router: a solver's predicted accuracy (and cost) on a question is its success rate (mean
cost) among the k most similar training questions (cosine of the embeddings, after a PCA fitted on
the training items); pick argmax accuracy - lambda * cost / reference cost. The field's strongest
simple baseline (RouterBench, LLMRouterBench)."""

from __future__ import annotations

import numpy as np
import torch

from delegation_lab.routers.base import Inputs, Router


def pca(x: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean [d], components [d, dim]) of the rows of x."""
    mean = x.mean(axis=0)
    _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
    return mean, vt[: min(dim, vt.shape[0])].T.copy()


class KnnRouter(Router):
    name = "knn"

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

    @torch.no_grad()
    def predict(self, x: Inputs, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray]:
        q = self._project(x.embedding)
        bank = torch.from_numpy(self.bank)
        labels = torch.from_numpy(np.concatenate([self.bank_correct, self.bank_cost], axis=1))
        k = min(self.params.k, bank.shape[0])
        out = torch.empty((q.shape[0], labels.shape[1]))
        for i in range(0, q.shape[0], chunk):
            idx = torch.topk(q[i:i + chunk] @ bank.T, k, dim=1, sorted=False).indices  # [c, k]
            out[i:i + chunk] = labels[idx].mean(dim=1)
        out = out.numpy().astype(float)
        s = len(self.solvers)
        return out[:, :s], out[:, s:]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"pca_mean": self.pca_mean, "components": self.components, "bank": self.bank,
                "bank_correct": self.bank_correct, "bank_cost": self.bank_cost}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        for key in ("pca_mean", "components", "bank", "bank_correct", "bank_cost"):
            setattr(self, key, np.asarray(arrays[key], dtype=np.float32))
