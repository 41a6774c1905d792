"""FrugalGPT's LLM cascade (Chen, Zaharia, Zou 2023, "FrugalGPT: How to Use Large Language Models While
Reducing Cost and Improving Performance", arXiv 2305.05176): call solvers from cheap to expensive and
stop as soon as a learned answer scorer trusts the answer.

The rule, at threshold tau: walk the chain; after each answer but the last, the scorer gives
P(right | question, answer); the walk stops and keeps that answer when P >= tau, else it calls the
next solver; the last solver's answer is always kept. The chain (at most `max_length` solvers,
cheapest first) is chosen on the fitting items: among the `candidates` solvers on the train
accuracy-cost Pareto front, the chain whose best threshold of the sweep gives the best utility
(accuracy - `cost_weight` * cost / priciest solver's mean cost). Each threshold is an operating point.

The scorer is the learned verifier's (`evaluation.learned.AnswerScorer`, one class): a Platt-calibrated
logistic regression on the answer's agreement with the reference `models`' final answers, its own
features (final answer present, reply length, output tokens), the solver and the question
embedding's principal components, fitted on the fitting items' answers of every solver.

Where ours differs from the paper: FrugalGPT's scorer is a DistilBERT regressor reading the (query,
answer) text; ours is a logistic model on agreement and answer features, and the agreement it reads
is bought: a check obtains the reference models' answers (each once per item, reused if the chain
later calls that model) and the cascade pays and counts them as calls. FrugalGPT optimises the chain
and a threshold per stage under each budget; ours fixes one chain per fit and shares one threshold
across stages, the sweep of that threshold tracing the cost curve. Without reference models (or
without answer features at all, e.g. questions routed by `dlab route`) the scorer reads what remains.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from delegation_lab.errors import ConfigError
from delegation_lab.evaluation.learned import AnswerFeatures, AnswerScorer
from delegation_lab.routers.base import Inputs, Outcome, Router


class FrugalGptRouter(Router):
    knob = "tau"
    features = "embedding+answers"
    reads_answers = True

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        answers = self._answers(x)
        self.references = self._reference_columns(answers)
        self.scorer = AnswerScorer(self.params.embedding_dims).fit(answers, x.embedding, correct, np.ones(correct.shape, bool))
        score = self.scorer.predict(answers, x.embedding)
        taus = np.array(sorted(self.params.sweep), dtype=float)
        best = max(self._chains(correct, cost), key=lambda chain: max(
            self._utility(*self._walk(score, chain, tau), correct, cost) for tau in taus))
        self.chain = np.array(best, dtype=int)
        # what `route` can say of a new question before any answer: the train walk at each threshold
        walks = [self._walk(score, self.chain, tau) for tau in taus]
        self.taus = taus
        self.kept_share = np.stack([np.bincount(kept, minlength=len(self.solvers)) / len(kept) for kept, _ in walks])
        self.walk_cost = np.array([(cost * called).sum(axis=1).mean() for _, called in walks])

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        score = self.scorer.predict(self._answers(x), x.embedding)
        return score, np.broadcast_to(self.mean_cost, score.shape)

    def evaluate(self, x, item_ids, correct, cost, knob, verifier, seed) -> Outcome:
        """The walk on these items' cached answers; the shared verifier is not consulted (the scorer is it)."""
        score, _ = self.predict(x)
        kept, called = self._walk(score, self.chain, knob)
        rows = np.arange(len(kept))
        # where the gap goes (frontier/gap.py): the whole chain is within reach (a perfect scorer walks
        # on to its right member); the answers bought only for a check are the check's cost
        reach = np.zeros(called.shape, dtype=bool)
        reach[:, list(self.chain)] = True
        position = np.array([list(self.chain).index(k) for k in kept])
        walked = np.zeros(called.shape, dtype=bool)
        for k, j in enumerate(self.chain):
            walked[:, j] = position >= k
        check = (cost * (called & ~walked)).sum(axis=1)
        return Outcome(kept, called, correct[rows, kept], (cost * called).sum(axis=1), score, reach, check)

    def route(self, x: Inputs, knob: float):
        """New questions have no answers yet: the chain's first solver, each solver's share of kept answers
        and the mean cost of the walk on the fitting items at this threshold."""
        k = int(np.argmin(np.abs(self.taus - knob)))
        n = len(x)
        return (np.full(n, self.chain[0]), np.broadcast_to(self.kept_share[k], (n, len(self.solvers))),
                np.full(n, self.walk_cost[k]))

    # -- the cascade ---------------------------------------------------------------------------
    def _walk(self, score: np.ndarray, chain: np.ndarray | tuple, tau: float) -> tuple[np.ndarray, np.ndarray]:
        """Kept solver [n] and answers bought [n, S]: the solvers called and the reference answers the
        checks obtained (each once per item)."""
        n = score.shape[0]
        kept = np.full(n, chain[-1])
        called = np.zeros(score.shape, dtype=bool)
        open_ = np.ones(n, dtype=bool)
        for pos, j in enumerate(chain):
            called[open_, j] = True
            if pos == len(chain) - 1:
                break
            if tau > 0:  # every score clears 0: that check needs no reference answer
                called[np.ix_(open_, self.references[self.references != j])] = True  # the check's reference answers
            stop = open_ & (score[:, j] >= tau)
            kept[stop] = j
            open_ &= ~stop
        return kept, called

    def _utility(self, kept: np.ndarray, called: np.ndarray, correct: np.ndarray, cost: np.ndarray) -> float:
        accuracy = correct[np.arange(len(kept)), kept].mean()
        return float(accuracy - self.params.cost_weight * (cost * called).sum(axis=1).mean() / self.reference_cost)

    def _chains(self, correct: np.ndarray, cost: np.ndarray) -> list[tuple[int, ...]]:
        """Every chain of 1..max_length candidates, cheapest first: the solvers no cheaper one matches in
        train accuracy (the Pareto front), the `candidates` most accurate of them."""
        accuracy, mean_cost = correct.mean(axis=0), cost.mean(axis=0)
        by_cost = np.lexsort((-accuracy, mean_cost))
        front = [int(j) for k, j in enumerate(by_cost) if all(accuracy[j] > accuracy[i] for i in by_cost[:k])]
        pool = sorted(sorted(front, key=lambda j: -accuracy[j])[:self.params.candidates], key=lambda j: (mean_cost[j], j))
        return [c for size in range(1, self.params.max_length + 1) for c in combinations(pool, size)]

    def _answers(self, x: Inputs) -> AnswerFeatures:
        if x.answers is None:
            return AnswerFeatures.absent(len(x), self.solvers)
        if list(x.answers.solvers) != self.solvers:
            raise ValueError(f"frugalgpt: answer features are over {list(x.answers.solvers)}, the router over {self.solvers}")
        return x.answers

    def _reference_columns(self, answers: AnswerFeatures) -> np.ndarray:
        unknown = [m for m in answers.models if m not in self.solvers]
        if unknown:
            raise ConfigError("params.yaml", [f"routers.frugalgpt.models: {', '.join(unknown)} not among the routed solvers "
                                              f"({', '.join(self.solvers)}): the cascade buys their answers"])
        return np.array([self.solvers.index(m) for m in answers.models], dtype=int)

    # -- state ---------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        return {"chain": self.chain, "references": self.references, "taus": self.taus, "kept_share": self.kept_share,
                "walk_cost": self.walk_cost, **self.scorer.arrays()}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        self.chain = np.asarray(arrays["chain"], dtype=int)
        self.references = np.asarray(arrays["references"], dtype=int)
        self.taus = np.asarray(arrays["taus"], dtype=float)
        self.kept_share = np.asarray(arrays["kept_share"], dtype=float)
        self.walk_cost = np.asarray(arrays["walk_cost"], dtype=float)
        self.scorer = AnswerScorer.from_arrays(arrays)
