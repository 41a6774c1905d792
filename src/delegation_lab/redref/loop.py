"""Algorithm 1's depth loop, once: budget (line 7), Thompson sampling (line 9), forced exploration
(lines 10-12), delegation (14-16), over-budget (17), the posterior update (26), success (33),
cooldown (36) and plateau (38), batched over rows (seeds, or seeds x budgets; the controller is a
batch of one). The protocol controller, the simulated engine and the cached routing all run this
loop; each supplies a `Task`: how the chosen agent answers and what the call costs, how the judge
scores the candidate, and what it keeps of each step.

Two verdicts per judged call (our reading of A.3.4 steps 2-3, see controller.py): y, a positive
marginal contribution, and e, the task is solved. `verdict="split"` credits y (eq. 2), accepts the
candidate as the best draft on y (lines 29-31) and stops when an accepted candidate is judged a
success; `verdict="single"` is Algorithm 1 as printed: e is the one y of eq. (2) and of line 33,
y only keeps the best candidate. Either way y drives the plateau count (line 38: no judged
improvement over the last k attempts). The cached routing's judge gives one verdict (y = e).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from delegation_lab.redref import policy

STOP_CODES = {"success": 0, "depth": 1, "budget": 2, "plateau": 3}
STOP_NAMES = {code: name for name, code in STOP_CODES.items()}
NO_AGENT = -1  # in `delegated` / `released`: no call (no release) at that depth

Verdict = Literal["split", "single"]


@dataclass(frozen=True)
class Limits:
    """When the recursion ends (Section 3.4) and how long a chosen agent sits out."""

    max_depth: int  # D
    budget: float | np.ndarray  # B per row (cached routing: one per operating point)
    cooldown: int  # r
    plateau: int  # k


@dataclass
class LoopState:
    """One task's loop over B rows: the beliefs it samples and updates (in place), cooldowns,
    spending, counters, and the decisions taken (`delegated`, `released`, `stop`)."""

    alpha: np.ndarray  # float [B, N]
    beta: np.ndarray  # float [B, N]
    cool: np.ndarray  # int [B, N]: rounds an agent still sits out
    spent: np.ndarray  # float [B]: cost of every call so far (the over-budget one included)
    rounds: np.ndarray  # int [B]: depths used, forced-exploration rounds included
    calls: np.ndarray  # int [B]
    no_improvement: np.ndarray  # int [B]: judged calls since the last y = 1
    active: np.ndarray  # bool [B]
    stop: np.ndarray  # int [B]: STOP_CODES (depth until another reason ends the row)
    judged_success: np.ndarray  # bool [B]
    time_to_success: np.ndarray  # float [B]: the round of the judged success; nan when none
    delegated: np.ndarray  # int [B, D]: the agent called at each depth; NO_AGENT when no call
    released: np.ndarray  # int [B, D]: the agent forced exploration released at each depth; NO_AGENT when none

    @classmethod
    def start(cls, alpha: np.ndarray, beta: np.ndarray, max_depth: int) -> LoopState:
        B, N = alpha.shape
        return cls(alpha, beta, np.zeros((B, N), dtype=int), np.zeros(B), np.zeros(B, dtype=int), np.zeros(B, dtype=int),
                   np.zeros(B, dtype=int), np.ones(B, dtype=bool), np.full(B, STOP_CODES["depth"]), np.zeros(B, dtype=bool),
                   np.full(B, np.nan), np.full((B, max_depth), NO_AGENT), np.full((B, max_depth), NO_AGENT))

    def end(self, rows: np.ndarray, reason: str) -> None:
        """Stop the active rows in `rows` for `reason`."""
        rows = rows & self.active
        self.stop[rows] = STOP_CODES[reason]
        self.active &= ~rows


@dataclass
class Step:
    """One depth's delegation, as the task sees it after the posterior update."""

    depth: int
    agent: np.ndarray  # int [B]: the chosen agent (meaningful where `called`)
    theta: np.ndarray  # float [B, N]: the sampled scores
    called: np.ndarray  # bool [B]: rows that called an agent this depth
    judged: np.ndarray  # bool [B]: called and within budget, so judged (line 17)
    cost: np.ndarray  # float [B]
    y: np.ndarray  # bool [B]: judged a positive marginal contribution
    e: np.ndarray  # bool [B]: judged a success
    credit: np.ndarray  # bool [B]: the y of eq. (2) (and of the memory)
    accept: np.ndarray  # bool [B]: the candidate becomes the best draft
    done: np.ndarray  # bool [B]: the task ends in success


