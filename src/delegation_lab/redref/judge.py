"""Reflection (paper 3.2, A.3.4): a programmatic check that short-circuits unambiguous positives and
an LLM judge with calibrated false-positive / false-negative rates giving a binary verdict and a
rationale. Both go through the solver protocol: the judge is any Solver asked with role
`redref_judge`; the simulated default is `SimulatedJudgeBackend`.

The judge answers two questions about a candidate (A.3.4 steps 2 and 3): is the candidate *better*
than the previous draft (the Bernoulli feedback y of the posterior update: a positive marginal
contribution), and does it *satisfy the task* (the SUCCESS verdict that stops the recursion)?
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from delegation_lab.data.items import Item
from delegation_lab.errors import InputError
from delegation_lab.evaluation.statistics import wilson_interval
from delegation_lab.hashing import stable_hash
from delegation_lab.redref.tasks import Zoo, parse_sections, section_score
from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.pricing import messages_tokens
from delegation_lab.solvers.prompts import PromptTemplate, register

AGENT_ROLE = "redref_agent"
JUDGE_ROLE = "redref_judge"

VERDICT_LINE = re.compile(r"VERDICT:\s*(SUCCESS|FAILURE)", re.I)
IMPROVED_LINE = re.compile(r"IMPROVED:\s*(YES|NO)", re.I)
SCORE_LINE = re.compile(r"SCORE:\s*(-?\d+(?:\.\d+)?)", re.I)
RATIONALE_LINE = re.compile(r"RATIONALE:\s*(.+)", re.I)


def parse_judge_reply(text: str, item: Item | None = None) -> str | None:
    """A judge reply as compact JSON {success, improved, score}; None when there is no verdict line."""
    verdict = VERDICT_LINE.search(text or "")
    if verdict is None:
        return None
    improved = IMPROVED_LINE.search(text)
    score = SCORE_LINE.search(text)
    success = verdict.group(1).upper() == "SUCCESS"
    return json.dumps({
        "success": success,
        "improved": (improved.group(1).upper() == "YES") if improved else success,
        "score": float(score.group(1)) if score else None,
    }, sort_keys=True)


def rationale_of(text: str | None) -> str:
    m = RATIONALE_LINE.search(text or "")
    return m.group(1).strip() if m else ""


AGENT_TEMPLATE = register(PromptTemplate(
    name="redref_agent",
    version=1,
    system="You are one expert agent in a team that answers multi-part requests. Only answer the parts within your expertise.",
    user=(
        "You are the {agent} agent (expertise: {expertise}).\n\nTask:\n{question}\n\n"
        "Current draft of the team's answer:\n{draft}\n\nJudge's critique of the last attempt:\n{critique}\n\n"
        "Write one section for each part of the task you can answer well, each starting with the line "
        "'## <domain> | by {agent} | #{attempt}' and ending with 'Fact: <the key fact it relies on>'. "
        "Skip parts outside your expertise."
    ),
    parser=lambda text, item: None,
))

JUDGE_TEMPLATE = register(PromptTemplate(
    name="redref_judge",
    version=1,
    system="You are a strict reviewer of multi-part answers. You compare drafts and say whether the task is satisfied.",
    user=(
        "Task:\n{question}\n\nRequired parts: {parts}\n\nPrevious draft:\n{previous}\n\nCandidate draft:\n{candidate}\n\n"
        "Reply with four lines:\n"
        "VERDICT: SUCCESS or FAILURE (does the candidate satisfy every part at a score of at least {threshold}/100?)\n"
        "IMPROVED: YES or NO (is the candidate better than the previous draft?)\n"
        "SCORE: the candidate's score from 0 to 100\n"
        "RATIONALE: one sentence naming the missing or weak parts."
    ),
    parser=parse_judge_reply,
))

ROLE_PROMPTS = {AGENT_ROLE: AGENT_TEMPLATE.name, JUDGE_ROLE: JUDGE_TEMPLATE.name}


# --------------------------------------------------------------------------------------------
# the programmatic channel


def supporting_fact_recall(item: Item, text: str) -> float | None:
    """Share of the task's parts whose section states the part's key fact (supporting-facts recall);
    None when the task has no programmatic check. Recall 1.0 is an unambiguous positive."""
    task = json.loads(item.program or "{}")
    if not task.get("checkable"):
        return None
    parts = task.get("parts", [])
    sections = parse_sections(text)
    hits = sum(1 for d in parts if d in sections and f"Fact: {task['facts'][d]}" in sections[d][2])
    return hits / len(parts) if parts else None


# --------------------------------------------------------------------------------------------
# the simulated judge


def noisy_verdict(truth: np.ndarray | bool, u: np.ndarray | float, fp: float, fn: float) -> Any:
    """The judge's verdict on a true outcome: a true success is missed with prob. fn, a failure passed with prob. fp."""
    return np.where(truth, u >= fn, u < fp)


def draft_score(zoo: Zoo, seed: int, item: Item, text: str, impaired: frozenset[str]) -> float:
    """True 0-100 score of a draft: the mean over the task's parts of each section's score (0 if missing)."""
    parts = json.loads(item.program or "{}").get("parts", [])
    sections = parse_sections(text)
    total = 0.0
    for d in parts:
        if d in sections:
            agent, nonce, _ = sections[d]
            s = section_score(zoo, seed, item.item_id, agent, d, nonce, impaired)
            total += s or 0.0
    return total / len(parts) if parts else 0.0


