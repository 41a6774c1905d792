"""What every router shares: its inputs, the cost-weighted decision rule, one routing outcome, the
`Router` ABC, and the torch fitting loop of the learned ones.

A router is fitted on the train split minus dev (labels and costs of those items only), may
calibrate its knob on dev, and is then evaluated on test. Its fitted state is a dict of numpy
arrays (`state`), which is what the split-firewall test fingerprints and `dlab route` reloads.

A router writes exactly four methods, the `Router` ABC's abstract ones:

- `fit(x, correct, cost, seed)`: learn from the fitting items (call `self.fit_costs(cost)` first:
  lambda's unit is the priciest solver's mean cost);
- `predict(x) -> (accuracy [n, S], expected cost [n, S])`: what the shared decision rule
  (`utility_choice`: argmax accuracy - lambda * cost / reference cost) reads;
- `arrays()` and `load_arrays(arrays)`: the fitted state as numpy arrays, and back.

It may override `calibrate` (default: each sweep value is its own operating point), `evaluate` and
`route` (default: the decision rule on `predict`), and set the class attributes `knob`, `features`,
`learns` and `reads_answers`. Its name is not written in the class: it is the name it is registered under in
`routers.ROUTERS` (docs/registries.md, "A router"), passed to the constructor.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import torch

from delegation_lab.evaluation import Verifier

if TYPE_CHECKING:
    from delegation_lab.evaluation.learned import AnswerFeatures


@dataclass(frozen=True)
class Inputs:
    """Item features: unit-norm question embeddings [n, d], cheap text features [n, 4] and, where the
    study loaded them for a router that reads answers (`frugalgpt`), what a deployment knows of each
    solver's cached answer (`AnswerFeatures`, items x solvers; None otherwise)."""

    embedding: np.ndarray
    text: np.ndarray
    answers: AnswerFeatures | None = None

    def __len__(self) -> int:
        return self.embedding.shape[0]

    def take(self, rows: np.ndarray) -> Inputs:
        return Inputs(self.embedding[rows], self.text[rows], None if self.answers is None else self.answers.take(rows))


@dataclass
class Outcome:
    """One router at one operating point on one split: per item the solver whose answer was kept,
    the solvers called, gold correctness of the kept answer, dollars paid, and predicted scores."""

    chosen: np.ndarray  # int [n]
    called: np.ndarray  # bool [n, S]
    correct: np.ndarray  # bool [n]
    cost: np.ndarray  # float [n]
    scores: np.ndarray  # float [n, S] (or [n, 1]): what the decision was made on
    # bool [n, S]: the solvers its routing would call whatever the verdicts (a cascade's chain), where
    # that differs from `called`; the oracle-gap split (frontier/gap.py) reads it. None: `called`.
    reach: np.ndarray | None = None
    # float [n]: dollars paid for answers bought only to check another (frugalgpt's reference answers). None: 0.
    check_cost: np.ndarray | None = None


def utility_choice(accuracy: np.ndarray, cost: np.ndarray, lam: float, reference_cost: float) -> np.ndarray:
    """argmax over solvers of predicted accuracy - lam * cost / reference cost (ties: the cheaper)."""
    util = accuracy - lam * cost / reference_cost
    # break ties towards lower cost deterministically
    util = util - 1e-12 * cost / reference_cost
    return util.argmax(axis=1)


def kept(chosen: np.ndarray, correct: np.ndarray, cost: np.ndarray, scores: np.ndarray) -> Outcome:
    rows = np.arange(chosen.shape[0])
    called = np.zeros(correct.shape, dtype=bool)
    called[rows, chosen] = True
    return Outcome(chosen, called, correct[rows, chosen], cost[rows, chosen], scores)


class Scaler:
    """Standardise text features with train statistics; features = [embedding, scaled text]."""

    def __init__(self, mean: np.ndarray | None = None, std: np.ndarray | None = None):
        self.mean, self.std = mean, std

    def fit(self, x: Inputs) -> Scaler:
        self.mean = x.text.mean(axis=0)
        self.std = np.where(x.text.std(axis=0) > 0, x.text.std(axis=0), 1.0)
        return self

    def features(self, x: Inputs) -> np.ndarray:
        d = x.embedding.shape[1]
        out = np.empty((len(x), d + x.text.shape[1]), dtype=np.float32)
        out[:, :d] = x.embedding
        out[:, d:] = (x.text - self.mean) / self.std
        return out