class Task:
    """What differs between the callers of `run_task`. `answer` and `judge` are required; the others
    default to Algorithm 1 as printed (Thompson or random scores, every agent eligible, nothing kept)."""

    rng: np.random.Generator
    selection: policy.Selection = "thompson"

    def eligible(self, state: LoopState) -> np.ndarray | None:
        """bool [B, N]: the agents a row may call now; None: all. A row with none stops (budget)."""
        return None

    def scores(self, state: LoopState, eligible: np.ndarray | None) -> np.ndarray:
        """theta [B, N] (line 9): -inf for cooling or ineligible agents."""
        return policy.sample_scores(state.alpha, state.beta, state.cool, self.rng, self.selection, eligible)

    def released(self, state: LoopState, depth: int, rows: np.ndarray, agent: np.ndarray) -> None:
        """Forced exploration freed `agent` [B] in `rows` and spent the round."""

    def answer(self, state: LoopState, depth: int, agent: np.ndarray, called: np.ndarray) -> np.ndarray:
        """The chosen agents answer in the `called` rows; returns what each call cost [B]."""
        raise NotImplementedError

    def judge(self, state: LoopState, depth: int, agent: np.ndarray, judged: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(y, e) [B] for the candidates of the `judged` rows (the others are ignored)."""
        raise NotImplementedError

    def keep(self, state: LoopState, step: Step) -> None:
        """Record the step, the memory and the best draft (called after the posterior update)."""


def run_task(task: Task, state: LoopState, limits: Limits, verdict: Verdict = "split") -> LoopState:
    """Algorithm 1, lines 6-40, for every row of `state`; returns `state` with its decisions."""
    for d in range(1, limits.max_depth + 1):
        state.end(state.spent >= limits.budget, "budget")  # line 7
        if not state.active.any():
            break
        eligible = task.eligible(state)
        if eligible is not None:
            state.end(~eligible.any(axis=1), "budget")  # nothing affordable is left
            if not state.active.any():
                break
        theta = task.scores(state, eligible)
        forced = state.active & ~np.isfinite(theta).any(axis=1)
        if forced.any():  # every agent cools: release one, spend the round (lines 10-12)
            j = policy.release_one(state.cool, forced, eligible)
            state.rounds[forced] += 1
            state.released[forced, d - 1] = j[forced]
            task.released(state, d, forced, j)
        called = state.active & ~forced
        if not called.any():
            continue
        i = policy.select(theta, state.alpha, state.beta)  # line 14
        state.rounds[called] += 1
        state.calls[called] += 1
        state.delegated[called, d - 1] = i[called]
        cost = task.answer(state, d, i, called)  # lines 15-16
        state.spent = np.where(called, state.spent + cost, state.spent)
        state.end(called & (state.spent > limits.budget), "budget")  # line 17: not judged
        judged = called & state.active
        y, e = task.judge(state, d, i, judged)  # lines 19-25
        y, e = y & judged, e & judged
        credit = e if verdict == "single" else y
        policy.update(state.alpha, state.beta, i, credit, judged)  # line 26
        accept = judged & (y | e) if verdict == "single" else y
        done = accept & e
        task.keep(state, Step(d, i, theta, called, judged, cost, y, e, credit, accept, done))
        state.judged_success[done] = True
        state.time_to_success[done] = state.rounds[done]
        state.end(done, "success")  # line 33
        carry_on = judged & ~done
        policy.cool_down(state.cool, i, limits.cooldown, carry_on)  # line 36
        state.no_improvement = np.where(judged, np.where(y, 0, state.no_improvement + 1), state.no_improvement)
        state.end(carry_on & (state.no_improvement >= limits.plateau), "plateau")  # line 38
    return state
