"""From sweep results to the study's outputs: metrics/market.json (ours beside the paper's), the
summary and item-level outcome rows the shared frontier reads, and the stage's printed summary.

Intervals come from `evaluation.statistics`: the answers markets' test accuracy and cost per item get
an item bootstrap (items and seeds resampled; `*_ci`), the chain's success a t interval over seeds."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
import polars as pl

from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.evaluation.statistics import (
    ItemBootstrap,
    mean_and_std,
    seed_interval,
)
from delegation_lab.market.chain import cheapest_costs
from delegation_lab.market.inputs import MarketInputs
from delegation_lab.market.paper import (
    GRAPH_CLAIMS,
    chain_claims,
    other_reading_claims,
    provenance_block,
)
from delegation_lab.market.params import (
    PROTOCOLS,
    GraphParams,
    MarketParams,
    market_cells,
)
from delegation_lab.market.study import SweepResult, WorldResult, operating_point
from delegation_lab.reporting.paper import paper_vs_ours
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA

CHAIN_KEYS = ("success", "route_cost", "optimal_route", "margin", "bankruptcies", "subsidy", "consumer_pays", "cost_per_task", "auctions_per_task", "welfare")
SPREAD_KEYS = ("success", "margin", "consumer_pays", "welfare", "route_cost", "cost_per_task")  # each with a t interval over seeds
ANSWER_KEYS = ("accuracy", "cost_per_item", "calls_per_item", "margin", "margin_share", "subsidy", "clearing_price", "consumer_pays", "bankruptcies")


def mean_of(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    return round(float(np.mean(vals)), 6) if vals else None


def std_of(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(mean_and_std(vals)[1], 6) if vals else None


def rounded(interval: tuple[float, float]) -> list[float]:
    return [round(float(interval[0]), 6), round(float(interval[1]), 6)]


def mean_dicts(dicts: list[dict[str, float]]) -> dict[str, float | None]:
    keys = sorted({k for d in dicts for k in d})
    return {k: mean_of(d.get(k) for d in dicts) for k in keys}


def group(worlds: list[WorldResult]) -> dict[tuple, list[WorldResult]]:
    out: dict[tuple, list[WorldResult]] = defaultdict(list)
    for w in worlds:
        key = (w.protocol, w.bidder, w.density) if w.domain == "chain" else (w.protocol, w.bidder, w.multiple)
        out[key].append(w)
    return out


def chain_cells_metrics(worlds: list[WorldResult], confidence: float) -> dict:
    """{protocol: {bidder: {N<k>: cell}}} of chain worlds (one group)."""
    out: dict = {}
    for (protocol, bidder, density), ws in group(worlds).items():
        out.setdefault(protocol, {}).setdefault(bidder, {})[f"N{density}"] = chain_cell(ws, confidence)
    return out


def chain_cell(ws: list[WorldResult], confidence: float) -> dict:
    """One chain cell over its seeds: means, the success std and t interval, prices, bankruptcies by edge."""
    finals = [w.final | {"bankruptcies": float(len(w.bankrupt_agents))} for w in ws]
    cell = {key: mean_of(f.get(key) for f in finals) for key in CHAIN_KEYS}
    cell["success_std"] = std_of(f["success"] for f in finals)
    t = seed_interval([f["success"] for f in finals], confidence)
    cell["success_ci"] = rounded((t["low"], t["high"]))
    cell["price"] = mean_dicts([f["price"] for f in finals])
    cell["subsidy_at"] = mean_dicts([f["subsidy_at"] for f in finals])
    edges: dict[str, float] = defaultdict(float)
    for w in ws:
        for agent in w.bankrupt_agents:
            edges[agent.split("#")[0]] += 1 / len(ws)
    cell["bankrupt_by_edge"] = {k: round(v, 6) for k, v in sorted(edges.items())}
    cell["seeds"] = len(ws)
    return cell


def with_interval(values: list[float | None], confidence: float) -> tuple[float | None, list[float] | None]:
    """Mean and t interval over seeds of the values that exist (a market without a sale has no margin)."""
    vals = [float(v) for v in values if v is not None and not np.isnan(v)]
    if not vals:
        return None, None
    t = seed_interval(vals, confidence)
    return round(t["mean"], 6), rounded((t["low"], t["high"]))


def spread_key(spread: float) -> str:
    return f"s{round(spread * 100)}"


def spread_sweep_metrics(worlds: list[WorldResult], confidence: float = 0.95) -> dict:
    """spread_sweep.s<percent>.{cost_spread, success, success_ci, margin, margin_ci, consumer_pays, welfare, ...}
    (t intervals over seeds), plus the sweep's protocol, bidder and density."""
    ws = [w for w in worlds if w.domain == "chain" and w.group == "spread"]
    if not ws:
        return {}
    out: dict = {"protocol": ws[0].protocol, "bidder": ws[0].bidder, "density": ws[0].density}
    by_spread: dict[float, list[WorldResult]] = defaultdict(list)
    for w in ws:
        by_spread[float(w.cost_spread)].append(w)
    for spread, cell_ws in sorted(by_spread.items()):
        cell: dict = {"cost_spread": spread}
        for key in SPREAD_KEYS:
            cell[key], cell[f"{key}_ci"] = with_interval([w.final.get(key) for w in cell_ws], confidence)
        cell["bankruptcies"] = mean_of(float(len(w.bankrupt_agents)) for w in cell_ws)
        cell["seeds"] = len(cell_ws)
        out[spread_key(spread)] = cell
    return out


