"""Tables 1-3 again, end to end (collection, distillation, training, evaluation), over more
simulator seeds and under the sensitivity settings, so the headline figures carry intervals over
independent simulated teams and the reader sees which simulator setting moves them.

Simulator seeds: the same items and params, `margent.simulator.seed` + 1 ... + n; with the stage's
own run (seed + 0) they give a Student-t interval per figure (evaluation.statistics.seed_interval).
Sensitivity: each setting of `sensitivity.variants` at the stage's own seed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from delegation_lab.params.root import Params
from delegation_lab.evaluation.statistics import seed_interval
from delegation_lab.margent import study
from delegation_lab.margent.params import MargentParams, SimulatorParams, rho_label
from delegation_lab.margent.simulator import SimulatedTeam
from delegation_lab.pipeline.parallel import spawn_pool

TABLE3 = ("candidate_accuracy", "accuracy", "gain_pp", "calls")


def figures(metrics: dict, pool: tuple[str, ...]) -> dict[str, dict[str, float | str]]:
    """The headline figures of one run: Table 1 (A0, A1, AD, Gain@1), Table 2 (net value per
    sub-agent), Table 3 (the selected ρ's candidate -> final accuracy, gain, calls)."""
    t1, ev = metrics["table1"], metrics["eval"]
    return {
        "table1": {k: t1[k] for k in ("A0", "A1", "AD", "gain_at_1")},
        "table2": {a: metrics["table2"][a] for a in pool},
        "table3": {"rho": ev["rho"], **{k: ev[k] for k in TABLE3}},
    }


def run_once(params: Params, margent: MargentParams, pools: study.Pools) -> dict[str, dict[str, float | str]]:
    """One end-to-end run of the simulated study on `pools`; its headline figures."""
    team = SimulatedTeam(margent.simulator, study.role_prices(margent, params))
    got = study.collect_all(team, pools, margent, params.data.dataset)
    with tempfile.TemporaryDirectory() as sft_dir:  # the SFT files of a replicate are not kept
        trained = study.train_managers(got.collection, got.views, margent, Path(sft_dir))
    grid = [(rho_label(r), s) for r, s in trained.grid]
    ev = study.evaluate_all(got.collection, got.trees, trained.result.policy, grid, margent, params.evaluation.intervals)
    return figures(ev.metrics, tuple(margent.subagents))


def run_all(params: Params, variants: list[MargentParams], pools: study.Pools) -> list[dict]:
    """`run_once` for every variant, in `margent.eval.replicate_workers` spawned processes (each replicate
    is seeded by its own params, so the pool changes only the wall time, not a figure)."""
    workers = min(params.margent.eval.replicate_workers, len(variants))
    if workers <= 1:
        return [run_once(params, v, pools) for v in variants]
    with spawn_pool(workers) as pool:
        return list(pool.map(run_once, [params] * len(variants), variants, [pools] * len(variants)))


def over_seeds(params: Params, pools: study.Pools, own: dict[str, dict], n_seeds: int) -> dict:
    """Per figure: each simulator seed's value (the stage's own first) and the interval over them."""
    margent = params.margent
    sim = margent.simulator
    others = [margent.model_copy(update={"simulator": sim.model_copy(update={"seed": sim.seed + k})})
              for k in range(1, n_seeds + 1)]
    runs = {sim.seed: own} | {v.simulator.seed: r for v, r in zip(others, run_all(params, others, pools), strict=True)}
    out: dict = {"seeds": list(runs)}
    for table, values in own.items():
        out[table] = {}
        for key, value in values.items():
            per_seed = [r[table][key] for r in runs.values()]
            if isinstance(value, str):  # the selected ρ of each seed
                out[table][key] = per_seed
            else:
                finite = [v for v in per_seed if v is not None and np.isfinite(v)]
                out[table][key] = {**seed_interval(finite), "per_seed": per_seed}
    return out


def under_settings(params: Params, pools: study.Pools, own: dict[str, dict],
                   settings: dict[str, SimulatorParams]) -> dict[str, dict]:
    """Per sensitivity setting (the first is the stage's own defaults): the headline figures."""
    margent = params.margent
    rerun = {name: margent.model_copy(update={"simulator": sim}) for name, sim in settings.items() if sim != margent.simulator}
    got = dict(zip(rerun, run_all(params, list(rerun.values()), pools), strict=True))
    return {name: got.get(name, own) for name in settings}