class SimulatedJudgeBackend:
    """Role `redref_judge`: grades candidate vs previous draft from the sections' true scores, then
    flips each verdict with the calibrated error rates."""

    def __init__(self, zoo: Zoo, seed: int, fp: float, fn: float, success_score: float, improve_margin: float,
                 impaired: frozenset[str] = frozenset()):
        self.zoo, self.seed, self.fp, self.fn = zoo, seed, fp, fn
        self.success_score, self.improve_margin, self.impaired = success_score, improve_margin, impaired

    def fingerprint(self) -> dict[str, Any]:
        return {"seed": self.seed, "fp": self.fp, "fn": self.fn, "success_score": self.success_score,
                "improve_margin": self.improve_margin, "impaired": sorted(self.impaired)}

    def truth(self, item: Item, previous: str, candidate: str) -> tuple[bool, bool, float]:
        """(improved, success, candidate score) as the ground truth sees them."""
        prev = draft_score(self.zoo, self.seed, item, previous, self.impaired)
        cand = draft_score(self.zoo, self.seed, item, candidate, self.impaired)
        return cand - prev > self.improve_margin, cand >= self.success_score, cand

    def generate(self, requests: list[Request]) -> list[Generation]:
        return [self._one(r) for r in requests]

    def _one(self, request: Request) -> Generation:
        if request.role != JUDGE_ROLE:
            raise ValueError(f"SimulatedJudgeBackend plays role {JUDGE_ROLE!r}, not {request.role!r}")
        item = request.item
        previous, candidate = request.context.get("previous", ""), request.context.get("candidate", "")
        improved, success, score = self.truth(item, previous, candidate)
        rng = np.random.default_rng([self.seed, int(stable_hash([item.item_id, previous, candidate, "judge"], 12), 16)])
        u_improved, u_success, z = rng.random(), rng.random(), rng.standard_normal()
        says_improved = bool(noisy_verdict(improved, u_improved, self.fp, self.fn))
        says_success = bool(noisy_verdict(success, u_success, self.fp, self.fn))
        parts = json.loads(item.program or "{}").get("parts", [])
        sections = parse_sections(candidate if says_improved else previous)  # the critique is of the best draft
        missing = [d for d in parts if d not in sections]
        weak = [d for d in parts if d in sections and (section_score(self.zoo, self.seed, item.item_id, sections[d][0], d,
                                                                    sections[d][1], self.impaired) or 0) < self.zoo.params.fact_score]
        why = (f"missing parts: {', '.join(missing)}" if missing else "every part is present") + (
            f"; weak parts: {', '.join(weak)}" if weak else "")
        text = (
            f"VERDICT: {'SUCCESS' if says_success else 'FAILURE'}\nIMPROVED: {'YES' if says_improved else 'NO'}\n"
            f"SCORE: {float(np.clip(score + 3.0 * z, 0, 100)):.1f}\nRATIONALE: {why}."
        )
        tokens_out = 40 + 4 * len(missing + weak)
        return Generation(text=text, tokens_in=messages_tokens(request.messages), tokens_out=tokens_out,
                          latency_s=round(0.1 + 0.01 * tokens_out, 4))


# --------------------------------------------------------------------------------------------
# calibration


@dataclass(frozen=True)
class JudgeCalibration:
    """FP / FN rates estimated on a labeled set, with Wilson 95 % intervals."""

    n: int
    n_positive: int
    n_negative: int
    false_positive_rate: float
    false_negative_rate: float
    fp_ci: tuple[float, float]
    fn_ci: tuple[float, float]

    @property
    def delta(self) -> float:
        return 1.0 - self.false_positive_rate - self.false_negative_rate

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n, "n_positive": self.n_positive, "n_negative": self.n_negative,
            "false_positive_rate": self.false_positive_rate, "false_negative_rate": self.false_negative_rate,
            "fp_ci": {"low": self.fp_ci[0], "high": self.fp_ci[1]},
            "fn_ci": {"low": self.fn_ci[0], "high": self.fn_ci[1]},
            "delta": self.delta,
        }


def calibrate(truth: np.ndarray, verdict: np.ndarray, what: str = "judge") -> JudgeCalibration:
    """Estimate the judge's error rates from labeled examples; an uninformative judge (delta <= 0) is an error."""
    truth, verdict = np.asarray(truth, dtype=bool), np.asarray(verdict, dtype=bool)
    if truth.shape != verdict.shape or truth.size == 0:
        raise InputError(f"{what} calibration: need equally many labels and verdicts (got {truth.size} and {verdict.size})")
    pos, neg = int(truth.sum()), int((~truth).sum())
    fp, fn = int((verdict & ~truth).sum()), int((~verdict & truth).sum())
    cal = JudgeCalibration(
        n=int(truth.size), n_positive=pos, n_negative=neg,
        false_positive_rate=fp / neg if neg else 0.0, false_negative_rate=fn / pos if pos else 0.0,
        fp_ci=wilson_interval(fp, neg), fn_ci=wilson_interval(fn, pos),
    )
    if cal.delta <= 0:
        raise InputError(
            f"{what} calibration: delta = 1 - FP - FN = {cal.delta:.3f} <= 0 on {cal.n} labeled examples; "
            "the judge carries no information about success, so REDEREF's beliefs cannot learn (Theorem 3.1)"
        )
    return cal
