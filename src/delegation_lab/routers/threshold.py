"""Threshold router, as RouteLLM: a strong and a weak solver (default: the most accurate and the
cheapest on train), a model of the strong solver's win probability P(strong right, weak wrong) +
1/2 P(tie) (logistic regression on [embedding, text features], soft labels from the training
pairs), and a threshold: the strong solver answers when the win probability exceeds it. Each
operating point is a target share of strong calls; its threshold is the matching quantile of the
win probabilities on the dev split (RouteLLM calibrates thresholds the same way)."""

from __future__ import annotations

import numpy as np
import torch

from delegation_lab.errors import ConfigError
from delegation_lab.routers.base import (
    Inputs,
    Outcome,
    Router,
    Scaler,
    fit_bce,
    kept,
    load_module_arrays,
    module_arrays,
    sigmoid_batches,
)


def pick_pair(solvers: list[str], correct: np.ndarray, cost: np.ndarray, strong: str | None, weak: str | None) -> tuple[int, int]:
    for key, name in (("strong", strong), ("weak", weak)):
        if name is not None and name not in solvers:
            raise ConfigError("params.yaml", [f"routers.threshold.{key}: unknown solver {name!r} (solvers: {', '.join(solvers)})"])
    acc, mean_cost = correct.mean(axis=0), cost.mean(axis=0)
    s = solvers.index(strong) if strong else int(np.argmax(acc))
    if weak:
        w = solvers.index(weak)
    else:
        others = [j for j in np.argsort(mean_cost, kind="stable") if j != s]
        w = int(others[0])
    if s == w:
        raise ConfigError("params.yaml", [f"routers.threshold: strong and weak are the same solver {solvers[s]!r}"])
    return s, w


class ThresholdRouter(Router):
    knob = "strong_share"

    def _build(self, d_in: int) -> torch.nn.Module:
        return torch.nn.Linear(d_in, 1)

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        self.strong, self.weak = pick_pair(self.solvers, correct, cost, self.params.strong, self.params.weak)
        cs, cw = correct[:, self.strong].astype(float), correct[:, self.weak].astype(float)
        target = np.where(cs > cw, 1.0, np.where(cs < cw, 0.0, 0.5))[:, None]
        self.scaler = Scaler().fit(x)
        torch.manual_seed(seed)
        self.model = fit_bce(self._build(self.scaler.features(x).shape[1]), self.scaler.features(x), target,
                             self.params.epochs, 256, self.params.learning_rate, 0.0, seed)

    def win_probability(self, x: Inputs) -> np.ndarray:
        return sigmoid_batches(self.model, self.scaler.features(x))[:, 0]

    def calibrate(self, x: Inputs, correct: np.ndarray, cost: np.ndarray) -> None:
        win = self.win_probability(x)
        self.knobs = {}
        for share in self.params.sweep:
            thr = np.inf if share <= 0 else -np.inf if share >= 1 else float(np.quantile(win, 1 - share))
            self.knobs[self.label(share)] = thr

    def _choose(self, x: Inputs, threshold: float) -> tuple[np.ndarray, np.ndarray]:
        win = self.win_probability(x)
        return np.where(win > threshold, self.strong, self.weak), win[:, None]

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        win = self.win_probability(x)
        return np.stack([win, 1 - win], axis=1), np.broadcast_to(self.mean_cost[[self.strong, self.weak]], (len(win), 2))

    def evaluate(self, x, item_ids, correct, cost, knob, verifier, seed) -> Outcome:
        chosen, win = self._choose(x, knob)
        return kept(chosen, correct, cost, win)

    def route(self, x: Inputs, knob: float):
        chosen, win = self._choose(x, knob)
        return chosen, win, self.mean_cost[chosen]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"pair": np.array([self.strong, self.weak]), "scaler_mean": self.scaler.mean, "scaler_std": self.scaler.std,
                **module_arrays(self.model)}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.strong, self.weak = (int(v) for v in arrays["pair"])
        self.scaler = Scaler(arrays["scaler_mean"], arrays["scaler_std"])
        self.model = load_module_arrays(self._build(arrays["w.weight"].shape[1]), arrays)