def centralised_metrics(worlds: list[WorldResult], reward: float, confidence: float = 0.95) -> dict:
    """chain.centralised: one planner that sees every agent's cost routes each task of the pool along
    its cheapest route (success 1, no margins, no subsidy: the consumer pays the inference cost), and
    `welfare_gap.<protocol>.<bidder>.N<k>`: its welfare minus each market's (paired by seed, t interval)."""
    main = [w for w in worlds if w.domain == "chain" and w.group == "main"]
    if not main:
        return {}
    per_seed: dict[int, float] = {}
    for w in main:  # the planner's cost depends on the seed's task pool only (the cheapest clone is at base cost)
        per_seed.setdefault(w.seed, float(w.centralised_cost))
    costs = [per_seed[s] for s in sorted(per_seed)]
    out: dict = {"success": 1.0}
    out["route_cost"], out["route_cost_ci"] = with_interval(costs, confidence)
    out["cost_per_task"], out["consumer_pays"] = out["route_cost"], out["route_cost"]
    out["welfare"], out["welfare_ci"] = with_interval([reward - c for c in costs], confidence)
    gaps: dict = {}
    for (protocol, bidder, density), ws in group(main).items():
        diffs = [(reward - float(w.centralised_cost)) - w.final["welfare"] for w in ws]
        mean, ci = with_interval(diffs, confidence)
        gaps.setdefault(protocol, {}).setdefault(bidder, {})[f"N{density}"] = {"mean": mean, "ci": ci}
    out["welfare_gap"] = gaps
    out["seeds"] = len(costs)
    return out


def graph_metrics(graph: GraphParams) -> dict:
    """chain.graph: each edge's cost and source (`edges.<src>_<dst>.{cost, source}`), the cost of the
    paper's Fr->Sp->En path (`paths.Fr_Sp_En`), the cheapest route to each target, and the paper's
    three figures under `chain.graph.paper` (inputs we set to match them: calibrated rows)."""
    edges = [(e.src, e.dst, e.cost) for e in graph.edges]
    cost_of = {(src, dst): cost for src, dst, cost in edges}
    paths = {}
    if ("Fr", "Sp") in cost_of and ("Sp", "En") in cost_of:
        paths["Fr_Sp_En"] = round(cost_of[("Fr", "Sp")] + cost_of[("Sp", "En")], 10)
    best = cheapest_costs(graph.source, edges)
    paper = {
        "edges": {k: v for k, v in GRAPH_CLAIMS["edges"].items() if tuple(k.split("_")) in cost_of},
        "paths": {k: v for k, v in GRAPH_CLAIMS["paths"].items() if k in paths},
        "optimal_route_cost": {k: v for k, v in GRAPH_CLAIMS["optimal_route_cost"].items() if k in graph.targets},
    }
    return {
        "edges": {f"{e.src}_{e.dst}": {"cost": e.cost, "source": e.source} for e in graph.edges},
        "paths": paths,
        "optimal_route_cost": {t: round(best[t], 10) for t in graph.targets},
        "paper": {k: v for k, v in paper.items() if v},
    }


