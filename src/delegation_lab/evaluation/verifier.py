"""The one verifier: whether a method accepts an answer (stops, or stops escalating / retrying).

Verdicts are common random numbers: the verdict on (solver, item, seed) is a pure function of those
three and the verifier's seed, so two methods run with the same seed see the same judge noise and
differ only by their decisions; asking the same solver about the same item again repeats the verdict
(it is the same cached answer). Accuracy is never the verdict: it is always the gold label of the
answer that was accepted.

Kinds: `judge` accepts a right answer with probability 1 - fn and a wrong one with probability fp;
`gold` accepts exactly the right answers (upper-bound runs only); `cached` replays a real judge's
verdicts from the labels table; `agreement` (`evaluation.agreement`) accepts answers other models'
cached final answers agree with, and says what its checks cost (`check_costs`).

Deployable: whether a deployment could run the verifier (`Verifier.deployable`). A `judge` is
simulated (noise at chosen rates, no model behind it) and `gold` reads the answer key, so neither is;
`cached` (a real judge's verdicts) and `agreement` are. A frontier point that rests on one that is
not says so (`not_deployable_reason`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.errors import ConfigError
from delegation_lab.evaluation.params import VerifierParams
from delegation_lab.pipeline.layout import Layout

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)

DEPLOYABLE_KINDS = ("cached", "agreement")
"""Kinds a deployment could run; a verifier class of another real kind overrides `deployable`."""
NOT_DEPLOYABLE = {"judge": "simulated verifier: not deployable", "gold": "gold verifier: upper bound, not deployable"}
"""Why a kind is not deployable, as the frontier's metrics, tables and dashboard say it."""


