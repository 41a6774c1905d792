"""How much memory and work the studies' params ask for, estimated from params alone and checked
when params load (`dlab params check`, every stage), before any array is allocated.

`history_game` sizes its own IQL arrays (`games.limits.estimate_iql_memory`, bound by
`history_game.iql.max_memory`); this module does the same for every other study whose params size
work, against one shared bound: `limits.max_memory` (bytes held at the peak) and `limits.max_work`
(elementary work units: one environment step of one lane, one rollout sample in one gradient epoch,
one item in one bootstrap resample, ...). A bound, not a prediction: each estimate counts the arrays
and rows the study keeps at its largest (every item using all its attempts, every study's rows held
together) and prices each kind of row by a measured or counted size:

  STEP_RECORD_BYTES  one lane-step of coordinator's `StepRecord` (14 columns, 44 B) and of the
                     lane-major copy its first `lane()` call makes (measured with
                     tracemalloc in tests/test_work_size.py: 93 B)                      96 B
  ROW_BYTES          one trajectory / result row once written as a polars frame (measured for
                     history_game's rows, `games.limits.TRAJECTORY_ROW_BYTES`)        800 B
  BOOTSTRAP_BYTES    one (resample, item) cell of `evaluation.statistics.ItemBootstrap` while it
                     is drawn: the int64 index, the int64 resample numbers `np.add.at`
                     reads and the float64 weight they are counted into (tested
                     against a measured peak in tests/test_work_size.py)              24 B

plus RUNTIME_BYTES for the interpreter, torch, numpy and polars at first use. docs/scaling.md
lists what each study's estimate counts. Studies switched off (`enabled: false`) are not sized.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from delegation_lab.games.limits import TRAJECTORY_ROW_BYTES, fmt_bytes, parse_size
from delegation_lab.routers import ROUTERS

if TYPE_CHECKING:  # config imports this module
    from delegation_lab.params.root import Params

STEP_RECORD_BYTES = 96
ROW_BYTES = TRAJECTORY_ROW_BYTES
BOOTSTRAP_BYTES = 24
RUNTIME_BYTES = 300 * 1024**2


@dataclass
class Estimate:
    """One study's estimate: the params that size it (dotted key -> value), bytes by part, work units."""

    study: str
    sizes: dict[str, Any]
    parts: dict[str, float] = field(default_factory=dict)
    work: float = 0.0
    unit: str = "units"

    @property
    def memory(self) -> float:
        return RUNTIME_BYTES + sum(float(v) for v in self.parts.values())

    def sizes_text(self) -> str:
        return " x ".join(f"{k} {_num(v)}" for k, v in self.sizes.items())

    def parts_text(self) -> str:
        return ", ".join(f"{k} {fmt_bytes(v) if v < math.inf else 'beyond any machine'}" for k, v in self.parts.items() if v)


def _num(v: Any) -> str:
    """A count as written, or in e-notation from 10^7 on (an integer past float's range: its digits)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 10**7:
        return f"{v:.1e}" if v < 1e300 else f"a {len(str(int(v)))}-digit number"
    return str(v)


def _estimate(name: str, params: Params) -> Estimate:
    """STUDIES[name](params); a size past float's range (YAML integers are unbounded) is infinite."""
    try:
        est = STUDIES[name](params)
        est.memory, float(est.work)  # noqa: B018 - an OverflowError here, not while formatting
        return est
    except OverflowError:
        section = getattr(params, name)
        return Estimate(name, _sizes_of(section, name), {"arrays": math.inf}, math.inf)