def chain_metrics(worlds: list[WorldResult], confidence: float = 0.95, graph: GraphParams | None = None, reward: float | None = None) -> dict:
    """chain.<protocol>.<bidder>.N<k>.{success, success_ci (t over seeds), route_cost, margin, ...} + chain.paper
    for the density sweep, and chain.other_reading.<reading>.<protocol>.<bidder>.N<k> for the belief bidders
    under the reading the params do not configure."""
    chain = [w for w in worlds if w.domain == "chain"]
    out: dict = {}
    bidders_by_protocol: dict[str, list[str]] = defaultdict(list)
    for (protocol, bidder, density), ws in group([w for w in chain if w.group == "main"]).items():
        if bidder not in bidders_by_protocol[protocol]:
            bidders_by_protocol[protocol].append(bidder)
        out.setdefault(protocol, {}).setdefault(bidder, {})[f"N{density}"] = chain_cell(ws, confidence)
    out["paper"] = chain_claims(list(bidders_by_protocol), dict(bidders_by_protocol))
    other = [w for w in chain if w.group == "other_reading"]
    if other:
        reading = str(other[0].reading)
        out["other_reading"] = {reading: chain_cells_metrics(other, confidence)}
        n2 = other_reading_claims(reading, sorted({w.bidder for w in other if w.density == 2}))
        if n2[reading]["first_price"]:
            out["paper"]["other_reading"] = n2
    if graph is not None:
        out["graph"] = graph_metrics(graph)
    if chain:
        out["centralised"] = centralised_metrics(chain, reward if reward is not None else chain[0].reward_usd, confidence)
    return out


def market_provenance(metrics: dict) -> dict[str, dict[str, str]]:
    """The `provenance` block of metrics/market.json: every paper-vs-ours row of this file, audited."""
    return provenance_block([row["metric"] for row in paper_vs_ours(metrics)])


def item_matrix(ws: list[WorldResult], key: str) -> np.ndarray:
    """[n_seeds, n_items] of a per-item test outcome, items in one order for every seed."""
    rows = []
    for w in ws:
        order = np.argsort(np.asarray(w.items["item_id"], dtype=str), kind="stable")
        rows.append(np.asarray(w.items[key], dtype=float)[order])
    return np.vstack(rows)


def answers_metrics(worlds: list[WorldResult], intervals: IntervalParams | None = None) -> dict:
    """answers.<protocol>.<bidder>.R<m>x.{accuracy, accuracy_ci, cost_per_item, cost_per_item_ci,
    calls_per_item, margin, subsidy, ...} on test; intervals: item bootstrap paired across markets."""
    iv = intervals or IntervalParams()
    out: dict = {}
    boot: ItemBootstrap | None = None
    for (protocol, bidder, multiple), ws in group([w for w in worlds if w.domain == "answers"]).items():
        finals = [w.final | {"bankruptcies": float(len(w.bankrupt_agents))} for w in ws]
        cell = {key: mean_of(f.get(key) for f in finals) for key in ANSWER_KEYS}
        cell["accuracy_std"] = std_of(f["accuracy"] for f in finals)
        if all(w.items for w in ws):
            correct, cost = item_matrix(ws, "correct"), item_matrix(ws, "cost")
            if boot is None or boot.n_items != correct.shape[1]:
                boot = ItemBootstrap(correct.shape[1], iv.resamples, iv.confidence, iv.seed)
            cell["accuracy_ci"] = rounded(boot.interval(correct))
            cell["cost_per_item_ci"] = [round(float(v), 10) for v in boot.interval(cost)]
        cell["verifier"] = ws[0].verifier
        cell["reward_usd"] = round(ws[0].reward_usd, 8)
        cell["calls_by_solver"] = mean_dicts([f["calls_by_solver"] for f in finals])
        cell["first_solver_share"] = mean_dicts([f["first_solver_share"] for f in finals])
        cell["seeds"] = len(ws)
        out.setdefault(protocol, {}).setdefault(bidder, {})[operating_point(multiple)] = cell
    return out


