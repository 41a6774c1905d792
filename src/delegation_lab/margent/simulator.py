"""The simulated team: the embedded default manager and sub-agents (documented in README).

The manager solves a question from its structure (the operations of an `arith` problem, never its
gold): its temperature-0 root candidate is right when

    skill - difficulty_slope * (d - 1) - (sqrt(w) * z_item + sqrt(1 - w) * eps_item) > 0,

with z_item the item's latent hardness. A call to sub-agent a, followed by the manager's revision,
turns a wrong candidate right with the rescue probability

    sigmoid(logit(rescue_at_d1) + rescue_logit_slope * (d - 1) - rescue_hardness * z_item)

and a right candidate wrong with the corruption probability
sigmoid(logit(corruption_at_d1) + corruption_logit_slope * (d - 1)); the net value of a call
follows from these and from how often the candidate is right, so a sub-agent can be worth less
than nothing. A call made without the candidate (the Verifier ablation) scales both. The signal
raises an issue on every rescue and corruption, and otherwise at flag_if_unresolved (wrong
candidate) or flag_if_right (false alarm); a wrong candidate that is flagged but not fixed is
changed to another wrong value with probability manager.revise_if_flagged. The manager reports a
confidence whose log-odds are +-confidence_separation / 2 plus Gaussian noise.

A call's effect (rescue, corruption, issue flag, new candidate) is a pure function of
(simulator.seed, item, sub-agent, the candidate it is called on): frozen, greedy sub-agents
given the same input say the same thing, so a sequence only gets a fresh draw where an earlier
call changed the candidate. Token counts are drawn per (item, sequence). Every draw comes from a
vectorised counter-based hash, so a branch is the same state in any batch and any order.
Token counts come from the rendered prompts' size and log-normal completion lengths, priced with
the prices of the solvers named in `margent.solvers`.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.special import expit, logit, ndtri

from delegation_lab.data.arith import apply_step
from delegation_lab.errors import InputError
from delegation_lab.hashing import stable_hash
from delegation_lab.margent import prompts
from delegation_lab.margent.params import SUBAGENTS, SimulatorParams
from delegation_lab.solvers.params import Price
from delegation_lab.margent.schemas import (
    AgentView,
    Candidate,
    Decision,
    ExtractorSignal,
    Fact,
    ReasonerSignal,
    Signal,
    State,
    VerifierSignal,
)
from delegation_lab.margent.team import CANDIDATE_READERS, Consultation, Reply
from delegation_lab.solvers.pricing import cost_usd, estimate_tokens, lognormal_tokens_from_normals, messages_tokens

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
PURPOSES = {p: i + 1 for i, p in enumerate(
    ["hardness", "root_noise", "confidence", "wrong", "outcome", "flag", "change", "malformed", "tokens", "revise_tokens", "pick", "rescue_latent"]
)}
OFFSETS = np.array([-10.0, -3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 10.0])
OP_WORDS = {"add": "adds", "sub": "subtracts", "mul": "multiplies by", "div": "divides by"}


def _mix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def hash_uniform(*keys: np.ndarray | int) -> np.ndarray:
    """Uniforms in (0, 1) from integer keys (arrays broadcast): splitmix64 chained over the keys."""
    arrays = [np.asarray(k).astype(np.uint64) for k in keys]
    h = np.zeros(np.broadcast(*arrays).shape, dtype=np.uint64)
    for k in arrays:
        h = _mix(h ^ k)
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def hash_normal(*keys: np.ndarray | int) -> np.ndarray:
    return ndtri(hash_uniform(*keys))


def item_key(item_id: str) -> int:
    return int(stable_hash(item_id, 15), 16)


def sequence_code(sequence: tuple[str, ...]) -> int:
    """A distinct integer per ordered sequence of sub-agents (base 4 over the global names)."""
    code = 0
    for agent in sequence:
        code = code * 4 + SUBAGENTS.index(agent) + 1
    return code


@lru_cache(maxsize=1 << 16)
def call_code(agent: str, answer: str) -> int:
    """Key of a call's effect: the sub-agent and the candidate it is called on. A frozen, greedy
    sub-agent given the same question and candidate returns the same signal, so an earlier call
    that left the candidate unchanged does not give a later one a fresh draw."""
    return int(stable_hash([agent, answer], 15), 16)


def solve_structure(view: AgentView) -> float:
    """The value a question's structure evaluates to: how the simulated team reads a problem."""
    if not view.structure:
        raise InputError(
            f"item {view.item_id}: the simulated MARGENT team solves a question from its step structure, "
            "which only `arith` items carry; set margent.team: llm to use real models on this dataset"
        )
    value = view.structure[0].value
    for step in view.structure[1:]:
        value = apply_step(step.op, value, step.value)
    return value


