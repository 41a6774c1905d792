"""Matrix-factorisation router, as RouteLLM's `mf`: score(m, q) = w . (v_m * (W q)) + b_m, a learned
vector v_m per solver times the item embedding q projected by W, through a shared output vector
w; sigmoid(score) is the predicted success of solver m on q, trained with binary cross-entropy on
the labels (RouteLLM trains the same bilinear form on pairwise preferences; with correctness
labels for every solver the pointwise form is the natural one). Then the lambda rule."""

from __future__ import annotations

import numpy as np
import torch

from delegation_lab.routers.base import Inputs, Router, fit_bce, load_module_arrays, module_arrays, sigmoid_batches


class Factorisation(torch.nn.Module):
    def __init__(self, d_in: int, dim: int, n_solvers: int):
        super().__init__()
        self.project = torch.nn.Linear(d_in, dim, bias=False)  # W
        self.solver = torch.nn.Parameter(torch.randn(n_solvers, dim) * 0.1)  # v_m
        self.out = torch.nn.Linear(dim, 1, bias=False)  # w
        self.bias = torch.nn.Parameter(torch.zeros(n_solvers))  # b_m

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        z = self.project(q)  # [n, dim]
        return self.out(z[:, None, :] * self.solver[None, :, :]).squeeze(-1) + self.bias  # [n, S]


class MfRouter(Router):
    features = "embedding"

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        torch.manual_seed(seed)
        p = self.params
        model = Factorisation(x.embedding.shape[1], p.dim, len(self.solvers))
        self.model = fit_bce(model, x.embedding, correct, p.epochs, p.batch_size, p.learning_rate, p.weight_decay, seed)

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        acc = sigmoid_batches(self.model, x.embedding)
        return acc, np.broadcast_to(self.mean_cost, acc.shape)

    def arrays(self) -> dict[str, np.ndarray]:
        return module_arrays(self.model)

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d_in, dim = arrays["w.project.weight"].shape[1], arrays["w.project.weight"].shape[0]
        self.model = load_module_arrays(Factorisation(d_in, dim, len(self.solvers)), arrays)