def _sizes_of(section: Any, prefix: str) -> dict[str, Any]:
    """Every integer key of a section, dotted (for the message when the estimate overflows)."""
    out: dict[str, Any] = {}
    for key in type(section).model_fields:
        value = getattr(section, key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 10**7:
            out[f"{prefix}.{key}"] = value
        elif hasattr(type(value), "model_fields"):
            out |= _sizes_of(value, f"{prefix}.{key}")
    return out


def _items(params: Params) -> int:
    """Items of the largest split (a null size, `the whole file`, counts as 0: the file bounds it)."""
    d = params.data
    return max(d.ability_size or 0, d.train_size or 0, d.test_size or 0)


def _scored_items(params: Params) -> int:
    """Items intervals are drawn on: the test split, or `frontier.split` where that is larger."""
    d = params.data
    return max(d.test_size or 0, getattr(d, f"{params.frontier.split}_size") or 0)


def coordinator(params: Params) -> Estimate:
    """Lanes (seeds x methods per environment, the sweep's seeds x weights) each step through
    episodes x packet_size x max_attempts steps at most; recorded lanes keep every step
    (`StepRecord`) and, with `trajectories`, a row per step; DQN lanes hold a float32 replay buffer
    of min(buffer_size, steps) transitions of 2 x obs_dim + 3 values. Trajectory rows are built and
    written one lane at a time (`results.trajectory_parts`), so one lane's rows count."""
    p = params.coordinator
    n = len(p.agents) if p.agents else len(params.solvers)
    steps = p.episodes * p.packet_size * p.max_attempts
    methods = [m for m in p.methods if m != "fixed_order"]
    recorded = p.seeds * len(methods) * len(p.studies) + p.sweep.seeds * len(p.sweep.cost_weights) * len(p.sweep.studies)
    fixed = p.seeds * p.max_fixed_orders * len(p.studies) if "fixed_order" in p.methods else 0
    dqn = p.seeds * sum(m.startswith("dqn") for m in p.methods) * len(p.studies) + p.sweep.seeds * len(p.sweep.cost_weights) * len(p.sweep.studies)
    obs = 3 * n + p.max_attempts + 1
    parts = {
        "step records": recorded * steps * STEP_RECORD_BYTES,
        "trajectories": steps * ROW_BYTES if p.trajectories else 0,  # written one lane at a time
        "replay buffers": dqn * min(p.dqn.buffer_size, steps) * (2 * obs + 3) * 4,
        "episode stats": (recorded + fixed) * p.episodes * (6 + n) * 8,
    }
    sizes = {"coordinator.seeds": p.seeds, "coordinator.episodes": p.episodes, "coordinator.packet_size": p.packet_size,
             "coordinator.max_attempts": p.max_attempts}
    return Estimate("coordinator", sizes, parts, (recorded + fixed) * steps, "lane steps")


def market(params: Params) -> Estimate:
    """Chain worlds (seeds x (densities x protocols + spreads + other readings)) play rounds x
    tasks_per_round tasks of up to max_steps steps per bidder; every train_every-th round and the
    final rounds are kept as rows. The answers market's worlds (seeds x protocols x reward multiples)
    play every train item each epoch, then the test items, all kept as rows."""
    p, c = params.market, params.market.chain
    bidders, protocols = len(p.bidders), len(p.protocols)
    worlds = p.seeds * (len(c.densities) * protocols + len(c.spread_sweep.spreads) + len(c.other_reading.densities))
    kept_rounds = -(-c.rounds // p.trajectories.train_every) + c.final_rounds
    parts = {"chain rows": 0.0, "answers rows": 0.0}
    work = 0.0
    sizes: dict[str, Any] = {"market.seeds": p.seeds, "market.bidders": bidders}
    if c.enabled:
        parts["chain rows"] = bidders * worlds * kept_rounds * c.tasks_per_round * c.max_steps * ROW_BYTES
        parts["chain curves"] = bidders * worlds * c.rounds * 32 * 8
        work += bidders * worlds * c.rounds * c.tasks_per_round * c.max_steps
        sizes |= {"market.chain.rounds": c.rounds, "market.chain.tasks_per_round": c.tasks_per_round}
    a = p.answers
    if a.enabled:
        train, test = params.data.train_size or 0, params.data.test_size or 0
        answer_worlds = p.seeds * protocols * len(a.reward_multiples)
        places = a.verifier.max_solves + 1 if a.verifier.enabled else 1
        parts["answers rows"] = bidders * answer_worlds * (a.epochs * train / p.trajectories.train_every + test) * places * ROW_BYTES
        work += bidders * answer_worlds * (a.epochs * train + test) * places
        sizes |= {"market.answers.epochs": a.epochs, "market.answers.reward_multiples": len(a.reward_multiples)}
    return Estimate("market", sizes, parts, work, "agent steps")


def credit(params: Params) -> Estimate:
    """Per method, p and seed: iterations x tasks_per_batch x group_size rollouts, each trained for
    epochs_per_batch epochs (the long run: iterations x iterations_factor more for its methods);
    the trajectory rows of the traced seeds, the test outcomes of every seed (test_tasks x
    eval_replicates) and the learning curves (curve_tasks x eval_replicates per evaluation)."""
    p = params.credit
    runs = len(p.methods) * len(p.p_sweep)
    rollouts = p.iterations * p.tasks_per_batch * p.group_size
    long = len(p.long_run.methods) * len(p.p_sweep) * p.long_run.seeds * rollouts * p.long_run.iterations_factor
    traced = min(p.seeds, p.trajectories.seeds or p.seeds)
    train_rows = (p.iterations // p.trajectories.train_every if p.trajectories.train_every else 0) * p.trajectories.train_tasks * p.group_size
    test_rows = p.test_tasks * p.eval_replicates if p.trajectories.test else 0
    evaluations = p.iterations // p.eval_every + 1
    parts = {
        "trajectories": runs * traced * (train_rows + test_rows) * ROW_BYTES,
        "test outcomes": runs * p.seeds * p.test_tasks * p.eval_replicates * 64,
        "curves": runs * p.seeds * evaluations * p.curve_tasks * p.eval_replicates * 16,
        "batch": p.tasks_per_batch * p.group_size * p.hidden * 8 * 16,
        "tasks": (p.train_tasks + p.test_tasks) * 1024,
    }
    sizes = {"credit.seeds": p.seeds, "credit.iterations": p.iterations, "credit.tasks_per_batch": p.tasks_per_batch,
             "credit.group_size": p.group_size, "credit.methods": len(p.methods)}
    return Estimate("credit", sizes, parts, (runs * p.seeds * rollouts + long) * p.epochs_per_batch, "sample-epochs")


def redref(params: Params) -> Estimate:
    """Tasks x seeds of each experiment, up to controller.max_depth delegation steps each (RQ1 four
    times with ablations), the judge-noise sweep's deltas x horizon x seeds, the cached routing's
    operating points x seeds x test items; a row per step, and bootstrap_resamples x (tasks x seeds)
    resample cells."""
    p = params.redref
    variants = 4 if p.rq1.ablations else 1
    runs = {"rq1": variants * p.rq1.n_tasks * p.rq1.seeds, "rq2": p.rq2.n_tasks * p.rq2.seeds,
            "rq3": p.rq3.n_tasks * p.rq3.seeds, "protocol": p.protocol.tasks * p.protocol.seeds}
    steps = sum(runs.values()) * p.controller.max_depth + len(p.judge_noise.deltas) * p.judge_noise.horizon * p.judge_noise.seeds
    if p.cached.enabled:
        points = len(p.cached.budgets) + p.cached.unlimited
        steps += points * p.cached.seeds * (params.data.test_size or 0) * p.cached.max_depth
    parts = {"rows": steps * ROW_BYTES, "bootstrap": p.bootstrap_resamples * max(runs.values()) * BOOTSTRAP_BYTES}
    sizes = {"redref.rq1.seeds": p.rq1.seeds, "redref.rq1.n_tasks": p.rq1.n_tasks, "redref.judge_noise.horizon": p.judge_noise.horizon,
             "redref.judge_noise.seeds": p.judge_noise.seeds, "redref.controller.max_depth": p.controller.max_depth}
    return Estimate("redref", sizes, parts, steps + p.bootstrap_resamples * sum(runs.values()), "steps")


def margent(params: Params) -> Estimate:
    """Every item (collected, development, test) expanded over the whole tree of call sequences
    (sum over d <= depth of P!/(P-d)! nodes for P sub-agents), once per simulator replicate; the
    manager trained seeds x epochs over the collected nodes per rho; resamples x test items x nodes
    in the evaluation."""
    p = params.margent
    P = len(p.subagents)
    nodes = sum(math.perm(P, d) for d in range(p.collect.depth + 1))
    test = p.collect.test_items or params.data.test_size or 0
    items = p.collect.n_items + p.collect.dev_items + test
    replicates = 1 + p.eval.simulator_seeds
    parts = {"tree rows": replicates * items * nodes * ROW_BYTES,
             "bootstrap": p.eval.resamples * test * BOOTSTRAP_BYTES}
    work = replicates * (p.manager.seeds * p.manager.epochs * p.collect.n_items * nodes * len(p.distill.rho) + p.eval.resamples * test * nodes)
    sizes = {"margent.collect.n_items": p.collect.n_items, "margent.collect.depth": p.collect.depth,
             "margent.manager.seeds": p.manager.seeds, "margent.manager.epochs": p.manager.epochs,
             "margent.eval.resamples": p.eval.resamples, "margent.eval.simulator_seeds": p.eval.simulator_seeds}
    return Estimate("margent", sizes, parts, work, "item-node passes")


def routers(params: Params) -> Estimate:
    """Each seed fits every trained router (every registered one whose section has `epochs`) for its
    epochs over every item and solver, and the portfolio refits the kNN router on router_folds
    folds; each sweep point (of every registered router with a section) keeps an item x solver
    decision table."""
    p = params.routers
    items, n = _items(params), len(params.solvers)
    sections = [s for s in (getattr(p, name, None) for name in ROUTERS.names()) if s is not None]  # routers with knobs
    epochs = sum(getattr(s, "epochs", 0) for s in sections)
    points = sum(len(s.sweep) for s in sections)
    parts = {"decisions": p.seeds * points * items * n * 8 * 2, "features": items * 512 * 4}
    work = p.seeds * epochs * items * n + params.portfolio.router_folds * items * n
    sizes = {"routers.seeds": p.seeds, "routers.epochs (sum)": epochs, "portfolio.router_folds": params.portfolio.router_folds,
             "largest data.*_size": items}
    return Estimate("routers", sizes, parts, work, "item-epochs")


def frontier(params: Params) -> Estimate:
    """The shared bootstrap (resamples x items cells) and, per frontier point (mixtures of every
    pair of solvers at mixture_points, the cascade seeds' cascades, the CPT levels), a value per
    resample, once per verifier the baselines are computed under (the main one and each of
    evaluation.compare_verifiers); work = resamples x items x points."""
    f, r = params.frontier, params.evaluation.intervals.resamples
    items, n = _scored_items(params), len(params.solvers)
    sets = 1 + len(params.evaluation.compare_verifiers)
    points = (f.mixture_points * n * n + f.cascade.seeds * n * n + len(f.cpt_levels) + n) * sets
    parts = {"bootstrap": r * items * BOOTSTRAP_BYTES, "points": r * points * 8 * 4}
    sizes = {"evaluation.intervals.resamples": r, "scored items": items, "frontier.mixture_points": f.mixture_points,
             "frontier.cascade.seeds": f.cascade.seeds, "solvers": n, "verifier sets (1 + evaluation.compare_verifiers)": sets}
    return Estimate("frontier", sizes, parts, r * items * points, "resample-item-points")


def evaluation(params: Params) -> Estimate:
    """`evaluation.statistics.ItemBootstrap`: resamples x items int64 draws counted into float64 weights,
    for the test split (or frontier.split) every study's intervals are drawn on."""
    r, items = params.evaluation.intervals.resamples, _scored_items(params)
    return Estimate("evaluation", {"evaluation.intervals.resamples": r, "scored items": items},
                    {"bootstrap": r * items * BOOTSTRAP_BYTES}, r * items, "resample-items")


STUDIES = {"coordinator": coordinator, "market": market, "credit": credit, "redref": redref,
           "margent": margent, "routers": routers, "frontier": frontier, "evaluation": evaluation}


def estimates(params: Params) -> list[Estimate]:
    """The estimate of every enabled study (the frontier and the intervals always run)."""
    out = []
    for name in STUDIES:
        if getattr(getattr(params, name), "enabled", True):
            out.append(_estimate(name, params))
    return out


def problems(params: Params) -> list[str]:
    """One line per study past `limits.max_memory` or `limits.max_work`, naming its keys, the
    estimate and the bound."""
    max_memory, max_work = parse_size(params.limits.max_memory), params.limits.max_work
    lines = []
    for est in estimates(params):
        if est.memory > max_memory:
            need = f"an estimated {fmt_bytes(est.memory)} ({est.parts_text()})" if est.memory < math.inf else "more memory than any machine has"
            lines.append(f"{est.study}: {est.sizes_text()} need {need} "
                         f"> limits.max_memory {fmt_bytes(max_memory)}: lower those keys, or raise limits.max_memory")
        elif est.work > max_work:
            lines.append(f"{est.study}: {est.sizes_text()} ask for an estimated {est.work:.2e} {est.unit} "
                         f"> limits.max_work {max_work:.2e}: lower those keys, or raise limits.max_work")
    return lines + router_fold_problems(params)


def router_fold_problems(params: Params) -> list[str]:
    """`portfolio.router_folds` and `portfolio.cv_folds` past the items of `portfolio.select_split`: each
    fold refits on the other folds and the loop runs over every fold, held items or not, so a fold count
    off by orders of magnitude (1,000,000) ran on where every fold past the item count is empty work. A
    split of null size (the whole file) is bounded by its file instead (`dlab portfolio` refuses it there)."""
    p = params.portfolio
    items = getattr(params.data, f"{p.select_split}_size")
    if not getattr(p, "enabled", True) or not items:
        return []
    split = f"the {items} items of portfolio.select_split {p.select_split!r} (data.{p.select_split}_size): a fold holds at least one item"
    lines = []
    if p.router is not None and p.router_folds > items:
        lines.append(f"portfolio: portfolio.router_folds {_num(p.router_folds)} > {split}; lower portfolio.router_folds "
                     "(5 by default) or set portfolio.router: null")
    if p.cv_folds > items:
        lines.append(f"portfolio: portfolio.cv_folds {_num(p.cv_folds)} > {split}; lower portfolio.cv_folds (5 by default)")
    return lines
