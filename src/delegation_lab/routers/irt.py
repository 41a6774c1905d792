"""Model-embedding / IRT router: EmbedLLM's learned model embeddings read as IRT-Router's
multidimensional item response theory.

P(solver m right on question q) = sigmoid(a_q . theta_m - b_q): the question's discrimination
a_q >= 0 (softplus) and difficulty b_q come from a small network on the frozen question
embedding, the solver's ability theta_m is one learned vector per solver (its model embedding).
Trained with binary cross-entropy on the fitting labels, then the shared lambda rule.

- IRT-Router (Song et al. 2025, arXiv 2506.01048; code github.com/Mercidaiha/IRT-Router, read in
  the fork Ahasannn/IRT-Router at the author's commit 6c07802, `router/MIRT.py`): the same response
  function, a = softplus(W_a q), b = w_b . q (no biases), 25 latent dimensions; there theta_m is a
  linear map of an embedding of the model's description, so a new model needs no answers.
- EmbedLLM (Zhuang et al., ICLR 2025, arXiv 2410.02223; code github.com/richardzhuang0412/EmbedLLM,
  `algorithm/mf.py` at 9e42e5b): a free embedding per model (232 dims) times the projected question
  embedding through a linear classifier, Gaussian noise (0.05) added to the question embedding
  while training (our `noise`); every model's embedding is fitted jointly.

Here theta_m is free (EmbedLLM), so a model nobody described can be added from labelled answers:
`add_model` fits only its theta, the question network and every other theta frozen, as the
maximum a posteriori estimate under a Gaussian prior fitted to the existing thetas (with no
answers, the population mean: an average model). docs/new_model.md measures how routing improves
with the number of answers (`python -m delegation_lab.routers.new_model`).
"""

from __future__ import annotations

import numpy as np
import torch

from delegation_lab.routers.base import Inputs, Router, fit_bce, load_module_arrays, module_arrays, sigmoid_batches


class ItemResponse(torch.nn.Module):
    """logit[n, S] = a(q) . theta_m - b(q), a(q) = softplus(.) and b(q) read from one small network."""

    def __init__(self, d_in: int, dim: int, hidden: int, n_solvers: int, noise: float = 0.0):
        super().__init__()
        layers: list[torch.nn.Module] = [torch.nn.Linear(d_in, hidden), torch.nn.ReLU()] if hidden else []
        self.items = torch.nn.Sequential(*layers, torch.nn.Linear(hidden or d_in, dim + 1))
        self.ability = torch.nn.Parameter(torch.randn(n_solvers, dim) * 0.1)  # theta_m: the model embeddings
        self.noise = noise

    def item_parameters(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Discrimination a [n, dim] (>= 0, so a higher ability never lowers P(right)) and difficulty b [n]."""
        if self.training and self.noise:  # EmbedLLM's regulariser: a jittered question while fitting
            q = q + self.noise * torch.randn_like(q)
        out = self.items(q)
        return torch.nn.functional.softplus(out[:, :-1]), out[:, -1]

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        a, b = self.item_parameters(q)
        return a @ self.ability.T - b[:, None]


def map_ability(a: np.ndarray, b: np.ndarray, y: np.ndarray, prior_mean: np.ndarray, prior_precision: np.ndarray,
                iterations: int = 100) -> np.ndarray:
    """theta maximising sum log P(y_i | sigmoid(a_i . theta - b_i)) - (theta - mu)' P (theta - mu) / 2:
    a logistic regression with offsets and a Gaussian prior (concave), by Newton's method with step
    halving, so every step raises the objective, from the prior mean."""

    def objective(theta: np.ndarray) -> float:
        z, d = a @ theta - b, theta - prior_mean
        return float(np.sum(y * z - np.logaddexp(0.0, z)) - 0.5 * d @ prior_precision @ d)

    theta, value = prior_mean.copy(), objective(prior_mean)
    for _ in range(iterations):
        p = 0.5 * (1.0 + np.tanh(0.5 * (a @ theta - b)))  # sigmoid, without overflow
        grad = a.T @ (y - p) - prior_precision @ (theta - prior_mean)
        step = np.linalg.solve((a * (p * (1 - p))[:, None]).T @ a + prior_precision, grad)
        for _ in range(30):
            candidate = theta + step
            new = objective(candidate)
            if new >= value - 1e-12 * (1.0 + abs(value)):  # rounding aside, never downhill
                break
            step = step / 2
        else:
            break
        theta, value = candidate, new
        if np.abs(step).max() < 1e-10:
            break
    return theta


class IrtRouter(Router):
    features = "embedding"

    def _build(self, d_in: int, n_solvers: int) -> ItemResponse:
        p = self.params
        return ItemResponse(d_in, p.dim, p.hidden, n_solvers, p.noise)

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        torch.manual_seed(seed)
        p = self.params
        model = self._build(x.embedding.shape[1], len(self.solvers))
        self.model = fit_bce(model, x.embedding, correct, p.epochs, p.batch_size, p.learning_rate, p.weight_decay, seed)

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        acc = sigmoid_batches(self.model, x.embedding)
        return acc, np.broadcast_to(self.mean_cost, acc.shape)

    @torch.no_grad()
    def item_parameters(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """Each question's discrimination [n, dim] and difficulty [n]."""
        a, b = self.model.item_parameters(torch.from_numpy(np.ascontiguousarray(x.embedding, dtype=np.float32)))
        return a.numpy().astype(float), b.numpy().astype(float)

    def abilities(self) -> np.ndarray:
        """theta [S, dim], one row per solver."""
        return self.model.ability.detach().numpy().astype(float)

    def add_model(self, name: str, x: Inputs, correct: np.ndarray, mean_cost: float) -> None:
        """Place a new solver from its answers to the questions `x` (correct [n] bool; n may be 0):
        only its ability is fitted (MAP under a Gaussian prior from the existing abilities: their
        mean and covariance, shrunk towards its diagonal); the question network and the other
        abilities are not changed. `mean_cost` is its expected dollars per item (known from its
        price before any answer is labelled); lambda's unit is recomputed as in `fit_costs`."""
        if name in self.solvers:
            raise ValueError(f"add_model: solver {name!r} is already routed")
        if len(x) != len(correct):
            raise ValueError(f"add_model: {len(x)} questions but {len(correct)} labels")
        thetas = self.abilities()
        mean = thetas.mean(axis=0)
        cov = np.atleast_2d(np.cov(thetas, rowvar=False)) if thetas.shape[0] > 1 else np.eye(thetas.shape[1])
        # shrunk towards its diagonal, with a floor: a few models span few directions, and a singular
        # prior would pin the new ability to their span
        cov = 0.5 * cov + 0.5 * np.diag(np.diag(cov))
        cov += 1e-3 * max(float(np.trace(cov)) / cov.shape[0], 1e-6) * np.eye(cov.shape[0])
        a, b = self.item_parameters(x)
        theta = map_ability(a, b, np.asarray(correct, dtype=float), mean, np.linalg.inv(cov))
        with torch.no_grad():
            grown = torch.cat([self.model.ability, torch.from_numpy(theta[None, :]).to(self.model.ability.dtype)])
        self.model.ability = torch.nn.Parameter(grown)
        self.solvers.append(name)
        self.fit_costs(np.append(self.mean_cost, float(mean_cost))[None, :])  # one row: its mean is the row

    def arrays(self) -> dict[str, np.ndarray]:
        return module_arrays(self.model)

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        d_in = arrays["w.items.0.weight"].shape[1]
        self.model = load_module_arrays(self._build(d_in, len(self.solvers)), arrays)
