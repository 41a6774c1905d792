"""Reference routers: `best_single` sends every question to the solver most accurate on the training
items; `random` sends it to that strongest solver with probability p, else to a uniformly drawn
other solver (p swept). Neither reads the question."""

from __future__ import annotations

import numpy as np

from delegation_lab.evaluation import uniforms
from delegation_lab.routers.base import Inputs, Outcome, Router, kept


class BestSingleRouter(Router):
    knob = "solver"
    features = "none"
    learns = False

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        acc = correct.mean(axis=0)
        self.best = int(np.lexsort((self.mean_cost, -acc))[0])  # most accurate, then cheapest
        self.accuracy = acc

    def calibrate(self, x: Inputs, correct: np.ndarray, cost: np.ndarray) -> None:
        self.knobs = {f"solver={self.solvers[self.best]}": float(self.best)}

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        n = len(x)
        return np.broadcast_to(self.accuracy, (n, len(self.solvers))), np.broadcast_to(self.mean_cost, (n, len(self.solvers)))

    def evaluate(self, x, item_ids, correct, cost, knob, verifier, seed) -> Outcome:
        return kept(np.full(correct.shape[0], self.best), correct, cost, self.predict(x)[0])

    def route(self, x: Inputs, knob: float):
        chosen = np.full(len(x), self.best)
        return chosen, self.predict(x)[0], self.mean_cost[chosen]

    def arrays(self) -> dict[str, np.ndarray]:
        return {"best": np.array([self.best]), "accuracy": self.accuracy}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.best, self.accuracy = int(arrays["best"][0]), np.asarray(arrays["accuracy"], dtype=float)


class RandomRouter(BestSingleRouter):
    knob = "p"

    def calibrate(self, x: Inputs, correct: np.ndarray, cost: np.ndarray) -> None:
        Router.calibrate(self, x, correct, cost)

    def _choose(self, item_ids: np.ndarray, p: float, seed: int) -> np.ndarray:
        u = uniforms("random-router", item_ids, seed, base_seed=1)  # per item, reproducible, shared across p
        v = uniforms("random-router-other", item_ids, seed, base_seed=1)
        others = np.array([j for j in range(len(self.solvers)) if j != self.best] or [self.best])
        return np.where(u < p, self.best, others[np.minimum((v * len(others)).astype(int), len(others) - 1)])

    def evaluate(self, x, item_ids, correct, cost, knob, verifier, seed) -> Outcome:
        return kept(self._choose(np.asarray(item_ids), knob, seed), correct, cost, self.predict(x)[0])

    def route(self, x: Inputs, knob: float):
        chosen = self._choose(np.array([f"new-{i}" for i in range(len(x))]), knob, 0)
        return chosen, self.predict(x)[0], self.mean_cost[chosen]
