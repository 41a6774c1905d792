"""The `routers` study: fit every router on the train split minus a dev split carved from it (by a
hash of item_id), calibrate its knob on dev, evaluate each operating point once on test.

Only `fit` and `calibrate` ever see labels or costs, and they see the train / dev rows only; the
test rows enter `evaluate` alone (the split-firewall test poisons them and checks every fitted
state is unchanged)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from delegation_lab.embeddings import read_embeddings
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation import Verifier, uniforms
from delegation_lab.evaluation.learned import project_answer_features
from delegation_lab.pipeline.layout import Layout
from delegation_lab.routers import ROUTERS, Inputs, Outcome, Router, build_router
from delegation_lab.routers.params import RoutersParams
from delegation_lab.pipeline.tables import read_labeled_answers

STUDY = "routers"
TEXT_COLUMNS = ("n_chars", "n_words", "n_digits", "difficulty")


@dataclass
class RoutingData:
    """Items x solvers: split (train / dev / test), features, gold correctness and dollar cost."""

    item_ids: np.ndarray  # str [n]
    split: np.ndarray  # str [n]
    inputs: Inputs
    correct: np.ndarray  # bool [n, S]
    cost: np.ndarray  # float [n, S]
    solvers: list[str]
    embedder: str

    def rows(self, split: str) -> np.ndarray:
        return np.flatnonzero(self.split == split)


def carve_dev(item_ids: np.ndarray, split: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """Train items whose hash falls under `fraction` become `dev` (stable under any change of labels)."""
    u = uniforms("routers-dev-split", np.asarray(item_ids, dtype=object), seed)
    return np.where((split == "train") & (u < fraction), "dev", split)


def load_routing_data(layout: Layout, solvers: list[str], params: RoutersParams, verifier_models: Sequence[str] = ()) -> RoutingData:
    """Train and test items with every solver's label and cost, joined to their embeddings; with the
    answer features of every (item, solver) when a listed router reads answers (`Router.reads_answers`:
    frugalgpt), compared with `routers.frugalgpt.models` (null: `verifier_models`, the evaluation verifier's)."""
    emb = read_embeddings(layout.root)
    labeled = read_labeled_answers(layout).filter(pl.col("split").is_in(["train", "test"]))
    missing = sorted(set(solvers) - set(labeled["solver"].unique().to_list()))
    if missing:
        raise InputError(f"{Layout().labels}: no labels for solver(s) {missing}; run `dvc repro label`")
    wide = {}
    for value in ("correct", "cost_usd"):
        wide[value] = labeled.pivot(on="solver", index=["item_id", "split"], values=value).select("item_id", "split", *solvers)
    table = wide["correct"].join(wide["cost_usd"], on=["item_id", "split"], suffix="__cost").join(emb, on="item_id", how="left")
    gaps = table.select(pl.exclude("embedder")).null_count().sum_horizontal().item()
    if gaps:
        n_emb = table["vector"].null_count()
        raise InputError(f"routers: {gaps} missing cells ({n_emb} items without an embedding in data/embeddings; "
                         "the rest are unlabelled (item, solver) pairs): rerun `dvc repro embed label`")
    table = table.sort("item_id")
    split = carve_dev(table["item_id"].to_numpy(), table["split"].to_numpy(), params.dev_fraction, params.seed)
    answers = None
    if any(ROUTERS.get(name).reads_answers for name in params.routers):
        models = params.frugalgpt.models if params.frugalgpt.models is not None else list(verifier_models)
        key = "routers.frugalgpt.models" if params.frugalgpt.models is not None else "evaluation.verifier.models (routers.frugalgpt.models null)"
        if set(models) - set(solvers):
            raise ConfigError("params.yaml", [f"{key}: {', '.join(sorted(set(models) - set(solvers)))} not among the routed "
                                              f"solvers: the frugalgpt cascade buys their answers"])
        answers = project_answer_features(layout.root, table["item_id"].to_list(), list(solvers), tuple(models))
    inputs = Inputs(np.asarray(table["vector"].to_list(), dtype=np.float32), table.select(TEXT_COLUMNS).to_numpy().astype(float),
                    answers)
    return RoutingData(table["item_id"].to_numpy().astype(str), split, inputs,
                       table.select(solvers).to_numpy().astype(bool), table.select([f"{s}__cost" for s in solvers]).to_numpy().astype(float),
                       list(solvers), str(table["embedder"][0]))


def fit_router(name: str, params: RoutersParams, data: RoutingData, seed: int) -> Router:
    """Fit on train (minus dev), calibrate on dev. Reads no test row."""
    fit, dev = data.rows("train"), data.rows("dev")
    if fit.size == 0 or dev.size == 0:
        raise InputError(f"routers: {fit.size} fitting and {dev.size} dev items; need both (routers.dev_fraction)")
    router = build_router(name, params, data.solvers)
    router.fit(data.inputs.take(fit), data.correct[fit], data.cost[fit], seed)
    router.calibrate(data.inputs.take(dev), data.correct[dev], data.cost[dev])
    return router


def router_seed(params: RoutersParams, s: int) -> int:
    return params.seed * 1009 + s


@dataclass
class PointResult:
    router: str
    operating_point: str
    knob: float
    seed: int
    split: str
    outcome: Outcome


@dataclass
class StudyRun:
    data: RoutingData
    points: list[PointResult] = field(default_factory=list)
    fitted: dict[str, Router] = field(default_factory=dict)  # seed 0 of each router: the saved artifact
    fit_seconds: dict[str, float] = field(default_factory=dict)  # mean over seeds
    route_items_per_second: dict[str, float] = field(default_factory=dict)


def run_study(data: RoutingData, params: RoutersParams, verifier: Verifier, progress: bool = False) -> StudyRun:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(params.torch_threads)
    try:
        return _run_routers(data, params, verifier, progress)
    finally:
        torch.set_num_threads(threads)  # the caller's setting, also when a router fails


def _run_routers(data: RoutingData, params: RoutersParams, verifier: Verifier, progress: bool) -> StudyRun:
    run = StudyRun(data)
    for name in params.routers:
        seconds, routed = [], []
        for s in range(params.seeds):
            start = time.perf_counter()
            router = fit_router(name, params, data, router_seed(params, s))
            seconds.append(time.perf_counter() - start)
            if s == 0:
                run.fitted[name] = router
            for split in ("dev", "test"):
                rows = data.rows(split)
                x, ids, correct, cost = data.inputs.take(rows), data.item_ids[rows], data.correct[rows], data.cost[rows]
                for label, knob in router.knobs.items():
                    start = time.perf_counter()
                    out = router.evaluate(x, ids, correct, cost, knob, verifier, s)
                    if split == "test":
                        routed.append(len(rows) / max(time.perf_counter() - start, 1e-9))
                    run.points.append(PointResult(name, label, knob, s, split, out))
        run.fit_seconds[name] = float(np.mean(seconds))
        run.route_items_per_second[name] = float(np.median(routed))
        if progress:
            print(f"routers: {name} fitted in {run.fit_seconds[name]:.2f} s per seed, routes {run.route_items_per_second[name]:,.0f} items/s")
    return run


# ---------------------------------------------------------------------------------------------
# tables


def summary_rows(run: StudyRun, dataset: str, verifier: str, run_ids: dict[tuple[str, int], str | None] | None = None) -> list[dict]:
    run_ids = run_ids or {}
    rows = []
    for p in run.points:
        if p.split != "test":
            continue
        rows.append({
            "study": STUDY, "method": p.router, "seed": p.seed, "split": "test", "operating_point": p.operating_point,
            "accuracy": float(p.outcome.correct.mean()), "cost_per_item_usd": float(p.outcome.cost.mean()),
            "calls_per_item": float(p.outcome.called.sum(axis=1).mean()), "return": None, "n_items": int(p.outcome.correct.size),
            "dataset": dataset, "solver_set": ",".join(run.data.solvers), "run_id": run_ids.get((p.router, p.seed)), "verifier": verifier,
        })
    return rows


def outcome_frame(run: StudyRun, dataset: str, verifier: str) -> pl.DataFrame:
    """Item-level test outcomes, with where the gap goes (frontier/gap.py): a right answer within reach
    when a solver its routing would call (`Outcome.reach`, else those it called) was right, the kept
    solver's cost as the answer's, and the dollars of answers bought only for a check (`Outcome.check_cost`, frugalgpt's)."""
    rows = run.data.rows("test")
    ids, correct, cost = run.data.item_ids[rows], run.data.correct[rows], run.data.cost[rows]
    parts = [pl.DataFrame({
        "study": STUDY, "method": p.router, "operating_point": p.operating_point, "seed": p.seed, "split": "test",
        "dataset": dataset, "verifier": verifier, "item_id": ids, "correct": p.outcome.correct.astype(float), "cost_usd": p.outcome.cost,
        "held_right": ((p.outcome.called if p.outcome.reach is None else p.outcome.reach) & correct).any(axis=1).astype(float),
        "answer_cost_usd": cost[np.arange(len(ids)), p.outcome.chosen],
        "check_cost_usd": 0.0 if p.outcome.check_cost is None else p.outcome.check_cost,
    }) for p in run.points if p.split == "test"]
    return pl.concat(parts) if parts else pl.DataFrame()


def trajectory_frame(run: StudyRun, p: PointResult) -> pl.DataFrame:
    """One row per test item: the kept solver, the solvers called, correctness, cost, predicted scores."""
    ids = run.data.item_ids[run.data.rows("test")]
    solvers = np.array(run.data.solvers)
    o = p.outcome
    knob = float(p.knob) if np.isfinite(p.knob) else None  # a never / always threshold
    features = ROUTERS[p.router].features
    scores = np.round(np.asarray(o.scores, dtype=float), 5).tolist()
    return pl.DataFrame({
        "episode": np.zeros(len(ids), dtype=np.int64), "step": np.arange(len(ids), dtype=np.int64), "split": "test", "item_id": ids,
        "action": solvers[o.chosen], "executors": [solvers[row].tolist() for row in o.called],
        "correct": o.correct.astype(bool), "cost_usd": o.cost, "reward": None, "calls": o.called.sum(axis=1).astype(np.int64),
        "extra": [json.dumps({"operating_point": p.operating_point, "knob": knob, "features": features, "scores": s})
                  for s in scores],
    }, schema_overrides={"reward": pl.Float64})


def method_slug(router: str, operating_point: str) -> str:
    return f"{router}.{operating_point.replace('=', '_')}"
