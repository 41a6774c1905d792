"""The credit study end to end, minus file output: build the question pools and the held-out
draws, train every method (every seed batched), evaluate each on the same held-out draws.

Every method of one seed starts from the same network and sees the same questions and tool-outcome
draws in training (the environment stream is the seed's own; action sampling and the p-selection
have their own streams), so the methods differ only by their rewards and advantages.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import as_completed
from dataclasses import dataclass

import numpy as np

from delegation_lab.credit.env import TaskPool, make_pool
from delegation_lab.credit.evaluate import (
    EvalResult,
    EvalSet,
    accuracy_now,
    evaluate,
    make_eval_set,
    split_by_method,
)
from delegation_lab.credit.grpo import (
    MethodSpec,
    TrainResult,
    method_spec,
    train_methods,
)
from delegation_lab.credit.params import CreditParams
from delegation_lab.evaluation.statistics import mean_and_std
from delegation_lab.pipeline.parallel import spawn_pool
from delegation_lab.pipeline.phases import stopwatch
from delegation_lab.pipeline.torch_runtime import resolve_device, torch_threads

POOL_STREAM = 0


@dataclass
class MethodOutcome:
    spec: MethodSpec
    train: TrainResult
    eval: EvalResult
    seconds: float


@dataclass
class StudyOutcome:
    params: CreditParams
    seeds: list[int]
    train_pool: TaskPool
    eval_set: EvalSet
    methods: list[MethodOutcome]
    device: str

    def get(self, name: str) -> MethodOutcome | None:
        return next((m for m in self.methods if m.spec.name == name), None)


def make_pools(params: CreditParams) -> tuple[TaskPool, TaskPool]:
    rng = np.random.default_rng([params.data_seed, POOL_STREAM])
    return make_pool(params.env, params.train_tasks, rng), make_pool(params.env, params.test_tasks, rng)


def training_jobs(specs: list[MethodSpec], workers: int) -> list[list[list[MethodSpec]]]:
    """The groups of methods that train together in one ensemble, per job (a job's groups train one
    after the other). One job: the single agent, then every team method in one ensemble (their
    rollouts have one shape). `workers` > 1: the team methods dealt round-robin into `workers`
    ensembles, one job each, the single agent's (smaller) group after the last one."""
    single, team = [s for s in specs if not s.team], [s for s in specs if s.team]
    if workers <= 1 or len(team) < 2:
        return [[g for g in (single, team) if g]]
    jobs: list[list[list[MethodSpec]]] = [[team[i::workers]] for i in range(min(workers, len(team)))]
    if single:
        jobs[-1].append(single)
    return jobs


def train_group(group: list[MethodSpec], params: CreditParams, train_pool: TaskPool, ev: EvalSet, seeds: list[int],
                device, progress: bool = False) -> list[MethodOutcome]:
    """Train one ensemble of methods (every seed) and evaluate each on the held-out draws. Each
    member's numbers depend on its own method and seed only (the seeds' streams are shared by every
    method, common random numbers), so which methods share an ensemble changes no figure."""
    label = ", ".join(s.name for s in group)
    with stopwatch() as lap:
        update, close = _bar(progress, params.iterations, label if len(group) == 1 else f"{len(group)} team methods")
        results = train_methods(group, params, train_pool, seeds, device, lambda tr: accuracy_now(tr, ev, params.curve_tasks), update)
        close()
        evaluations = split_by_method(evaluate(results[0].trainer, ev, params), len(group), len(seeds), ev.n)
    seconds = lap.seconds / len(group)
    return [MethodOutcome(result.spec, result, evaluation, seconds) for result, evaluation in zip(results, evaluations, strict=True)]


def train_job(groups: list[list[MethodSpec]], params: CreditParams, train_pool: TaskPool, ev: EvalSet, seeds: list[int],
              device: str) -> list[MethodOutcome]:
    """A pool worker's job: its groups one after the other, returned without the trainers (their
    networks stay in the worker; nothing after the evaluation reads them)."""
    with torch_threads(params.torch_threads):
        outcomes = [m for group in groups for m in train_group(group, params, train_pool, ev, seeds, resolve_device(device, "credit.device"))]
    for m in outcomes:
        m.train.trainer = None
    return outcomes


def run_study(params: CreditParams, progress: bool = False, log: Callable[[str], None] = print,
              on_method: Callable[[MethodOutcome], None] | None = None) -> StudyOutcome:
    """Every method of `params` (`workers` > 1: the jobs of `training_jobs` in a pool of spawned
    processes; `log` and `on_method` run in this process as each method's result arrives)."""
    device = resolve_device(params.device, "credit.device")
    seeds = list(range(params.first_seed, params.first_seed + params.seeds))
    train_pool, test_pool = make_pools(params)
    ev = make_eval_set(params, test_pool)
    outcomes: list[MethodOutcome] = []
    names = params.method_names()
    specs = [method_spec(name, params) for name in names]
    jobs = training_jobs(specs, params.workers)

    def arrived(outcome: MethodOutcome) -> None:
        outcomes.append(outcome)
        acc = outcome.eval.per_seed["accuracy"]
        log(f"credit: {outcome.spec.name}: held-out accuracy {100 * acc.mean():.2f} ± "
            f"{100 * mean_and_std(acc)[1]:.2f} % (std over seeds), "
            f"{outcome.eval.per_seed['tokens_per_task'].mean():.0f} tokens / question")
        if on_method is not None:
            on_method(outcome)

    if len(jobs) == 1:
        with torch_threads(params.torch_threads):
            for group in jobs[0]:
                for outcome in train_group(group, params, train_pool, ev, seeds, device, progress):
                    arrived(outcome)
    else:
        with spawn_pool(len(jobs)) as pool:
            futures = [pool.submit(train_job, job, params, train_pool, ev, seeds, str(device)) for job in jobs]
            for future in as_completed(futures):
                for outcome in future.result():
                    arrived(outcome)
    order = {name: i for i, name in enumerate(names)}
    outcomes.sort(key=lambda m: order[m.spec.name])
    return StudyOutcome(params, seeds, train_pool, ev, outcomes, str(device))


def _bar(enabled: bool, total: int, desc: str):
    if not enabled:
        return None, lambda: None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="it", leave=False)
    state = {"n": 0}

    def update(n: int) -> None:
        bar.update(n - state["n"])
        state["n"] = n

    return update, bar.close
