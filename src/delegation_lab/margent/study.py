"""The three steps of the study as library calls the DVC stages wrap: collection (items -> branch
tables), manager training (collection -> SFT data + policies), evaluation (trees + policies ->
metrics, summaries, trajectories). Each returns plain data; the stage scripts write and log it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import torch

from delegation_lab.params.root import Params
from delegation_lab.data.items import Item, items_from_frame
from delegation_lab.errors import InputError
from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.evaluation.statistics import ItemBootstrap, mean_and_std, paired_bootstrap
from delegation_lab.pipeline.layout import Layout
from delegation_lab.margent import analysis, distill, evaluate, policy
from delegation_lab.margent import paper_figures as paper
from delegation_lab.margent.collect import CollectStats, build_tree, views_frame
from delegation_lab.margent.features import FEATURES
from delegation_lab.margent.llm_team import LLMTeam, team_solvers
from delegation_lab.margent.params import SUBAGENTS, CollectParams, MargentParams, Rho, rho_label
from delegation_lab.margent.schemas import AgentView
from delegation_lab.margent.simulator import SimulatedTeam
from delegation_lab.margent.team import GoldScorer, Team
from delegation_lab.margent.tree import SequenceTree
from delegation_lab.solvers.params import Price

POOLS = ("collection", "dev", "test")


# ---------------------------------------------------------------------------------------------
# collection


@dataclass(frozen=True)
class Pools:
    collection: list[Item]
    dev: list[Item]
    test: list[Item]


def sample_pools(train: pl.DataFrame, test: pl.DataFrame, params: CollectParams) -> Pools:
    """Collection and development pool: disjoint seeded samples of train; evaluation: test."""
    need = params.n_items + params.dev_items
    if need > train.height:
        raise InputError(
            f"margent.collect.n_items ({params.n_items}) + dev_items ({params.dev_items}) = {need} exceeds the "
            f"{train.height} train items; lower them or raise data.train_size"
        )
    rng = np.random.default_rng([params.seed, 0x4D41])
    order = rng.permutation(train.height)
    train_items = items_from_frame(train.sort("item_id"))
    chosen = [train_items[i] for i in order[:need]]
    test_items = items_from_frame(test.sort("item_id"))
    if params.test_items is not None:
        if params.test_items > len(test_items):
            raise InputError(f"margent.collect.test_items ({params.test_items}) exceeds the {len(test_items)} test items")
        keep = sorted(rng.permutation(len(test_items))[: params.test_items].tolist())
        test_items = [test_items[i] for i in keep]
    return Pools(chosen[: params.n_items], chosen[params.n_items :], test_items)


def role_prices(margent: MargentParams, params: Params) -> dict[str, Price]:
    return {role: params.solvers[name].price for role, name in team_solvers(margent, params.solvers).items()}


def solver_set(margent: MargentParams) -> str:
    names = [margent.solvers.manager, *[margent.solvers.for_role(a) for a in margent.subagents]]
    return ",".join(sorted(set(names)))


def build_team(margent: MargentParams, params: Params, cache_dir: Path, progress: bool = False) -> Team:
    roles = team_solvers(margent, params.solvers)
    if margent.team == "simulated":
        return SimulatedTeam(margent.simulator, role_prices(margent, params))
    return LLMTeam(roles, params.solvers, cache_dir, progress=progress)


def agent_views(items: list[Item], margent: MargentParams, dataset: str) -> list[AgentView]:
    views = [AgentView.from_item(i) for i in items]
    if margent.team == "simulated":
        missing = [v.item_id for v in views if not v.structure]
        if missing:
            raise InputError(
                f"margent.team is simulated, which solves questions from their step structure, but data.dataset "
                f"{dataset!r} gives {len(missing)} item(s) without one (e.g. {missing[0]}); use data.dataset: arith "
                "or margent.team: llm"
            )
    return views


@dataclass
class Collected:
    collection: pl.DataFrame
    trees: pl.DataFrame
    views: pl.DataFrame
    stats: dict[str, CollectStats] = field(default_factory=dict)


def collect_all(team: Team, pools: Pools, margent: MargentParams, dataset: str, progress: bool = False) -> Collected:
    """Interventional collection on the collection pool; full trees on the development and test
    pools (the test tree with the prompted manager's decisions), and the test tree once more with
    the Verifier's candidate blanked."""
    pool = tuple(margent.subagents)
    full = SequenceTree(pool, len(pool))
    views = {name: agent_views(getattr(pools, name), margent, dataset) for name in POOLS}
    scorer = GoldScorer([*pools.collection, *pools.dev, *pools.test])
    stats: dict[str, CollectStats] = {}
    collection, stats["collection"] = build_tree(
        team, views["collection"], scorer, SequenceTree(pool, margent.collect.depth), mode="interventional",
        pool_name="collection", progress=progress,
    )
    trees = []
    for name, sees in (("dev", True), ("test", True), ("test", False)):
        if not views[name]:
            continue
        frame, st = build_tree(team, views[name], scorer, full, mode="full", sees_candidate=sees,
                               decisions=sees and name == "test", pool_name=name, progress=progress)
        stats[name if sees else "test_blank"] = st
        trees.append(frame)
    all_views = pl.concat([views_frame(views[name], name) for name in POOLS], how="vertical")
    return Collected(collection, pl.concat(trees, how="vertical"), all_views, stats)


# ---------------------------------------------------------------------------------------------
# distillation and training


def model_grid(margent: MargentParams) -> list[tuple[Rho, int]]:
    seeds = [margent.manager.seed + k for k in range(margent.manager.seeds)]
    return [(rho, seed) for rho in margent.distill.rho for seed in seeds]


@dataclass
class Trained:
    result: policy.TrainResult
    grid: list[tuple[Rho, int]]
    counts: dict[str, int]
    per_model: list[dict[str, int]]
    sft: dict[str, int]


def train_managers(collection: pl.DataFrame, views: pl.DataFrame, margent: MargentParams, sft_dir: Path) -> Trained:
    """Distil targets, write the SFT data per ρ, and train every (ρ, seed) manager at once."""
    pool = tuple(margent.subagents)
    examples, counts = distill.label_examples(collection, margent.distill.seed)
    if counts["rescue"] == 0 and counts["commit"] == 0:
        raise InputError("the collection has no labelled example (no correct root, no rescue); nothing to train on")
    steps = distill.decision_steps(examples, collection, pool)
    grid = model_grid(margent)
    weights = np.zeros((len(grid), len(steps.action)), dtype=np.float32)
    per_model, sft = [], {}
    views = views.filter(pl.col("pool") == "collection")
    for m, (rho, seed) in enumerate(grid):
        chosen = distill.select(examples, rho, margent.distill.seed + seed - margent.manager.seed)
        keep = np.zeros(len(examples), dtype=bool)
        index = {e.item_index: k for k, e in enumerate(examples)}
        keep[[index[e.item_index] for e in chosen]] = True
        weights[m] = keep[steps.example]
        per_model.append({"examples": len(chosen), "commit": sum(e.kind == "commit" for e in chosen),
                          "rescue": sum(e.kind == "rescue" for e in chosen), "steps": int(weights[m].sum())})
        if seed == margent.manager.seed:
            sft[rho_label(rho)] = distill.write_sft(sft_dir / f"rho={rho_label(rho)}.jsonl", chosen, collection, views, pool)
    mp = margent.manager
    result = policy.train_policies(
        steps.features, steps.action, steps.mask, weights, [s for _, s in grid], mp.hidden, mp.epochs, mp.lr,
        mp.weight_decay, device=mp.device, cpu_threads=mp.cpu_threads,
    )
    return Trained(result, grid, counts, per_model, sft)


def save_managers(trained: Trained, margent: MargentParams, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({
        "state_dict": trained.result.policy.state_dict(), "grid": [(rho_label(r), s) for r, s in trained.grid],
        "hidden": margent.manager.hidden, "features": FEATURES, "pool": list(margent.subagents),
        "counts": trained.counts, "per_model": trained.per_model,
    }, tmp)
    tmp.replace(path)


def load_managers(path: Path) -> tuple[policy.BatchedPolicy, list[tuple[str, int]], dict]:
    if not path.exists():
        raise FileNotFoundError(f"{path}: the trained managers are missing; run `dvc repro margent_train`")
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    if ckpt["features"] != FEATURES:
        raise InputError(f"{path}: managers were trained on features {ckpt['features']}, not {FEATURES}; retrain them")
    grid = [(str(r), int(s)) for r, s in ckpt["grid"]]
    net = policy.BatchedPolicy([s for _, s in grid], len(FEATURES), ckpt["hidden"], len(distill.ACTIONS))
    net.load_state_dict(ckpt["state_dict"])
    return net, grid, ckpt


# ---------------------------------------------------------------------------------------------
# evaluation


@dataclass
class Method:
    """One evaluated method: its walks on the test tree (one per seed) and their summaries."""

    name: str
    operating_point: str
    seeds: list[int]
    walk: evaluate.Walk
    outcomes: dict[str, np.ndarray]
    rows: list[dict[str, float]]
    decision_costs: bool = False


def _policy_actions(net: policy.BatchedPolicy, table: evaluate.TreeTable, device: str) -> np.ndarray:
    feats = table.features.reshape(-1, table.features.shape[-1])
    mask = np.broadcast_to(table.mask[None], (table.n_items, *table.mask.shape)).reshape(-1, table.mask.shape[-1])
    return policy.act(net, feats, mask, device).reshape(-1, table.n_items, table.tree.n_nodes)


def _method(name: str, op: str, seeds: list[int], table: evaluate.TreeTable, actions: np.ndarray, decision_costs: bool = False) -> Method:
    w = evaluate.walk(table, actions)
    out = evaluate.outcomes(table, w, decision_costs)
    return Method(name, op, seeds, w, out, evaluate.summarise(table, out), decision_costs)


def _final_method(name: str, table: evaluate.TreeTable, final: np.ndarray) -> Method:
    """A method given by its final node per item (the oracle): rebuild the walk from the path."""
    tree = table.tree
    steps = tree.max_depth + 1
    nodes = np.full((1, table.n_items, steps), -1, dtype=np.int64)
    actions = np.full((1, table.n_items, steps), -1, dtype=np.int64)
    for i, k in enumerate(final[0]):
        seq = tree.sequences[k]
        for t in range(len(seq) + 1):
            nodes[0, i, t] = tree.index[seq[:t]]
            actions[0, i, t] = 0 if t == len(seq) else 1 + SUBAGENTS.index(seq[t])
    w = evaluate.Walk(nodes, actions, final)
    out = evaluate.outcomes(table, w)
    return Method(name, "default", [0], w, out, evaluate.summarise(table, out))


def _mean(rows: list[dict[str, float]], key: str) -> float:
    return float(np.mean([r[key] for r in rows]))


def _std(rows: list[dict[str, float]], key: str) -> float:
    return mean_and_std([r[key] for r in rows])[1]


@dataclass
class Evaluated:
    metrics: dict
    methods: list[Method]
    test: evaluate.TreeTable
    by_rho: pl.DataFrame
    selected: str


def evaluate_all(
    collection: pl.DataFrame, trees: pl.DataFrame, net: policy.BatchedPolicy, grid: list[tuple[str, int]],
    margent: MargentParams, intervals: IntervalParams | None = None,
) -> Evaluated:
    """Every method on the test tree, and the metrics: headline accuracies and costs with item
    bootstrap intervals over the test items (seeds resampled too; paired across methods)."""
    pool = tuple(margent.subagents)
    full = SequenceTree(pool, len(pool))
    if margent.manager.cpu_threads is not None:
        torch.set_num_threads(margent.manager.cpu_threads)
    pools = set(trees["pool"].unique().to_list())
    if "test" not in pools:
        raise InputError(f"{Layout().study_results('margent') / 'trees.parquet'} has no test tree; rerun `dvc repro margent_collect`")
    test = evaluate.TreeTable.from_frame(trees.filter((pl.col("pool") == "test") & ~pl.col("blank")), full)
    blank = evaluate.TreeTable.from_frame(trees.filter((pl.col("pool") == "test") & pl.col("blank")), full)
    dev = evaluate.TreeTable.from_frame(trees.filter((pl.col("pool") == "dev") & ~pl.col("blank")), full) if "dev" in pools else None
    device = margent.manager.device
    labels = list(dict.fromkeys(r for r, _ in grid))
    ev = margent.eval

    # learned managers on test (and dev, for the selection)
    test_actions = _policy_actions(net, test, device)
    methods: list[Method] = []
    by_label: dict[str, Method] = {}
    for label in labels:
        idx = [m for m, (r, _) in enumerate(grid) if r == label]
        meth = _method("margent", f"rho={label}", [grid[m][1] for m in idx], test, test_actions[idx])
        methods.append(meth)
        by_label[label] = meth
    if ev.selected_rho is not None:
        selected = rho_label(ev.selected_rho)
        if selected not in by_label:
            raise InputError(f"margent.eval.selected_rho={selected} is not among the trained ρ values {labels}")
        dev_scores = None
    else:
        if dev is None:
            raise InputError("margent.eval.selected_rho is null but there is no development pool (collect.dev_items: 0)")
        dev_rows = evaluate.summarise(dev, evaluate.outcomes(dev, evaluate.walk(dev, _policy_actions(net, dev, device))))
        dev_scores = {
            label: (_mean([dev_rows[m] for m, (r, _) in enumerate(grid) if r == label], "accuracy"),
                    _mean([dev_rows[m] for m, (r, _) in enumerate(grid) if r == label], "calls"))
            for label in labels
        }
        selected = max(labels, key=lambda lab: (round(dev_scores[lab][0], 9), -dev_scores[lab][1]))

    # baselines
    n_nodes = test.tree.n_nodes
    candidate = _method("margent-candidate", "default", [0], test, np.zeros((1, test.n_items, n_nodes), dtype=np.int64))
    verifier = _method("margent-forced-verifier", "default", [0], test, evaluate.sequence_actions(test, ("Verifier",))) if "Verifier" in pool else None
    force_all = _method("margent-force-all", "default", [0], test, evaluate.sequence_actions(test, pool))
    prompted = _method("margent-prompted", "default", [0], test, np.where(test.decision < 0, 0, test.decision)[None], decision_costs=True)
    oracle = _final_method("margent-oracle", test, evaluate.oracle_final(test))
    methods += [m for m in (candidate, verifier, force_all, prompted, oracle) if m is not None]

    # random replay of the selected managers, and the Verifier candidate-blank ablation at the lowest ρ
    sel = by_label[selected]
    replays = [evaluate.random_replay(test, sel.walk.final[k], ev.resamples, ev.confidence, ev.seed + k) for k in range(len(sel.seeds))]
    low_label = "0" if "0" in by_label else min((lab for lab in labels if lab != "all"), key=float, default=labels[0])
    low = by_label[low_label]
    ii = np.arange(test.n_items)[None]
    blank_correct = blank.correct[ii, low.walk.final]
    root = test.root_correct[None]
    ablation = {
        "rho": low_label,
        "with_candidate": {"accuracy": 100 * _mean(low.rows, "accuracy"), "correction": _mean(low.rows, "correction"),
                           "corruption": _mean(low.rows, "corruption"), "calls": _mean(low.rows, "calls")},
        "blank": {"accuracy": 100 * float(blank_correct.mean()), "correction": float((~root & blank_correct).mean()),
                  "corruption": float((root & ~blank_correct).mean()), "calls": _mean(low.rows, "calls")},
    }

    by_rho = pl.DataFrame([
        {"rho": label, "seed": seed, **row}
        for label in labels for seed, row in zip(by_label[label].seeds, by_label[label].rows, strict=True)
    ])
    boot = ItemBootstrap(test.n_items, *_interval_args(intervals))
    metrics = _metrics(collection, margent, by_label, labels, selected, dev_scores, candidate, verifier, force_all,
                       prompted, oracle, replays, ablation, boot, test, intervals)
    return Evaluated(metrics, methods, test, by_rho, selected)


def _interval_args(intervals: IntervalParams | None) -> tuple[int, float, int]:
    iv = intervals or IntervalParams()
    return iv.resamples, iv.confidence, iv.seed


def _point(method: Method, boot: ItemBootstrap) -> dict:
    rows = method.rows
    acc_lo, acc_hi = boot.interval(method.outcomes["correct"].astype(float))
    cost_lo, cost_hi = boot.interval(method.outcomes["cost"])
    return {
        "accuracy": 100 * _mean(rows, "accuracy"), "accuracy_std": 100 * _std(rows, "accuracy"),
        "accuracy_ci": [100 * acc_lo, 100 * acc_hi], "cost_per_item_usd_ci": [cost_lo, cost_hi],
        "calls": _mean(rows, "calls"), "calls_std": _std(rows, "calls"), "call_gap": _mean(rows, "call_gap"),
        "candidate_accuracy": 100 * _mean(rows, "candidate_accuracy"), "cost_per_item_usd": _mean(rows, "cost_per_item_usd"),
        "correction": _mean(rows, "correction"), "corruption": _mean(rows, "corruption"),
    }


def _metrics(collection, margent, by_label, labels, selected, dev_scores, candidate, verifier, force_all, prompted, oracle,
             replays, ablation, boot, test, intervals) -> dict:
    pool = tuple(margent.subagents)
    t1 = analysis.table1(collection, margent.collect.depth, intervals)
    marginal = analysis.marginal_values(collection, pool, margent.eval.confidence, intervals)
    sel = _point(by_label[selected], boot)
    fa = _point(force_all, boot)
    baselines = {"candidate": _point(candidate, boot), "force_all": fa, "prompted": _point(prompted, boot), "oracle": _point(oracle, boot)}
    if verifier is not None:
        baselines["forced_verifier"] = _point(verifier, boot)
    sel_correct = by_label[selected].outcomes["correct"].astype(float)
    gain = paired_bootstrap(boot, sel_correct, test.root_correct[None].astype(float))
    vs_all = paired_bootstrap(boot, sel_correct, force_all.outcomes["correct"].astype(float))
    return {
        "table1": {**{k: v for k, v in t1.items()}, "paper": paper.TABLE1_MACRO},
        "table2": {**{a: marginal[a]["net_value"] for a in pool}, "paper": {a: paper.TABLE2_MACRO[a] for a in pool}},
        "marginal": marginal,
        "rho": {**{label: _point(by_label[label], boot) for label in labels}, "paper": paper.RHO_AQUA_RAT_D3},
        "dev": {label: {"accuracy": 100 * acc, "calls": calls} for label, (acc, calls) in dev_scores.items()} if dev_scores else {},
        "eval": {
            "rho": selected, "candidate_accuracy": sel["candidate_accuracy"], "accuracy": sel["accuracy"],
            "accuracy_ci": sel["accuracy_ci"], "gain_pp": sel["accuracy"] - sel["candidate_accuracy"],
            "gain_pp_ci": [100 * gain["ci_low"], 100 * gain["ci_high"]], "gain_pp_p_value": gain["p_value"],
            "calls": sel["calls"], "call_gap": sel["call_gap"],
            "cost_per_item_usd": sel["cost_per_item_usd"], "n_items": int(by_label[selected].rows[0]["n_items"]),
            "paper": paper.TABLE3_MACRO,
        },
        "baselines": baselines,
        "selected_vs_force_all": {
            "selected_accuracy": sel["accuracy"], "selected_calls": sel["calls"], "force_all_accuracy": fa["accuracy"],
            "force_all_calls": fa["calls"], "delta_accuracy": sel["accuracy"] - fa["accuracy"],
            "delta_accuracy_ci": [100 * vs_all["ci_low"], 100 * vs_all["ci_high"]], "delta_accuracy_p_value": vs_all["p_value"],
            "paper": paper.MMLU_PRO_SELECTED_VS_FORCE_ALL,
        },
        "replay": {
            "rho": selected, "resamples": margent.eval.resamples, "accuracy": 100 * float(np.mean([r["accuracy"] for r in replays])),
            "low": 100 * float(np.mean([r["low"] for r in replays])), "high": 100 * float(np.mean([r["high"] for r in replays])),
            "above_share": float(np.mean([r["above"] for r in replays])), "paper": paper.REPLAY_MEDQA,
        },
        "ablation": {**ablation, "paper": paper.ABLATION_AQUA_RAT},
        "provenance": {k: v for k, v in paper.PROVENANCE.items() if k.split(".")[1] in pool or not k.startswith("table2.")},
    }