def fmt(value: float) -> str:
    if abs(value - round(value)) < 1e-9:
        return str(int(round(value)))
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _overhead(template, context: dict[str, str]) -> int:
    """Prompt tokens of a template with an empty question: its fixed framing."""
    from delegation_lab.data.items import Item

    blank = Item(item_id="_", split="", question="", gold=None)
    keys = {k: "" for k in ("candidate", "history", "agent", "signal", "available", "answer_format")}
    return messages_tokens(template.render(blank, {**keys, **context}))


_DECISIONS = {"commit": Decision(action="commit"), **{a: Decision(action="delegate", agent=a) for a in SUBAGENTS}}


def _candidate_tokens(state: State) -> int:
    """Prompt tokens of the candidate as the prompts render it (JSON with answer, confidence, rationale)."""
    c = state.candidate
    return estimate_tokens(c.answer) + estimate_tokens(c.rationale) + 12


class SimulatedTeam:
    """Manager and sub-agents as documented stochastic models; deterministic, batched, gold-free."""

    def __init__(self, params: SimulatorParams, prices: dict[str, Price]):
        self.params = params
        self.prices = prices  # role (manager / Extractor / Reasoner / Verifier) -> price
        self.backend_calls = 0
        self.seed = np.uint64(params.seed & 0xFFFFFFFFFFFF)
        self._truth: dict[str, float] = {}
        self._keys: dict[str, int] = {}
        self._signals: dict[tuple, Signal] = {}  # signals are pure functions of (agent, item, issue, step)
        self._overhead = {
            "candidate": _overhead(prompts.CANDIDATE, {}),
            "revise": _overhead(prompts.REVISE, {}),
            "decide": _overhead(prompts.DECIDE, {}),
            **{a: _overhead(t, {}) for a, t in (("Extractor", prompts.EXTRACTOR), ("Reasoner", prompts.REASONER), ("Verifier", prompts.VERIFIER))},
        }

    # -- helpers ---------------------------------------------------------------------------
    def _key(self, view: AgentView) -> int:
        k = self._keys.get(view.item_id)
        if k is None:
            k = self._keys[view.item_id] = item_key(view.item_id)
            self._truth[view.item_id] = solve_structure(view)
        return k

    def _draw(self, keys: np.ndarray, codes: np.ndarray, purpose: str, normal: bool = False) -> np.ndarray:
        fn = hash_normal if normal else hash_uniform
        return fn(self.seed, keys, codes, PURPOSES[purpose])

    def _hardness(self, keys: np.ndarray) -> np.ndarray:
        return self._draw(keys, np.zeros_like(keys), "hardness", normal=True)

    def _confidence(self, right: np.ndarray, keys: np.ndarray, codes: np.ndarray) -> np.ndarray:
        m = self.params.manager
        noise = self._draw(keys, codes, "confidence", normal=True)
        return expit(np.where(right, 0.5, -0.5) * m.confidence_separation + m.confidence_noise * noise)

    def _tokens(self, mean: float, keys: np.ndarray, codes: np.ndarray, purpose: str) -> np.ndarray:
        cv = self.params.tokens_cv
        z = self._draw(keys, codes, purpose, normal=True) if cv else np.zeros(keys.shape)
        return lognormal_tokens_from_normals(z, mean, cv).astype(np.int64)

    def _wrong_value(self, truth: float, u: float, previous: str | None) -> str:
        k = int(u * len(OFFSETS)) % len(OFFSETS)
        if previous is not None:
            try:
                prev_k = int(np.argmin(np.abs(OFFSETS - (float(previous) - truth))))
            except ValueError:
                prev_k = -1
            if prev_k == k:
                k = (k + 1 + int(u * 1e6) % (len(OFFSETS) - 1)) % len(OFFSETS)
        value = truth + OFFSETS[k]
        if value == truth:  # unreachable with nonzero offsets; kept for safety
            value = truth + 1
        return fmt(value)

    def _is_right(self, view: AgentView, answer: str) -> bool:
        try:
            return math.isclose(float(answer), self._truth[view.item_id], rel_tol=1e-9, abs_tol=1e-9)
        except ValueError:
            return False

    def _reply(self, value, role: str, tokens_in: int, tokens_out: int, error: str | None = None) -> Reply:
        cost = cost_usd(tokens_in, tokens_out, self.prices[role])
        return Reply(value=value, error=error, tokens_in=int(tokens_in), tokens_out=int(tokens_out), cost_usd=cost)

    def _q_tokens(self, view: AgentView) -> int:
        return estimate_tokens(view.question) + sum(estimate_tokens(c) + 2 for c in view.choices or ())

    # -- manager: root candidate ------------------------------------------------------------
    def candidates(self, views: list[AgentView]) -> list[Reply[Candidate]]:
        if not views:
            return []
        m = self.params.manager
        keys = np.array([self._key(v) for v in views], dtype=np.uint64)
        codes = np.zeros_like(keys)
        d = np.array([v.difficulty for v in views], dtype=float)
        z = self._hardness(keys)
        eps = self._draw(keys, codes, "root_noise", normal=True)
        w = m.hardness_weight
        right = m.skill - m.difficulty_slope * (d - 1) - (math.sqrt(w) * z + math.sqrt(1 - w) * eps) > 0
        conf = self._confidence(right, keys, codes)
        u_wrong = self._draw(keys, codes, "wrong")
        tokens_out = self._tokens(m.candidate_tokens_out, keys, codes, "tokens")
        self.backend_calls += len(views)
        out = []
        for i, view in enumerate(views):
            truth = self._truth[view.item_id]
            answer = fmt(truth) if right[i] else self._wrong_value(truth, float(u_wrong[i]), None)
            cand = Candidate(answer=answer, confidence=round(float(conf[i]), 4), rationale="worked through the steps")
            tin = self._overhead["candidate"] + self._q_tokens(view)
            out.append(self._reply(cand, "manager", tin, tokens_out[i]))
        return out

    # -- sub-agents -------------------------------------------------------------------------
    def _outcomes(self, agent: str, states: list[State], sees: list[bool]) -> dict[str, np.ndarray]:
        """The latent effect of calling `agent` from each state (shared by consult and revise)."""
        sp = self.params.subagent(agent)
        keys = np.array([self._key(s.x) for s in states], dtype=np.uint64)
        codes = np.array([call_code(agent, s.candidate.answer) for s in states], dtype=np.uint64)
        seq = np.array([sequence_code((*s.sequence, agent)) for s in states], dtype=np.uint64)
        d = np.array([s.x.difficulty for s in states], dtype=float)
        right = np.array([self._is_right(s.x, s.candidate.answer) for s in states], dtype=bool)
        z = self._hardness(keys)
        blank = np.array([agent in CANDIDATE_READERS and not v for v in sees], dtype=bool)
        p_rescue = expit(logit(sp.rescue_at_d1) + sp.rescue_logit_slope * (d - 1) - sp.rescue_hardness * z)
        p_corrupt = expit(logit(max(sp.corruption_at_d1, 1e-12)) + sp.corruption_logit_slope * (d - 1))
        p_rescue = np.clip(np.where(blank, p_rescue * sp.blank_rescue_scale, p_rescue), 0, 1)
        p_corrupt = np.clip(np.where(blank, p_corrupt * sp.blank_corruption_scale, p_corrupt), 0, 1)
        if sp.corruption_at_d1 == 0:
            p_corrupt = np.zeros_like(p_corrupt)
        u = self._draw(keys, codes, "outcome")
        # rescue noise = shared item part (the same for every call on the item) + the call's own part
        c = self.params.rescue_correlation
        shared = self._draw(keys, np.zeros_like(keys), "rescue_latent", normal=True)
        rescued = ~right & (ndtri(np.clip(p_rescue, 1e-12, 1 - 1e-12)) > math.sqrt(c) * shared + math.sqrt(1 - c) * ndtri(u))
        corrupted = right & (u < p_corrupt)
        u_flag = self._draw(keys, codes, "flag")
        flag = rescued | corrupted | np.where(right, u_flag < sp.flag_if_right, u_flag < sp.flag_if_unresolved)
        return {"keys": keys, "codes": codes, "seq": seq, "right": right, "rescued": rescued, "corrupted": corrupted, "flag": flag}

    def _signal(self, agent: str, view: AgentView, flag: bool, u: float) -> Signal:
        steps = view.structure or ()
        ops = steps[1:]
        j = int(u * max(len(ops), 1)) % max(len(ops), 1) if flag else 0
        key = (agent, view.item_id, flag, j)
        cached = self._signals.get(key)
        if cached is None:
            cached = self._signals[key] = self._make_signal(agent, steps, flag, j)
        return cached

    @staticmethod
    def _make_signal(agent: str, steps, flag: bool, j: int) -> Signal:
        ops = steps[1:]
        if agent == "Extractor":
            facts = [Fact(statement=f"The problem starts from {fmt(steps[0].value)}.", polarity="supports")]
            facts += [
                Fact(statement=f"Step {k + 1} {OP_WORDS.get(s.op, s.op)} {fmt(s.value)}.", polarity="neutral")
                for k, s in enumerate(ops[:6])
            ]
            if flag and ops:
                facts.append(Fact(statement=f"Step {j + 1} {OP_WORDS.get(ops[j].op, ops[j].op)} {fmt(ops[j].value)}, which a quick reading misses.", polarity="contradicts"))
            return ExtractorSignal(facts=tuple(facts))
        if agent == "Reasoner":
            decomposition = ["Start from the initial quantity."] + [f"Apply step {k + 1}." for k in range(min(len(ops), 12))]
            missing = (f"Step {j + 1} is not reflected in the working.",) if flag else ()
            return ReasonerSignal(decomposition=tuple(decomposition), missing_steps=missing)
        issues = (f"The candidate does not follow step {j + 1}.",) if flag else ()
        return VerifierSignal(verdict="inconsistent" if flag else "consistent", issues=issues)

    def consult(self, agent: str, states: list[State], sees_candidate: bool) -> list[Reply[Signal]]:
        if not states:
            return []
        sp = self.params.subagent(agent)
        sees = [sees_candidate] * len(states)
        o = self._outcomes(agent, states, sees)
        u_pick = self._draw(o["keys"], o["codes"], "pick")
        u_bad = self._draw(o["keys"], o["codes"], "malformed")
        tokens_out = self._tokens(sp.tokens_out, o["keys"], o["seq"], "tokens")
        self.backend_calls += len(states)
        out = []
        for i, state in enumerate(states):
            tin = self._overhead[agent] + self._q_tokens(state.x)
            if agent in CANDIDATE_READERS and sees_candidate:
                tin += _candidate_tokens(state)
            if u_bad[i] < self.params.malformed_rate:
                out.append(self._reply(None, agent, tin, tokens_out[i], error=f"{agent} reply breaks its schema (simulated malformed reply)"))
                continue
            signal = self._signal(agent, state.x, bool(o["flag"][i]), float(u_pick[i]))
            out.append(self._reply(signal, agent, tin, tokens_out[i]))
        return out

    # -- manager: revision ----------------------------------------------------------------
    def revise(self, pending: list[tuple[State, Consultation]]) -> list[Reply[Candidate]]:
        out: list[Reply[Candidate] | None] = [None] * len(pending)
        m = self.params.manager
        by_agent: dict[str, list[int]] = {}
        for i, (_, c) in enumerate(pending):
            by_agent.setdefault(c.agent, []).append(i)
        for agent, idx in by_agent.items():
            states = [pending[i][0] for i in idx]
            sees = [pending[i][1].sees_candidate for i in idx]
            o = self._outcomes(agent, states, sees)
            u_change = self._draw(o["keys"], o["codes"], "change")
            u_wrong = self._draw(o["keys"], o["codes"], "wrong")
            new_right = (o["right"] & ~o["corrupted"]) | o["rescued"]
            conf = self._confidence(new_right, o["keys"], o["codes"])
            tokens_out = self._tokens(m.revise_tokens_out, o["keys"], o["seq"], "revise_tokens")
            for n, i in enumerate(idx):
                state, consultation = pending[i]
                truth = self._truth[state.x.item_id]
                old = state.candidate
                flagged = consultation.signal is not None and consultation.signal.raises_issue
                if consultation.signal is None:
                    cand = old
                elif o["rescued"][n]:
                    cand = Candidate(answer=fmt(truth), confidence=round(float(conf[n]), 4), rationale=f"fixed after the {agent}")
                elif o["corrupted"][n] or (flagged and not o["right"][n] and u_change[n] < m.revise_if_flagged):
                    cand = Candidate(answer=self._wrong_value(truth, float(u_wrong[n]), old.answer), confidence=round(float(conf[n]), 4), rationale=f"revised after the {agent}")
                else:
                    cand = old
                history = sum(c.signal_tokens + 24 for c in state.history) + consultation.signal_tokens
                tin = self._overhead["revise"] + self._q_tokens(state.x) + _candidate_tokens(state) + history
                out[i] = self._reply(cand, "manager", tin, tokens_out[n])
        self.backend_calls += len(pending)
        return out  # type: ignore[return-value]

    # -- manager: decide (the untrained, prompted manager) ---------------------------------
    def decide(self, states: list[State], pool: tuple[str, ...]) -> list[Reply[Decision]]:
        if not states:
            return []
        m = self.params.manager
        keys = np.array([self._key(s.x) for s in states], dtype=np.uint64)
        codes = np.array([sequence_code(s.sequence) for s in states], dtype=np.uint64)
        tokens_out = self._tokens(m.decide_tokens_out, keys, codes, "revise_tokens")
        self.backend_calls += len(states)
        out = []
        for i, state in enumerate(states):
            available = [a for a in m.prompted_order if a in pool and a not in state.used]
            if state.candidate.confidence < m.prompted_threshold and available:
                decision = _DECISIONS[available[0]]
            else:
                decision = _DECISIONS["commit"]
            history = sum(c.signal_tokens + 24 for c in state.history)
            tin = self._overhead["decide"] + self._q_tokens(state.x) + _candidate_tokens(state) + history
            out.append(self._reply(decision, "manager", tin, tokens_out[i]))
        return out
