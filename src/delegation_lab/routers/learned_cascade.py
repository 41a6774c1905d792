"""Learned cascade, FrugalGPT-style: solvers from cheap to expensive (mean training cost); a learned
scorer (one logistic regression per solver on [embedding, text features], fitted on the training
labels) predicts each solver's success on the question.

The rule, at threshold tau: walk the solvers cheapest first; a solver below the most expensive one
is called only when its predicted success is >= tau, and its answer is kept only when the shared
`Verifier` accepts it (the judge that decides acceptance for every method, common random numbers
per solver x item x seed); otherwise the walk goes on; the most expensive solver's answer is always
kept. So the learned scorer decides whom to try, the shared verifier decides when to stop. FrugalGPT
scores (question, answer) pairs with one model; here the answer-dependent half is the verifier.
"""

from __future__ import annotations

import numpy as np
import torch

from delegation_lab.routers.base import (
    Inputs,
    Outcome,
    Router,
    Scaler,
    fit_bce,
    load_module_arrays,
    module_arrays,
    sigmoid_batches,
)


class LearnedCascadeRouter(Router):
    knob = "tau"

    def _build(self, d_in: int) -> torch.nn.Module:
        return torch.nn.Linear(d_in, len(self.solvers))

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        self.order = np.argsort(self.mean_cost, kind="stable")
        self.scaler = Scaler().fit(x)
        feats = self.scaler.features(x)
        torch.manual_seed(seed)
        self.model = fit_bce(self._build(feats.shape[1]), feats, correct, self.params.epochs, 256,
                             self.params.learning_rate, 0.0, seed)

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        acc = sigmoid_batches(self.model, self.scaler.features(x))
        return acc, np.broadcast_to(self.mean_cost, acc.shape)

    def evaluate(self, x, item_ids, correct, cost, knob, verifier, seed) -> Outcome:
        score, _ = self.predict(x)
        n, s = correct.shape
        done = np.zeros(n, dtype=bool)
        chosen = np.full(n, self.order[-1])
        called = np.zeros((n, s), dtype=bool)
        reach = np.zeros((n, s), dtype=bool)  # the chain it walks until a verdict stops it
        paid = np.zeros(n)
        for pos, j in enumerate(self.order):
            last = pos == len(self.order) - 1
            reach[:, j] = last | (score[:, j] >= knob)
            call = ~done & reach[:, j]
            called[call, j] = True
            paid[call] += cost[call, j]
            accept = call & (last | verifier.accepts(self.solvers[j], item_ids, correct[:, j], seed))
            chosen[accept] = j
            done |= accept
        rows = np.arange(n)
        return Outcome(chosen, called, correct[rows, chosen], paid, score, reach)

    def route(self, x: Inputs, knob: float):
        """New questions: the first solver it would try, the scores, and the expected cost of the walk
        when each tried solver is accepted with its predicted success."""
        score, _ = self.predict(x)
        n = score.shape[0]
        reach = np.ones(n)
        expected = np.zeros(n)
        first = np.full(n, -1)
        for pos, j in enumerate(self.order):
            last = pos == len(self.order) - 1
            call = last | (score[:, j] >= knob)
            first = np.where((first < 0) & call, j, first)
            expected += reach * call * self.mean_cost[j]
            reach = reach * np.where(call, 1 - score[:, j], 1.0)
        return first, score, expected

    def arrays(self) -> dict[str, np.ndarray]:
        return {"order": self.order, "scaler_mean": self.scaler.mean, "scaler_std": self.scaler.std, **module_arrays(self.model)}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.order = np.asarray(arrays["order"], dtype=int)
        self.scaler = Scaler(arrays["scaler_mean"], arrays["scaler_std"])
        self.model = load_module_arrays(self._build(arrays["w.weight"].shape[1]), arrays)
