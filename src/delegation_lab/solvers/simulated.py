"""`simulated`: the embedded default backend, deterministic in (seed, item, solver).

Correctness follows a probit model with a latent item hardness shared by every solver that uses
the same seed, so errors correlate across solvers the way real models' errors do:

    score = skill - difficulty_slope * (d - 1) - (sqrt(w) * hardness_item + sqrt(1 - w) * noise_item,solver)
    correct  <=>  score > 0,         hence  P(correct | d) = Phi(skill - difficulty_slope * (d - 1))

A wrong answer is a real wrong value: the solver errs at one step of the item's program (a
slipped operand or a swapped operation) and carries the error through the remaining steps.
Completion tokens are log-normal around tokens_out_base + tokens_out_per_step * (d - 1); prompt
tokens are estimated from the rendered prompt (pricing.CHARS_PER_TOKEN).

Role `judge` grades the `candidate` in the request context against the item's gold, then flips
the verdict with the profile's false-positive / false-negative rates.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from delegation_lab.data.arith import apply_step
from delegation_lab.data.items import Item
from delegation_lab.hashing import stable_hash
from delegation_lab.parsing import normalise_number, numbers_match, parse_choice, parse_number_answer
from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.params import SimulatedParams, SolverParams
from delegation_lab.solvers.pricing import lognormal_tokens, messages_tokens


def _int(text: str) -> int:
    return int(stable_hash(text, 12), 16)


def p_correct(params: SimulatedParams, difficulty: int | np.ndarray) -> Any:
    return norm.cdf(params.skill - params.difficulty_slope * (np.asarray(difficulty) - 1))


def calibrate_skill(target: float, difficulties: list[int] | np.ndarray, slope: float) -> float:
    """The skill whose expected accuracy over these difficulties equals `target`."""
    d = np.asarray(difficulties, dtype=float)
    return float(brentq(lambda s: norm.cdf(s - slope * (d - 1)).mean() - target, -10, 10))


SYMBOL = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def _fmt(value: float) -> str:
    if abs(value - round(value)) < 1e-9:
        return str(int(round(value)))
    return f"{value:.2f}".rstrip("0").rstrip(".")


class SimulatedBackend:
    @classmethod
    def from_params(cls, name: str, params: SolverParams) -> SimulatedBackend:
        """The backend of solver `name` (`solvers.BACKENDS` builds every backend this way)."""
        return cls(name, params.simulated)

    def __init__(self, solver_name: str, params: SimulatedParams):
        self.solver_name = solver_name
        self.params = params

    def fingerprint(self) -> dict[str, Any]:
        # sleep_scale only slows the run down; it never changes an answer, so it stays out of the hash.
        return {"solver": self.solver_name, **self.params.model_dump(exclude={"sleep_scale"})}

    # -- randomness: all draws are pure functions of (seed, item, solver) --------------------
    def _hardness(self, item: Item) -> float:
        return float(np.random.default_rng([self.params.seed, _int(item.item_id)]).standard_normal())

    def _own_rng(self, item: Item, *salt: str) -> np.random.Generator:
        return np.random.default_rng([self.params.seed, _int(item.item_id), _int(self.solver_name), *map(_int, salt)])

    def is_correct(self, item: Item) -> bool:
        p = self.params
        w = p.hardness_weight
        noise = self._own_rng(item, "noise").standard_normal()
        score = p.skill - p.difficulty_slope * (item.difficulty - 1) - (math.sqrt(w) * self._hardness(item) + math.sqrt(1 - w) * noise)
        return bool(score > 0)

    def generate(self, requests: list[Request]) -> list[Generation]:
        out = [self._judge(r) if r.role == "judge" else self._answer(r) for r in requests]
        if self.params.sleep_scale > 0 and out:
            time.sleep(max(g.latency_s for g in out) * self.params.sleep_scale)
        return out

    # -- answering -------------------------------------------------------------------------
    def _tokens_out(self, rng: np.random.Generator, difficulty: int) -> int:
        p = self.params
        return int(lognormal_tokens(rng, p.tokens_out_base + p.tokens_out_per_step * (difficulty - 1), p.tokens_out_cv))

    def _answer(self, request: Request) -> Generation:
        if request.role != "answer":
            raise ValueError(f"the simulated backend answers roles 'answer' and 'judge', not {request.role!r}")
        item = request.item
        rng = self._own_rng(item, "answer")
        correct = self.is_correct(item)
        text = self._solution_text(item, correct, rng)
        tokens_out = self._tokens_out(rng, item.difficulty)
        return Generation(
            text=text,
            tokens_in=messages_tokens(request.messages),
            tokens_out=tokens_out,
            latency_s=round(0.05 + tokens_out * self.params.latency_s_per_token, 4),
        )

    def _solution_text(self, item: Item, correct: bool, rng: np.random.Generator) -> str:
        if item.choices:
            letters = "ABCDE"[: len(item.choices)]
            gold = item.gold if item.gold in letters else letters[0]
            pick = gold if correct else rng.choice([c for c in letters if c != gold])
            return f"Comparing the options against my working, option {pick} fits.\nAnswer: {pick}"
        steps = item.steps()
        if steps and steps[0].get("op") == "start":
            return self._arith_text(steps, correct, rng)
        return self._generic_text(item, correct, rng)

    def _arith_text(self, steps: list[dict], correct: bool, rng: np.random.Generator) -> str:
        value = float(steps[0]["value"])
        gold = float(steps[-1]["result"]) if len(steps) > 1 else value
        ops = steps[1:]
        err_at = int(rng.integers(len(ops))) if (ops and not correct) else -1
        lines = [f"Start with {_fmt(value)}."]
        for k, step in enumerate(ops):
            op, arg = step["op"], float(step["arg"])
            slip = 0.0
            if k == err_at:
                kind = int(rng.integers(3))
                if kind == 0:  # slipped operand
                    arg = max(arg + float(rng.choice([-2, -1, 1, 2, 10])), 1.0)
                elif kind == 1:  # swapped operation
                    op = {"add": "sub", "sub": "add", "mul": "add", "div": "mul"}[op]
                else:  # arithmetic slip in the result
                    slip = float(rng.choice([-10, -1, 1, 10]))
            new = apply_step(op, value, arg) + slip
            lines.append(f"Step {k + 1}: {_fmt(value)} {SYMBOL[op]} {_fmt(arg)} = {_fmt(new)}")
            value = new
        if not correct and math.isclose(value, gold):
            value = gold + float(rng.choice([-1, 1, 2]))
            lines.append(f"Rounding the count gives {_fmt(value)}.")
        lines.append(f"#### {_fmt(value)}")
        return "\n".join(lines)

    def _generic_text(self, item: Item, correct: bool, rng: np.random.Generator) -> str:
        gold = float(normalise_number(item.gold or "0") or 0)
        if correct:
            value = gold
        else:
            factor = float(rng.choice([0.5, 0.9, 1.1, 2.0]))
            delta = float(rng.choice([-10, -2, -1, 1, 2, 10]))
            value = round(gold * factor + delta, 2)
            if math.isclose(value, gold):
                value = gold + 1
        return f"Working through the {len(item.steps()) or item.difficulty} steps of the problem.\n#### {_fmt(value)}"

    # -- judging ---------------------------------------------------------------------------
    def _judge(self, request: Request) -> Generation:
        item = request.item
        candidate = request.context.get("candidate", "")
        if item.choices:
            truth = parse_choice(candidate, len(item.choices)) == item.gold
        else:
            truth = numbers_match(parse_number_answer(candidate), item.gold)
        rng = self._own_rng(item, "judge", stable_hash(candidate))
        noise = self.params.judge
        flip = rng.random() < (noise.false_negative_rate if truth else noise.false_positive_rate)
        verdict = truth != flip
        text = (
            f"VERDICT: {'CORRECT' if verdict else 'INCORRECT'}\n"
            f"RATIONALE: the candidate's final value {'matches' if verdict else 'does not match'} the reference."
        )
        tokens_out = 24 + int(rng.integers(0, 16))
        return Generation(
            text=text,
            tokens_in=messages_tokens(request.messages),
            tokens_out=tokens_out,
            latency_s=round(0.05 + tokens_out * self.params.latency_s_per_token, 4),
        )