def summary_rows(worlds: list[WorldResult], run_ids: dict[tuple[str, int], str | None], dataset: str, solvers: list[str]) -> list[dict]:
    """One row per answers market (method x seed x operating point) on the test split."""
    rows = []
    for w in worlds:
        if w.domain != "answers":
            continue
        rows.append(
            {
                "study": "market",
                "method": w.cell,
                "seed": w.seed,
                "split": "test",
                "operating_point": operating_point(w.multiple),
                "accuracy": w.final["accuracy"],
                "cost_per_item_usd": w.final["cost_per_item"],
                "calls_per_item": w.final["calls_per_item"],
                "return": None,
                "n_items": w.final["n_items"],
                "dataset": dataset,
                "solver_set": ",".join(solvers),
                "run_id": run_ids.get((w.cell, w.seed)),
                "verifier": w.verifier,
            }
        )
    return rows


def outcome_rows(worlds: list[WorldResult], dataset: str) -> pl.DataFrame:
    """Item-level test outcomes, one row per summary row's (method, operating point, seed) x item."""
    parts = []
    for w in worlds:
        if w.domain != "answers":
            continue
        n = len(w.items["item_id"])
        parts.append(pl.DataFrame({
            "study": ["market"] * n, "method": [w.cell] * n, "operating_point": [operating_point(w.multiple)] * n,
            "seed": [w.seed] * n, "split": ["test"] * n, "dataset": [dataset] * n, "verifier": [w.verifier] * n,
            "item_id": np.asarray(w.items["item_id"]).astype(str), "correct": np.asarray(w.items["correct"], dtype=float),
            "cost_usd": np.asarray(w.items["cost"], dtype=float),
        }))
    return pl.concat(parts) if parts else pl.DataFrame(schema=OUTCOME_SCHEMA)


def market_metrics(chain: SweepResult, answers: SweepResult, params: MarketParams, inputs: MarketInputs,
                   intervals: IntervalParams, seconds: float, trajectory_rows: int) -> dict:
    """The stage's metrics/market.json: the chain sweep, the spread sweep, the answers market, the run, the
    verifier and the provenance of every paper-vs-ours row."""
    confidence = intervals.confidence
    cp = params.chain
    metrics = {
        "chain": chain_metrics(chain.worlds, confidence, cp.graph, cp.terminal_reward) if chain.worlds else {},
        "spread_sweep": spread_sweep_metrics(chain.worlds, confidence),
        "answers": answers_metrics(answers.worlds, intervals) if answers.worlds else {},
        "run": {
            "seeds": params.seeds,
            "cells": [f"{p}/{b}" for p, b in market_cells(list(params.protocols), list(params.bidders))],
            "seconds": round(seconds, 2),
            "seconds_by_run": {k: round(v, 2) for k, v in {**chain.seconds, **answers.seconds}.items()},
            "trajectory_rows": trajectory_rows,
        },
    }
    if answers.worlds:
        first = answers.worlds[0]
        metrics["answers"]["reward_unit_usd"] = first.reward_usd / first.multiple
        metrics["answers"]["solvers"] = inputs.solvers
        metrics["verifier"] = inputs.verifier.describe() | {"step": params.answers.verifier.enabled, "summaries": first.verifier}
    metrics["provenance"] = market_provenance(metrics)
    return metrics


def summary_line(metrics: dict, seconds: float) -> str:
    """What the stage prints: per chain cell its success by N, the planner, the spread sweep, the best
    operating point of each answers market."""
    parts = [f"market: {seconds:.0f} s"]
    chain = metrics.get("chain", {})
    for protocol, bidders in chain.items():
        if protocol not in PROTOCOLS:
            continue
        for bidder, cells in bidders.items():
            succ = " ".join(f"{n}={c['success']:.2f}" for n, c in sorted(cells.items()))
            parts.append(f"chain {protocol}/{bidder} success {succ}")
    central = chain.get("centralised")
    if central:
        parts.append(f"chain centralised planner: route cost ${central['route_cost']:.4f}, welfare {central['welfare']:.4f} per task")
    for cell in metrics.get("spread_sweep", {}).values():
        if isinstance(cell, dict):
            parts.append(f"spread {cell['cost_spread']:g}: success {cell['success']:.2f} margin {cell['margin'] if cell['margin'] is None else round(cell['margin'], 4)}")
    for protocol, bidders in metrics.get("answers", {}).items():
        if not isinstance(bidders, dict):
            continue
        for bidder, ops in bidders.items():
            best = max(ops.items(), key=lambda kv: kv[1]["accuracy"] or 0)
            parts.append(f"answers {protocol}/{bidder} best {best[0]}: acc {best[1]['accuracy']:.3f} at ${best[1]['cost_per_item']:.5f}/item")
    return "\n".join(parts)
