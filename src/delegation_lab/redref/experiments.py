"""The study's experiments: RQ1 efficiency, RQ2 specialization, RQ3 impairment, the judge-noise
sweep (Theorem 3.1), routing on cached answers, the judge calibrations, and a run of the protocol
controller beside the vectorised engine. Each returns its metrics (paper figures beside ours under
a `paper` key) and the raw outcomes the stage turns into trajectories, plots and MLflow runs.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from delegation_lab.data.items import Item
from delegation_lab.errors import InputError
from delegation_lab.evaluation import statistics as stats
from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.pipeline.layout import Layout
from delegation_lab.redref.bandit import SweepResult, judge_noise_sweep, loglog_slope
from delegation_lab.redref.cached import CachedArms, CachedOutcome, route_cached, verdict_rows
from delegation_lab.redref.controller import Redref, merge_sections
from delegation_lab.redref.engine import EngineSetup, SequenceOutcome, run_sequences
from delegation_lab.redref.jobs import Jobs, serial
from delegation_lab.solvers.params import Price, SimulatedParams, SolverParams
from delegation_lab.redref.judge import (
    AGENT_TEMPLATE,
    JUDGE_ROLE,
    ROLE_PROMPTS,
    SimulatedJudgeBackend,
    calibrate,
    draft_score,
)
from delegation_lab.redref.memory import BeliefState, Embedder, KnownTexts, similarity
from delegation_lab.redref.params import RedrefParams
from delegation_lab.redref.tasks import RELATED, SplitKnowledgeBackend, TaskPool, Zoo, build_zoo, generate_tasks
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.pricing import messages_tokens

PAPER_RQ1 = {
    "success_redref": 96.65, "success_random": 96.46, "tokens_ratio": 0.72, "calls_ratio": 0.83, "time_ratio": 0.81,
    "bad_uses_redref": 5.65, "bad_uses_random": 6.62, "good_uses_redref": 5.01, "good_uses_random": 4.92,
    "total_attempted_redref": 10.67, "total_attempted_random": 11.54,
}
PAPER_RQ2 = {"belief_start": 0.50, "belief_end": 0.84, "rounds_first_half": 8.11, "rounds_second_half": 6.86}
# Table 3's beliefs give 0.23 / 0.35 - 1 = -34.3 %; the text's "almost 50 %" is not the table's figure.
PAPER_RQ3 = {"belief_normal": 0.35, "belief_impaired": 0.23, "belief_decline_pct": -34.29, "contributions_normal": 12.0,
             "contributions_impaired": 0.0, "quality_normal": 84.52, "quality_impaired": 81.80}
PAPER_JUDGE = {"examples": 200}  # §3.2 / A.3.4: the judge is calibrated on ~200 labeled examples

# Rows of paper vs ours whose "ours" is not an outcome of the method (the `provenance` interface:
# unlisted rows are computed). Keys are the rows' dotted metric paths.
PROVENANCE = {
    "rq2.belief_start": {"kind": "setting", "why": "the uniform prior alpha0 = beta0 = 1 read back: no task has been seen yet"},
    "rq3.contributions_impaired": {"kind": "setting", "why": "the impaired agent's competence is set to 0, so it cannot contribute by construction"},
    "judge.calibration.examples": {"kind": "setting", "why": "redref.judge.calibration_size, set to the paper's ~200"},
    "judge.calibration.false_positive_rate": {"kind": "setting", "why": "the judge's FP rate estimated on the calibration examples recovers the injected redref.judge.noise (judge.calibration.configured), not a property of REDEREF; the paper gives no figure"},
    "judge.calibration.false_negative_rate": {"kind": "setting", "why": "the judge's FN rate estimated on the calibration examples recovers the injected redref.judge.noise (judge.calibration.configured), not a property of REDEREF; the paper gives no figure"},
}


def provenance(metrics: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The `provenance` block for the rows these metrics carry."""
    def has(path: str) -> bool:
        node: Any = metrics
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True
    return {k: v for k, v in PROVENANCE.items() if has(k)}


@dataclass
class World:
    """The simulated population, its task pool and the pool's similarity kernel."""

    zoo: Zoo
    pool: TaskPool
    embeddings: np.ndarray
    sim: np.ndarray
    embedder: Embedder


def prompt_overhead(zoo: Zoo) -> int:
    """Prompt tokens of the agent template around an empty query, draft and critique."""
    empty = Item(item_id="x", split="tasks", question="", gold=None)
    context = {"agent": zoo.names[0], "expertise": zoo.names[0], "draft": "(empty)", "critique": "", "attempt": "1"}
    return messages_tokens(AGENT_TEMPLATE.render(empty, context))


