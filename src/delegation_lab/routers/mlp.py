"""MLP router: a torch MLP on [embedding, standardised text features] predicts each solver's
success (one sigmoid per solver, binary cross-entropy on the training labels); expected cost is the
solver's mean training cost; pick argmax accuracy - lambda * cost / reference cost."""

from __future__ import annotations

import numpy as np
import torch

from delegation_lab.routers.base import Inputs, Router, Scaler, fit_bce, load_module_arrays, module_arrays, sigmoid_batches


def mlp(d_in: int, hidden: int, d_out: int) -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, d_out))


class MlpRouter(Router):

    def _build(self, d_in: int) -> torch.nn.Module:
        return mlp(d_in, self.params.hidden, len(self.solvers))

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        self.scaler = Scaler().fit(x)
        feats = self.scaler.features(x)
        torch.manual_seed(seed)
        p = self.params
        self.model = fit_bce(self._build(feats.shape[1]), feats, correct, p.epochs, p.batch_size, p.learning_rate,
                             p.weight_decay, seed)

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        acc = sigmoid_batches(self.model, self.scaler.features(x))
        return acc, np.broadcast_to(self.mean_cost, acc.shape)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"scaler_mean": self.scaler.mean, "scaler_std": self.scaler.std, **module_arrays(self.model)}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.scaler = Scaler(arrays["scaler_mean"], arrays["scaler_std"])
        d_in = arrays["w.0.weight"].shape[1]
        self.model = load_module_arrays(self._build(d_in), arrays)