@lru_cache(maxsize=1 << 20)
def _key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def _keys(values: Sequence[str] | np.ndarray | str) -> np.ndarray:
    if isinstance(values, str):
        return np.array([_key(values)], dtype=np.uint64)
    return np.fromiter((_key(str(v)) for v in values), dtype=np.uint64, count=len(values))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def uniforms(solvers: Sequence[str] | np.ndarray | str, item_ids: Sequence[str] | np.ndarray | str,
             seeds: int | np.ndarray, base_seed: int = 0) -> np.ndarray:
    """U[0, 1) per (solver, item, seed), broadcast together; the same triple always gives the same number."""
    s = _keys(solvers)
    i = _keys(item_ids)
    k = np.asarray(seeds, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        x = _mix(_mix(_mix(k + np.uint64(base_seed) * np.uint64(0x9E3779B97F4A7C15)) ^ s) ^ i)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


@dataclass(frozen=True)
class Verifier:
    """Accept / reject answers; `name` goes into every summary and frontier row it decided."""

    kind: str
    false_positive_rate: float = 0.0
    false_negative_rate: float = 0.0
    seed: int = 0
    source: str = ""  # where the rates come from: `measured (<file>)`, `configured`, or the judge model
    verdicts: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        if self.kind == "judge":
            return f"judge(fp={self.false_positive_rate:.4f},fn={self.false_negative_rate:.4f})"
        return self.kind if self.kind == "gold" else f"cached({self.source})"

    @property
    def deployable(self) -> bool:
        """Whether a deployment could run this verifier: not a simulated judge, not gold."""
        return self.kind in DEPLOYABLE_KINDS

    @property
    def not_deployable_reason(self) -> str | None:
        """None for a deployable verifier, else why not (`simulated verifier: not deployable`)."""
        return None if self.deployable else NOT_DEPLOYABLE.get(self.kind, f"{self.kind} verifier: not deployable")

    def describe(self) -> dict:
        """For metrics files: what decided acceptance, where its rates come from, and whether it is deployable."""
        return {"name": self.name, "kind": self.kind, "false_positive_rate": self.false_positive_rate,
                "false_negative_rate": self.false_negative_rate, "seed": self.seed, "source": self.source,
                "deployable": self.deployable}

    def accepts(self, solvers: Sequence[str] | np.ndarray | str, item_ids: Sequence[str] | np.ndarray | str,
                correct: np.ndarray, seeds: int | np.ndarray) -> np.ndarray:
        """Bool array (broadcast of the inputs): does the verifier accept each answer?"""
        correct = np.asarray(correct, dtype=bool)
        if self.kind == "gold":
            return np.broadcast_to(correct, np.broadcast_shapes(correct.shape, np.shape(seeds))).copy()
        if self.kind == "cached":
            return self._lookup(solvers, item_ids, correct, seeds)
        u = uniforms(solvers, item_ids, seeds, self.seed)
        return np.where(correct, u >= self.false_negative_rate, u < self.false_positive_rate)

    def check_costs(self, solver: str, item_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The answers a check of `solver`'s answers obtains, by model: their US$ per item. None here: a
        judge's or gold's verdict is not priced."""
        return {}

    def table(self, solvers: list[str], item_ids: Sequence[str], correct: np.ndarray, seeds: Sequence[int]) -> np.ndarray:
        """Verdicts [n_seeds, n_items, n_solvers] for a correctness matrix [n_items, n_solvers]:
        what a vectorised environment looks up instead of drawing noise itself."""
        correct = np.asarray(correct, dtype=bool)
        out = np.empty((len(seeds), len(item_ids), len(solvers)), dtype=bool)
        items = np.asarray(item_ids, dtype=object)
        for j, solver in enumerate(solvers):
            for k, seed in enumerate(seeds):
                out[k, :, j] = self.accepts(solver, items, correct[:, j], int(seed))
        return out

    def _no_verdict(self, solver: str, item: str) -> str:
        return (f"evaluation.verifier.kind=cached: no judge verdict for solver {solver!r}, item {item!r} "
                "(judge every answer: label.method judge, or use kind judge)")

    def _lookup(self, solvers, item_ids, correct, seeds) -> np.ndarray:
        """`verdicts` of each (solver, item), broadcast over seeds (a verdict that needs no noise)."""
        s = np.broadcast_to(np.asarray(solvers, dtype=object), np.shape(correct))
        i = np.broadcast_to(np.asarray(item_ids, dtype=object), np.shape(correct))
        flat = []
        for solver, item in zip(s.ravel(), i.ravel(), strict=True):
            verdict = self.verdicts.get((str(solver), str(item)))
            if verdict is None:
                raise ValueError(self._no_verdict(str(solver), str(item)))
            flat.append(verdict)
        out = np.array(flat, dtype=bool).reshape(np.shape(correct))
        return np.broadcast_to(out, np.broadcast_shapes(out.shape, np.shape(seeds))).copy()


def measured_rates(path: Path) -> tuple[float, float]:
    """The pooled judge FP / FN rates the label stage measured (`agreement.all`)."""
    where = "evaluation.verifier.rates_from"
    try:
        pooled = json.loads(path.read_text())["agreement"]["all"]
        return float(pooled["judge_fp_rate"]), float(pooled["judge_fn_rate"])
    except FileNotFoundError:
        raise ConfigError("params.yaml", [f"{where}: {path} does not exist (run the label stage first, or set "
                                          "evaluation.verifier.false_positive_rate and false_negative_rate)"]) from None
    except (KeyError, TypeError, ValueError, json.JSONDecodeError):
        raise ConfigError("params.yaml", [
            f"{where}: {path} has no measured agreement.all.judge_fp_rate / judge_fn_rate (the label stage judged no "
            "answer, e.g. label.judge.sample_size 0): set evaluation.verifier.false_positive_rate and "
            "false_negative_rate, or evaluation.verifier.kind gold for an upper-bound run"]) from None


def build_verifier(params: VerifierParams, root: Path = Path("."), labels: pl.DataFrame | None = None) -> Verifier:
    """The verifier `params` describe (its kind's builder in `evaluation.VERIFIERS`); measured rates
    are read from `root / params.rates_from`."""
    from delegation_lab.evaluation import VERIFIERS

    return VERIFIERS.get(params.kind)(params, root, labels)


def gold_verifier(params: VerifierParams, root: Path, labels: pl.DataFrame | None) -> Verifier:
    """`gold`: accepts exactly the right answers (upper-bound runs only)."""
    return Verifier("gold", seed=params.seed, source="gold labels")


def cached_verifier(params: VerifierParams, root: Path, labels: pl.DataFrame | None) -> Verifier:
    """`cached`: a real judge's verdicts from the labels table (`labels`, else read under `root`)."""
    if labels is None:
        labels = pl.read_parquet(Layout(root).labels)
    judged = labels.filter(pl.col("judge_verdict").is_not_null())
    if judged.is_empty():
        raise ConfigError("params.yaml", [f"evaluation.verifier.kind: cached needs judge verdicts in {Layout().labels} (none found)"])
    model = ",".join(sorted({str(m) for m in judged["judge_model"].drop_nulls().to_list()})) or "judge"
    verdicts = {(s, i): bool(v) for s, i, v in judged.select("solver", "item_id", "judge_verdict").iter_rows()}
    return Verifier("cached", seed=params.seed, source=model, verdicts=verdicts)


def judge_verifier(params: VerifierParams, root: Path, labels: pl.DataFrame | None) -> Verifier:
    """`judge`: a noisy judge with the configured rates, or those the label stage measured."""
    fp, fn = params.false_positive_rate, params.false_negative_rate
    source = "configured"
    if fp is None or fn is None:
        m_fp, m_fn = measured_rates(root / params.rates_from)
        source = f"measured ({params.rates_from})" if fp is None and fn is None else "configured + measured"
        fp = m_fp if fp is None else fp
        fn = m_fn if fn is None else fn
    return Verifier("judge", fp, fn, params.seed, source)