class Router(ABC):
    """Base of every router: subclasses implement the four abstract methods (the module docstring)."""

    knob: ClassVar[str] = "lambda"  # the swept parameter's name in operating point labels
    features: ClassVar[str] = "embedding+text"  # what the router reads of a question (trajectories' `extra`)
    learns: ClassVar[bool] = True  # False: a reference that reads no question (not in `routers.LEARNED`)
    reads_answers: ClassVar[bool] = False  # True: needs `Inputs.answers` (the study loads them only then)

    def __init__(self, name: str, params: Any, solvers: list[str]):
        self.name = name  # the name it is registered under (routers.ROUTERS)
        self.params = params  # its section of the `routers` params (`routers.<name>`), None if it has none
        self.solvers = list(solvers)
        self.mean_cost = np.zeros(len(solvers))  # per solver on the fitting items
        self.reference_cost = 1.0  # the priciest solver's mean cost: lambda's unit
        self.knobs: dict[str, float] = {}  # operating point label -> knob value (after calibration)

    # -- to implement ------------------------------------------------------------------------
    @abstractmethod
    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        """Learn from the fitting items: correct [n, S] bool, cost [n, S] dollars."""

    @abstractmethod
    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        """Predicted P(correct) and expected cost per (item, solver), each [n, S]."""

    @abstractmethod
    def arrays(self) -> dict[str, np.ndarray]:
        """The fitted state (beyond costs and knobs) as numpy arrays: saved, reloaded, fingerprinted."""

    @abstractmethod
    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore what `arrays` returned."""

    # -- shared --------------------------------------------------------------------------------
    def fit_costs(self, cost: np.ndarray) -> None:
        self.mean_cost = cost.mean(axis=0)
        self.reference_cost = float(self.mean_cost.max()) or 1.0

    def calibrate(self, x: Inputs, correct: np.ndarray, cost: np.ndarray) -> None:
        """Set each operating point's knob (default: the sweep value itself)."""
        self.knobs = {self.label(v): float(v) for v in self.params.sweep}

    def label(self, value: float) -> str:
        return f"{self.knob}={value:g}"

    def evaluate(self, x: Inputs, item_ids: np.ndarray, correct: np.ndarray, cost: np.ndarray,
                 knob: float, verifier: Verifier, seed: int) -> Outcome:
        acc, exp_cost = self.predict(x)
        return kept(utility_choice(acc, exp_cost, knob, self.reference_cost), correct, cost, acc)

    def route(self, x: Inputs, knob: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """New questions: chosen solver index [n], the scores [n, S], expected cost [n]."""
        acc, exp_cost = self.predict(x)
        chosen = utility_choice(acc, exp_cost, knob, self.reference_cost)
        return chosen, acc, exp_cost[np.arange(len(chosen)), chosen]

    def state(self) -> dict[str, np.ndarray]:
        """Everything fitted or calibrated, as arrays (what the firewall test fingerprints)."""
        labels = sorted(self.knobs)
        return {**self.arrays(), "mean_cost": self.mean_cost, "reference_cost": np.array([self.reference_cost]),
                "knob_labels": np.array(labels), "knob_values": np.array([self.knobs[k] for k in labels], dtype=float)}

    def load(self, state: dict[str, np.ndarray]) -> None:
        self.mean_cost = np.asarray(state["mean_cost"], dtype=float)
        self.reference_cost = float(state["reference_cost"][0])
        self.knobs = dict(zip(state["knob_labels"].tolist(), state["knob_values"].tolist(), strict=True))
        self.load_arrays({k: v for k, v in state.items() if k not in ("mean_cost", "reference_cost", "knob_labels", "knob_values")})

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for key, value in sorted(self.state().items()):
            h.update(key.encode())
            h.update(np.ascontiguousarray(value).tobytes())
        return h.hexdigest()


def torch_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed) % (2**63))


def fit_bce(model: torch.nn.Module, x: np.ndarray, y: np.ndarray, epochs: int, batch_size: int,
            learning_rate: float, weight_decay: float, seed: int) -> torch.nn.Module:
    """Minibatch Adam on the mean binary cross-entropy of model(x) logits [n, S] against y [n, S]."""
    gen = torch_generator(seed)
    xt, yt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)), torch.from_numpy(np.asarray(y, dtype=np.float32))
    # foreach: one fused update over all parameters per step (the models are tiny, so per-parameter
    # Python loops in the single-tensor Adam were a third of each step)
    opt = torch.optim.Adam(model.parameters(), lr=learning_rate, weight_decay=weight_decay, foreach=True)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    n = xt.shape[0]
    model.train()
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            opt.zero_grad()
            loss = loss_fn(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    model.eval()
    return model


def module_arrays(model: torch.nn.Module, prefix: str = "w.") -> dict[str, np.ndarray]:
    return {prefix + k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def load_module_arrays(model: torch.nn.Module, arrays: dict[str, np.ndarray], prefix: str = "w.") -> torch.nn.Module:
    model.load_state_dict({k[len(prefix):]: torch.from_numpy(np.asarray(v)) for k, v in arrays.items() if k.startswith(prefix)})
    model.eval()
    return model


@torch.no_grad()
def sigmoid_batches(model: torch.nn.Module, x: np.ndarray, batch: int = 65536) -> np.ndarray:
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    return torch.cat([torch.sigmoid(model(xt[i:i + batch])) for i in range(0, xt.shape[0], batch)]).numpy().astype(float) \
        if xt.shape[0] else np.zeros((0, 0))