def build_world(params: RedrefParams, embedder: Embedder) -> World:
    zoo = build_zoo(params.zoo)
    pool = generate_tasks(zoo, params.tasks, params.seed, prompt_overhead(zoo))
    emb = embedder.encode(pool.texts)
    return World(zoo, pool, emb, similarity(emb, emb), KnownTexts(embedder, pool.texts, emb))


def draw_sequences(candidates: np.ndarray, seeds: int, n_tasks: int, rng: np.random.Generator, what: str) -> np.ndarray:
    """Each seed's own sequence of distinct tasks from `candidates` (pool indices)."""
    if candidates.size < n_tasks:
        raise InputError(f"{what}: needs {n_tasks} distinct tasks but the pool has {candidates.size} eligible; "
                         "raise redref.tasks.pool_size or lower the sequence length")
    return np.stack([rng.choice(candidates, size=n_tasks, replace=False) for _ in range(seeds)])


def setup_for(params: RedrefParams, selection: str = "thompson", prior: str | None = None, verdict: str = "split",
              beliefs: str = "agent") -> EngineSetup:
    noise = params.judge.noise
    return EngineSetup(params.controller, noise.false_positive_rate, noise.false_negative_rate,
                       params.tasks.success_score, selection, prior, verdict, beliefs)  # type: ignore[arg-type]


def _r(x: float, n: int = 4) -> float:
    return round(float(x), n)


def _ci(d: dict[str, float], n: int = 4) -> list[float]:
    """[low, high], the form every study's `<name>_ci` takes (read by `dlab repro check`)."""
    return [_r(d["low"], n), _r(d["high"], n)]


def per_seed(x: np.ndarray) -> np.ndarray:
    """Mean over tasks per seed (nan-aware: tasks without a value drop out)."""
    with np.errstate(all="ignore"):
        return np.nanmean(np.asarray(x, float), axis=1)


# --------------------------------------------------------------------------------------------
# RQ1


def efficiency_summary(a: SequenceOutcome, b: SequenceOutcome, resamples: int, rng: np.random.Generator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, fa, fb in (("tokens_ratio", a.tokens, b.tokens), ("calls_ratio", a.calls, b.calls),
                        ("time_ratio", a.time_to_success, b.time_to_success)):
        r = stats.ratio_ci(per_seed(fa), per_seed(fb), resamples, rng)
        out[key], out[f"{key}_ci"] = _r(r["value"]), _ci(r)
    return out


def method_summary(o: SequenceOutcome, name: str, resamples: int, rng: np.random.Generator) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, arr, scale in (("success", o.success, 100.0), ("judged_success", o.judged_success, 100.0),
                            ("quality", o.quality, 1.0), ("tokens", o.tokens, 1.0), ("calls", o.calls, 1.0),
                            ("bad_uses", o.bad_uses, 1.0), ("good_uses", o.good_uses, 1.0),
                            ("total_attempted", o.calls, 1.0), ("time_to_success", o.time_to_success, 1.0)):
        m = stats.mean_ci(per_seed(arr) * scale, resamples, rng)
        out[f"{key}_{name}"], out[f"{key}_{name}_ci"] = _r(m["value"]), _ci(m)
    return out


def run_rq1(world: World, params: RedrefParams, rng: np.random.Generator,
            jobs: Jobs | None = None) -> tuple[dict[str, Any], dict[str, SequenceOutcome], np.ndarray]:
    return finish_rq1(start_rq1(world, params, rng, jobs), params, rng)


def start_rq1(world: World, params: RedrefParams, rng: np.random.Generator, jobs: Jobs | None = None) -> tuple[dict, np.ndarray]:
    """RQ1's task sequences (drawn from the study's shared `rng`) and its simulations, submitted to
    `jobs` (each with its own generator, so where it runs changes nothing)."""
    jobs = jobs or serial()
    p = params.rq1
    seq = draw_sequences(np.arange(world.pool.size), p.seeds, p.n_tasks, rng, "rq1")
    methods = {"redref": setup_for(params, "thompson"), "random": setup_for(params, "random")}
    if p.ablations:
        methods["redref_persistent"] = setup_for(params, "thompson", "persistent")
        methods["redref_reset"] = setup_for(params, "thompson", "reset")
        slow = params.model_copy(update={"controller": params.controller.model_copy(update={"decay": params.controller.decay / 5})})
        methods["redref_slow_decay"] = setup_for(slow, "thompson")
    if p.single_verdict:  # Algorithm 1 as printed: one y for credit and stopping, REDEREF and random alike
        methods["redref_single"] = setup_for(params, "thompson", verdict="single")
        methods["random_single"] = setup_for(params, "random", verdict="single")
    if p.task_conditional:  # our variant: one Beta per agent x domain instead of a kernel-seeded one per agent
        methods["redref_task_conditional"] = setup_for(params, "thompson", "reset", beliefs="agent_domain")
    variants = {"redref_single", "random_single", "redref_task_conditional"}  # metrics only: no step log (time budget)
    pending = {m: jobs.submit(run_sequences, world.zoo, world.pool, seq, world.sim, s, np.random.default_rng([params.seed, 11, k]),
                              log_steps=m not in variants)
               for k, (m, s) in enumerate(methods.items())}
    if p.ablations:  # the same loop with an oracle kernel: Jaccard overlap of the tasks' domain sets
        r = world.pool.required.astype(float)
        inter = r @ r.T
        jaccard = inter / (r.sum(1)[:, None] + r.sum(1)[None, :] - inter)
        pending["redref_domain_kernel"] = jobs.submit(run_sequences, world.zoo, world.pool, seq, jaccard, setup_for(params, "thompson"),
                                                      np.random.default_rng([params.seed, 11, 99]))
    return pending, seq


def finish_rq1(started: tuple[dict, np.ndarray], params: RedrefParams,
               rng: np.random.Generator) -> tuple[dict[str, Any], dict[str, SequenceOutcome], np.ndarray]:
    """RQ1's metrics from its simulations (the bootstrap draws from the shared `rng`, after the sequences)."""
    pending, seq = started
    p = params.rq1
    outcomes = {m: f.result() for m, f in pending.items()}
    a, b = outcomes["redref"], outcomes["random"]
    res = params.bootstrap_resamples
    metrics: dict[str, Any] = {"n_seeds": p.seeds, "n_tasks": p.n_tasks}
    metrics.update(method_summary(a, "redref", res, rng))
    metrics.update(method_summary(b, "random", res, rng))
    metrics.update(efficiency_summary(a, b, res, rng))
    ablation = {}
    for name in ("redref_persistent", "redref_reset", "redref_slow_decay", "redref_domain_kernel"):
        if name in outcomes:
            o = outcomes[name]
            ablation[name.removeprefix("redref_")] = {
                **efficiency_summary(o, b, res, rng),
                "success": _r(100 * o.success.mean(), 2),
                "calls": _r(o.calls.mean(), 3),
            }
    if ablation:
        metrics["ablation"] = ablation
    if p.single_verdict:
        single, single_random = outcomes["redref_single"], outcomes["random_single"]
        metrics["single_verdict"] = {
            **efficiency_summary(single, single_random, res, rng),  # ratios to random under the same loop
            **method_summary(single, "redref", res, rng), **method_summary(single_random, "random", res, rng),
            "vs_split": efficiency_summary(single, a, res, rng),  # the paper's algorithm / our split-verdict reading
        }
    if p.task_conditional:
        tc = outcomes["redref_task_conditional"]
        metrics["task_conditional"] = {
            **efficiency_summary(tc, b, res, rng), **method_summary(tc, "redref", res, rng),
            "vs_redref": efficiency_summary(tc, a, res, rng),  # ratios to the paper's per-agent beliefs
        }
    metrics["paper"] = dict(PAPER_RQ1)
    return metrics, outcomes, seq


# --------------------------------------------------------------------------------------------
# RQ2


def run_rq2(world: World, params: RedrefParams, rng: np.random.Generator,
            jobs: Jobs | None = None) -> tuple[dict[str, Any], dict[str, SequenceOutcome], np.ndarray]:
    jobs = jobs or serial()
    p = params.rq2
    expert = world.zoo.names.index(p.expert)
    candidates = np.nonzero(world.pool.required[:, expert])[0]
    seq = draw_sequences(candidates, p.seeds, p.n_tasks, rng, f"rq2 (tasks containing {p.expert})")
    pending = {
        "redref": jobs.submit(run_sequences, world.zoo, world.pool, seq, world.sim, setup_for(params, "thompson"),
                              np.random.default_rng([params.seed, 12, 0])),
        "random": jobs.submit(run_sequences, world.zoo, world.pool, seq, world.sim, setup_for(params, "random"),
                              np.random.default_rng([params.seed, 12, 1])),
    }
    outcomes = {m: f.result() for m, f in pending.items()}
    res = params.bootstrap_resamples
    o = outcomes["redref"]
    belief = o.belief_start[:, :, expert]
    half = p.n_tasks // 2
    metrics: dict[str, Any] = {"expert": p.expert, "n_seeds": p.seeds, "n_tasks": p.n_tasks}
    for key, col in (("belief_start", belief[:, 0]), ("belief_end", belief[:, -1])):
        m = stats.median_ci(col, res, rng)
        metrics[key], metrics[f"{key}_ci"] = _r(m["value"]), _ci(m)
    for name, out in outcomes.items():
        picks = out.first_pick[:, :, expert]
        suffix = "" if name == "redref" else "_random"
        for key, sl in (("rounds_first_half", slice(0, half)), ("rounds_second_half", slice(half, None))):
            m = stats.mean_ci(per_seed(picks[:, sl]), res, rng)
            metrics[key + suffix], metrics[f"{key}{suffix}_ci"] = _r(m["value"], 3), _ci(m, 3)
        metrics["expert_picked_pct" + suffix] = _r(100 * np.isfinite(picks).mean(), 2)
    metrics["success_redref"] = _r(100 * o.success.mean(), 2)
    metrics["paper"] = dict(PAPER_RQ2)
    return metrics, outcomes, seq


# --------------------------------------------------------------------------------------------
# RQ3


def run_rq3(world: World, params: RedrefParams, rng: np.random.Generator,
            jobs: Jobs | None = None) -> tuple[dict[str, Any], dict[str, SequenceOutcome], np.ndarray]:
    jobs = jobs or serial()
    p = params.rq3
    agent = world.zoo.names.index(p.impaired)
    seq = draw_sequences(np.arange(world.pool.size), p.seeds, p.n_tasks, rng, "rq3")
    o_job = jobs.submit(run_sequences, world.zoo, world.pool, seq, world.sim, setup_for(params, "thompson"),
                        np.random.default_rng([params.seed, 13]), impaired=(agent, p.impair_after))
    control_job = jobs.submit(run_sequences, world.zoo, world.pool, seq, world.sim, setup_for(params, "thompson"),
                              np.random.default_rng([params.seed, 13]), log_steps=False)
    o, control = o_job.result(), control_job.result()
    res = params.bootstrap_resamples
    normal, impaired = slice(0, p.impair_after), slice(p.impair_after, None)
    metrics: dict[str, Any] = {"impaired": p.impaired, "n_seeds": p.seeds, "n_tasks": p.n_tasks, "impair_after": p.impair_after}
    belief = o.belief_start[:, :, agent]
    uses = (np.isfinite(o.first_pick[:, :, agent])).astype(float)
    for phase, sl in (("normal", normal), ("impaired", impaired)):
        for key, arr, reducer in (("belief", belief, "mean"), ("contributions", o.contributions[:, :, agent], "sum"),
                                  ("uses", uses, "sum"), ("quality", o.quality, "mean"), ("success", 100.0 * o.success, "mean")):
            vals = arr[:, sl].sum(axis=1) if reducer == "sum" else per_seed(arr[:, sl])
            m = stats.mean_ci(vals, res, rng)
            metrics[f"{key}_{phase}"], metrics[f"{key}_{phase}_ci"] = _r(m["value"], 4), _ci(m)
    decline = stats.ratio_ci(per_seed(belief[:, impaired]), per_seed(belief[:, normal]), res, rng)
    metrics["belief_decline_pct"] = _r(100 * (decline["value"] - 1), 2)
    metrics["belief_decline_pct_ci"] = [_r(100 * (decline["low"] - 1), 2), _r(100 * (decline["high"] - 1), 2)]
    metrics["control_belief_late"] = _r(per_seed(control.belief_start[:, impaired, agent]).mean())
    metrics["control_quality_late"] = _r(per_seed(control.quality[:, impaired]).mean())
    metrics["paper"] = dict(PAPER_RQ3)
    return metrics, {"redref": o, "control": control}, seq


# --------------------------------------------------------------------------------------------
# Theorem 3.1


def start_judge_noise(params: RedrefParams, jobs: Jobs | None = None) -> Future:
    """The judge-noise sweep (its own generator), submitted to `jobs`."""
    p = params.judge_noise
    return (jobs or serial()).submit(judge_noise_sweep, p.arms, p.deltas, p.horizon, p.seeds,
                                     np.random.default_rng([params.seed, 14]))


def run_judge_noise(params: RedrefParams, rng: np.random.Generator,
                    started: Future | None = None) -> tuple[dict[str, Any], SweepResult]:
    p = params.judge_noise
    sweep = (started or start_judge_noise(params)).result()
    res = params.bootstrap_resamples
    mean = sweep.regret.mean(axis=1)
    bound = sweep.bound()
    i1 = int(np.argmax(sweep.deltas))
    metrics: dict[str, Any] = {"arms": len(p.arms), "horizon": p.horizon, "n_seeds": p.seeds, "by_delta": {}}
    for k, d in enumerate(sweep.deltas):
        m = stats.mean_ci(sweep.regret[k], res, rng)
        metrics["by_delta"][f"{d:.2f}"] = {
            "regret": _r(m["value"], 2), "regret_ci": _ci(m, 2), "bound": _r(bound[k], 1),
            "regret_times_delta": _r(m["value"] * d, 2),
            "scaled_from_best_judge": _r(mean[i1] * sweep.deltas[i1] / d, 2),
        }
    lo, hi = stats.unit_bootstrap(  # seeds resampled; each resample's slope of its mean regret per delta
        lambda r: np.array([loglog_slope(sweep.deltas, m) for m in r.mean(axis=1)]), [sweep.regret.T], min(res, 500), rng)
    metrics["loglog_slope"] = _r(loglog_slope(sweep.deltas, mean), 3)
    metrics["loglog_slope_ci"] = [_r(lo, 3), _r(hi, 3)]
    metrics["all_below_bound"] = bool((mean <= bound).all())
    # Our reading of Theorem 3.1's 1/delta factor as a log-log slope of 1 -- not a figure the paper
    # reports, so it is not under `paper`. (R = R~/delta holds by construction and is no evidence.)
    metrics["theorem_slope_reading"] = 1.0
    return metrics, sweep


# --------------------------------------------------------------------------------------------
# judge calibration


def protocol_agents(world: World, seed: int, impaired: frozenset[str] = frozenset()) -> dict[str, Solver]:
    backend = SplitKnowledgeBackend(world.zoo, seed, impaired)
    usd = world.zoo.params.usd_per_mtok
    params = SolverParams.model_validate({
        "backend": "simulated", "model": "redref-sim-agents", "price": {"input_usd_per_mtok": usd, "output_usd_per_mtok": usd},
        "role_prompts": ROLE_PROMPTS, "simulated": {},
    })
    return {name: Solver(name, params, backend) for name in world.zoo.names}


def protocol_judge(world: World, params: RedrefParams, seed: int, impaired: frozenset[str] = frozenset()) -> Solver:
    noise = params.judge.noise
    backend = SimulatedJudgeBackend(world.zoo, seed, noise.false_positive_rate, noise.false_negative_rate,
                                    params.tasks.success_score, params.controller.improve_margin, impaired)
    judge_params = SolverParams(backend="simulated", model="redref-sim-judge", price=Price(input_usd_per_mtok=0.0, output_usd_per_mtok=0.0),
                                role_prompts=ROLE_PROMPTS, simulated=SimulatedParams())
    return Solver("redref-judge", judge_params, backend)


def expertise(zoo: Zoo) -> dict[str, str]:
    return {n: ", ".join([n.replace("_", " ")] + [r.replace("_", " ") for r in RELATED[n] if r in zoo.names]) for n in zoo.names}


def calibrate_split_judge(world: World, params: RedrefParams) -> dict[str, Any]:
    """Estimate the judge's FP / FN on `calibration_size` labeled examples produced through the protocol:
    a draft written by 0-12 random agents, one more agent's contribution, and the ground-truth labels."""
    rng = np.random.default_rng([params.seed, 15])
    seed = params.seed + 7919
    agents = protocol_agents(world, seed)
    judge = protocol_judge(world, params, seed)
    names = world.zoo.names
    truth_i, verdict_i, truth_s, verdict_s = [], [], [], []
    for n in range(params.judge.calibration_size):
        item = world.pool.item(int(rng.integers(world.pool.size)), world.zoo)
        draft = ""
        for k in range(int(rng.integers(0, 13))):
            a = agents[names[int(rng.integers(len(names)))]]
            ans = a.solve_requests([a.request(item, "redref_agent", {"agent": a.name, "expertise": a.name, "draft": draft or "(empty)",
                                                                       "critique": "(none yet)", "attempt": str(1000 * n + k)})])[0]
            draft = merge_sections(draft, ans.answer_text or "")
        a = agents[names[int(rng.integers(len(names)))]]
        ans = a.solve_requests([a.request(item, "redref_agent", {"agent": a.name, "expertise": a.name, "draft": draft or "(empty)",
                                                                   "critique": "(none yet)", "attempt": str(1000 * n + 999)})])[0]
        candidate = merge_sections(draft, ans.answer_text or "")
        improved, success, _ = judge.backend.truth(item, draft, candidate)  # type: ignore[attr-defined]
        context = {"parts": "", "previous": draft or "(empty)", "candidate": candidate, "threshold": "85"}
        reply = judge.solve_requests([judge.request(item, JUDGE_ROLE, context)])[0]
        v = json.loads(reply.parsed_answer or '{"improved": false, "success": false}')
        truth_i.append(improved)
        verdict_i.append(v["improved"])
        truth_s.append(success)
        verdict_s.append(v["success"])
    both = calibrate(np.array(truth_i + truth_s), np.array(verdict_i + verdict_s), "redref.judge")
    return {"examples": params.judge.calibration_size, **both.as_dict(), "paper": dict(PAPER_JUDGE),
            "configured": {"false_positive_rate": params.judge.noise.false_positive_rate,
                           "false_negative_rate": params.judge.noise.false_negative_rate}}


# --------------------------------------------------------------------------------------------
# the protocol controller beside the engine


def run_protocol(world: World, params: RedrefParams) -> tuple[dict[str, Any], list[dict[str, Any]], list[BeliefState]]:
    """Algorithm 1 one task at a time through Solver / Request / Generation, on the simulated agents
    and judge, beside the vectorised engine on the same task sequences. Returns the metrics, the
    steps and each seed's final beliefs (to persist as JSON)."""
    p = params.protocol
    if p.tasks == 0:
        return {"tasks": 0}, [], []
    rng = np.random.default_rng([params.seed, 16])
    seq = draw_sequences(np.arange(world.pool.size), p.seeds, p.tasks, rng, "protocol")
    rows: list[dict[str, Any]] = []
    success, calls, tokens = np.zeros(seq.shape), np.zeros(seq.shape), np.zeros(seq.shape)
    states = []
    for s in range(p.seeds):
        seed = params.seed + 104729 * (s + 1)
        controller = Redref(protocol_agents(world, seed), protocol_judge(world, params, seed), params.controller,
                            BeliefState.fresh(world.zoo.names, params.controller.alpha0, params.controller.beta0),
                            world.embedder, np.random.default_rng([params.seed, 17, s]),
                            success_score=params.tasks.success_score, expertise=expertise(world.zoo))
        for t, task in enumerate(seq[s]):
            item = world.pool.item(int(task), world.zoo)
            result = controller.run(item)
            score = draft_score(world.zoo, seed, item, result.answer.split("\n\nKey facts")[0], frozenset())
            success[s, t], calls[s, t] = score >= params.tasks.success_score, result.calls
            tokens[s, t] = result.spent
            for step in result.steps:
                rows.append({"seed": s, "task": t, "item_id": item.item_id, **step.__dict__})
        states.append(controller.state)
    engine = run_sequences(world.zoo, world.pool, seq, world.sim, setup_for(params, "thompson"),
                           np.random.default_rng([params.seed, 18]), log_steps=False)
    metrics = {
        "tasks": p.tasks, "seeds": p.seeds,
        "success": _r(100 * success.mean(), 2), "calls": _r(calls.mean(), 3), "tokens": _r(tokens.mean(), 1),
        "engine": {"success": _r(100 * engine.success.mean(), 2), "calls": _r(engine.calls.mean(), 3),
                   "tokens": _r(engine.tokens.mean(), 1)},
    }
    return metrics, rows, states


# --------------------------------------------------------------------------------------------
# cached answers


@dataclass
class CachedInputs:
    arms: CachedArms
    item_ids: list[str]
    splits: np.ndarray  # [I]: "train" (warm start) or "test"
    questions: list[str]
    n_test: int
    n_warm: int
    mean_cost: dict[str, float]  # test split, per solver


def cached_inputs(labeled: pl.DataFrame, items: pl.DataFrame, params: RedrefParams, all_solvers: list[str]) -> CachedInputs:
    """Check and pivot the labeled answers (test items + `warm_start` train items); errors name the key."""
    wanted = params.cached.solvers or all_solvers
    unknown = [s for s in wanted if s not in all_solvers]
    if unknown:
        raise InputError(f"redref.cached.solvers: unknown solver(s) {unknown}; params.yaml defines {all_solvers}")
    have = set(labeled["solver"].unique().to_list())
    missing = [s for s in wanted if s not in have]
    if missing:
        raise InputError(f"{Layout().labels} has no labels for solver(s) {missing}; run `dvc repro label`")
    if len(wanted) < 2:
        raise InputError(f"redref.cached.solvers: routing needs at least two solvers, got {wanted}")
    lab = labeled.filter(pl.col("solver").is_in(wanted))
    test_ids = lab.filter(pl.col("split") == "test")["item_id"].unique().sort().to_list()
    if not test_ids:
        raise InputError(f"{Layout().labels} has no test-split labels; run `dvc repro label`")
    train_ids = lab.filter(pl.col("split") == "train")["item_id"].unique().sort().to_list()
    warm = params.cached.warm_start
    if warm > len(train_ids):
        raise InputError(f"redref.cached.warm_start = {warm} but only {len(train_ids)} train items are labeled")
    rng = np.random.default_rng([params.seed, 19])
    warm_ids = [train_ids[i] for i in sorted(rng.choice(len(train_ids), size=warm, replace=False))] if warm else []
    ids = warm_ids + test_ids
    sub = lab.filter(pl.col("item_id").is_in(ids))
    counts = sub.group_by("item_id").agg(pl.col("solver").n_unique().alias("n"))
    short = counts.filter(pl.col("n") < len(wanted))
    if short.height or counts.height < len(ids):
        raise InputError(f"{Layout().labels}: {max(short.height, len(ids) - counts.height)} item(s) lack a label for some of {wanted}")
    order = pl.DataFrame({"item_id": ids, "pos": np.arange(len(ids))})

    def wide(col: str, dtype: Any) -> np.ndarray:
        w = sub.pivot(on="solver", index="item_id", values=col).join(order, on="item_id").sort("pos")
        return w.select(wanted).to_numpy().astype(dtype)

    correct = wide("correct", bool)
    cost = wide("cost_usd", float)
    answers = sub.with_columns(pl.col("parsed_answer").fill_null("<none>"))
    parsed = answers.pivot(on="solver", index="item_id", values="parsed_answer").join(order, on="item_id").sort("pos").select(wanted).to_numpy()
    same = parsed[:, :, None] == parsed[:, None, :]
    questions = items.join(order, on="item_id").sort("pos")["question"].to_list()
    test = np.array([False] * len(warm_ids) + [True] * len(test_ids))
    return CachedInputs(
        CachedArms(list(wanted), correct, cost, same), ids, np.where(test, "test", "train"), questions,
        len(test_ids), len(warm_ids), {s: float(cost[test, k].mean()) for k, s in enumerate(wanted)},
    )


CACHED_METHODS = {"redref": ("thompson", False), "redref-budget-aware": ("thompson", True), "random-delegation": ("random", False)}


def operating_points(params: RedrefParams, inputs: CachedInputs) -> list[tuple[str, float]]:
    top = max(inputs.mean_cost.values())
    points = [(f"B={b:g}x", b * top) for b in params.cached.budgets]
    if params.cached.unlimited:
        points.append(("B=inf", float("inf")))
    return points


def cached_sequences(params: RedrefParams, inputs: CachedInputs) -> np.ndarray:
    """[S * P, I] routing orders, seed-major then operating point: each seed its own permutation of the
    warm-start items followed by its own permutation of the test items (shared by every point)."""
    rng = np.random.default_rng([params.seed, 20])
    warm = np.arange(inputs.n_warm)
    test = np.arange(inputs.n_warm, inputs.n_warm + inputs.n_test)
    seq_seed = np.stack([np.concatenate([rng.permutation(warm), rng.permutation(test)]) for _ in range(params.cached.seeds)])
    return np.repeat(seq_seed, len(operating_points(params, inputs)), axis=0)


def row_seeds(params: RedrefParams, inputs: CachedInputs) -> np.ndarray:
    """Seed of every routing batch row (seed-major, then operating point): the summary rows' `seed`."""
    return np.repeat(np.arange(params.cached.seeds), len(operating_points(params, inputs)))


def run_cached(inputs: CachedInputs, sim_items: np.ndarray, params: RedrefParams, verifier: Verifier) -> dict[str, CachedOutcome]:
    """Every method over seeds x operating points in one batch each; `verifier` judges every answer
    (the same verdict on solver x item x seed for every method and budget)."""
    return {m: f.result() for m, f in start_cached(inputs, sim_items, params, verifier).items()}


def start_cached(inputs: CachedInputs, sim_items: np.ndarray, params: RedrefParams, verifier: Verifier,
                 jobs: Jobs | None = None) -> dict[str, Future]:
    """`run_cached`'s routing runs (each with its own generator), submitted to `jobs`."""
    jobs = jobs or serial()
    cp = params.cached
    seq = cached_sequences(params, inputs)
    budgets = np.tile(np.array([b for _, b in operating_points(params, inputs)]), cp.seeds)
    verdicts = verdict_rows(verifier, inputs.arms, inputs.item_ids, row_seeds(params, inputs))
    methods = {m: v for m, v in CACHED_METHODS.items() if cp.budget_aware or m != "redref-budget-aware"}
    return {
        m: jobs.submit(route_cached, inputs.arms, seq, sim_items, budgets, params.controller, cp.max_depth, cp.cooldown,
                       verdicts, np.random.default_rng([params.seed, 21, k]), selection, aware)  # type: ignore[arg-type]
        for k, (m, (selection, aware)) in enumerate(methods.items())
    }


def cached_summary(outcomes: dict[str, CachedOutcome], inputs: CachedInputs, params: RedrefParams,
                   intervals: IntervalParams | None = None) -> tuple[list[dict[str, Any]], dict[str, Any], pl.DataFrame]:
    """Summary rows (test items only) per method x seed x operating point, the metrics block (accuracy
    and cost with item bootstrap intervals, items and seeds resampled, paired across methods) and the
    item-level outcome rows (study, verifier and dataset columns are filled in by the stage)."""
    iv = intervals or IntervalParams()
    points = operating_points(params, inputs)
    S, P = params.cached.seeds, len(points)
    scored = slice(inputs.n_warm, None)  # in routing order the warm-start items come first
    seq = cached_sequences(params, inputs)[:, scored]  # [S * P, n_test] item index at each routing position
    order = np.argsort(seq, axis=1)  # routing position of each test item, in item order
    item_ids = np.asarray(inputs.item_ids, dtype=object)[np.sort(seq[0])]
    boot = stats.ItemBootstrap(inputs.n_test, iv.resamples, iv.confidence, iv.seed)
    rows, metrics, parts = [], {}, []
    for method, o in outcomes.items():
        item_correct = np.take_along_axis(o.final_correct[:, scored], order, axis=1).astype(float)  # [S * P, n_test]
        item_cost = np.take_along_axis(o.cost[:, scored], order, axis=1)
        acc = item_correct.mean(axis=1).reshape(S, P)
        cost = item_cost.mean(axis=1).reshape(S, P)
        calls = o.calls[:, scored].mean(axis=1).reshape(S, P)
        judged = o.judged_success[:, scored].mean(axis=1).reshape(S, P)
        block = {}
        for j, (op, budget) in enumerate(points):
            for s in range(S):
                rows.append({"method": method, "seed": s, "operating_point": op, "accuracy": float(acc[s, j]),
                             "cost_per_item_usd": float(cost[s, j]), "calls_per_item": float(calls[s, j]), "n_items": inputs.n_test})
                b = s * P + j
                parts.append(pl.DataFrame({"method": method, "operating_point": op, "seed": s, "split": "test",
                                           "item_id": item_ids.astype(str), "correct": item_correct[b], "cost_usd": item_cost[b]}))
            at = np.arange(S) * P + j
            lo, hi = boot.interval(item_correct[at])
            c_lo, c_hi = boot.interval(item_cost[at])
            block[op] = {"budget_usd": None if np.isinf(budget) else _r(budget, 8), "accuracy": _r(acc[:, j].mean()),
                         "accuracy_ci": [_r(lo), _r(hi)], "cost_per_item_usd": _r(cost[:, j].mean(), 8),
                         "cost_per_item_usd_ci": [_r(c_lo, 8), _r(c_hi, 8)],
                         "calls_per_item": _r(calls[:, j].mean()), "judged_success_pct": _r(100 * judged[:, j].mean(), 2)}
        metrics[method] = block
    outcome_frame = pl.concat(parts) if parts else pl.DataFrame(schema={k: OUTCOME_SCHEMA[k] for k in
                                                                        ("method", "operating_point", "seed", "split", "item_id", "correct", "cost_usd")})
    return rows, metrics, outcome_frame


def calibrate_cached_judge(labeled: pl.DataFrame, labels: pl.DataFrame | None, params: RedrefParams, verifier: Verifier) -> dict[str, Any]:
    """The routing judge (the shared verifier, seed 0) calibrated on N labeled ability-split answers,
    and — when the labels table carries the offline judge's verdicts — that judge's measured rates."""
    rng = np.random.default_rng([params.seed, 23])
    pool = labeled.filter(pl.col("split") == "ability")
    if pool.is_empty():
        pool = labeled.filter(pl.col("split") == "train")
    n = min(params.judge.calibration_size, pool.height)
    sample = pool[rng.choice(pool.height, size=n, replace=False)]
    truth = sample["correct"].to_numpy()
    verdict = verifier.accepts(sample["solver"].to_numpy(), sample["item_id"].to_numpy(), truth, 0)
    out: dict[str, Any] = {"routing_judge": calibrate(truth, verdict, "evaluation.verifier").as_dict() | {"verifier": verifier.name}}
    if labels is not None and "judge_verdict" in labels.columns:
        judged = labels.filter(pl.col("judge_verdict").is_not_null())
        if judged.height:
            try:
                out["offline_judge"] = calibrate(judged["correct"].to_numpy(), judged["judge_verdict"].to_numpy(), "label.judge").as_dict()
            except InputError as e:
                out["offline_judge"] = {"error": str(e)}
    return out
