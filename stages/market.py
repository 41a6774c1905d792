"""Stage `market`: decentralized delegation through sequential auctions (seed 004).

Domain 1, the chain-translation density sweep (N x protocol x bidder, seeds batched), and domain 2,
a market over the cached solver answers (train split to learn, test split for the frontier).
Writes metrics/market.json (ours beside the paper's claims), plots/market/, the trajectories (every
auction a row), results/summaries/market.parquet, and an MLflow experiment `market` with one child
run per cell x seed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import polars as pl
import torch

from delegation_lab.errors import InputError
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.evaluation.verifier import Verifier, build_verifier
from delegation_lab.market.answers import solver_matrices
from delegation_lab.market.params import PROTOCOLS, MarketParams, market_cells
from delegation_lab.market.plots import plot_answers_frontier, plot_chain_curves, plot_chain_density, plot_chain_prices
from delegation_lab.market.report import (
    answers_metrics,
    chain_metrics,
    market_provenance,
    outcome_rows,
    spread_sweep_metrics,
    summary_rows,
    write_plot_tables,
)
from delegation_lab.market.study import SweepResult, WorldResult, operating_point, run_answers, run_chain, run_markets
from delegation_lab.schemas import SUMMARY_SCHEMA
from delegation_lab.stage import StageContext, run_stage
from delegation_lab.store import TrajectoryWriter, write_summaries
from delegation_lab.tables import read_labeled_answers, write_json_atomic

STUDY = "market"


def check_inputs(ctx: StageContext) -> tuple[MarketParams, list[str], dict | None, int, Verifier | None]:
    """Every check that can fail, before any market runs."""
    params = ctx.params.market
    device = params.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"market.device: {device!r} requested but CUDA is not available on this machine; use `cpu`")
    try:
        torch.device(device)
    except RuntimeError as e:
        raise InputError(f"market.device: {device!r} is not a torch device ({e})") from None
    solvers = list(params.answers.solvers or ctx.params.solvers)
    unknown = [s for s in solvers if s not in ctx.params.solvers]
    if unknown:
        raise InputError(f"market.answers.solvers: unknown solver(s) {unknown}; params `solvers` defines {sorted(ctx.params.solvers)}")
    if not params.answers.enabled:
        return params, solvers, None, 0, None
    labeled = read_labeled_answers(ctx.layout)
    matrices, n_buckets = solver_matrices(labeled, solvers)
    verifier = build_verifier(ctx.params.evaluation.verifier, ctx.layout.root)
    return params, solvers, matrices, n_buckets, verifier


def progress_bars(enabled: bool) -> Callable[[str, int], Callable[[int], None]]:
    def make(label: str, total: int) -> Callable[[int], None]:
        if not enabled:
            return lambda n: None
        from tqdm import tqdm

        bar = tqdm(total=total, desc=label, leave=False)

        def advance(n: int) -> None:
            bar.update(n)
            if bar.n >= total:
                bar.close()

        return advance

    return make


SERIES_POINTS = 50  # learning curves go to MLflow as at most this many bucket means (full curves: plots/market/*_curves)


def downsample(values, points: int = SERIES_POINTS) -> list[float]:
    """Bucket means (NaN-aware) so a curve of any length is at most `points` values."""
    import numpy as np

    values = np.asarray(values, dtype=float)
    if values.size <= points:
        return values.tolist()
    buckets = np.array_split(values, points)
    return [float(np.nanmean(b)) if np.isfinite(b).any() else float("nan") for b in buckets]


def log_children(run, worlds: list[WorldResult]) -> dict[tuple[str, int], str | None]:
    """One MLflow child per chain cell x seed and per answers method x seed; returns their run ids."""
    run_ids: dict[tuple[str, int], str | None] = {}
    answers: dict[tuple[str, int], list[WorldResult]] = {}
    for w in worlds:
        if w.domain == "chain" and w.group != "main":
            continue  # the spread sweep and the other reading are read from metrics/market.json
        if w.domain == "chain":
            child_params = {"domain": "chain", "protocol": w.protocol, "bidder": w.bidder, "N": w.density, "seed": w.seed}
            with run.child(w.cell, w.seed, params=child_params, domain="chain") as child:
                child.log_series({f"train/{k}": downsample(w.curves[k]) for k in ("success", "margin", "subsidy", "alive")})
                child.log_metrics(
                    {f"final/{k}": v for k, v in w.final.items() if not isinstance(v, dict)}
                    | {"final/bankruptcies": len(w.bankrupt_agents)}
                    | {f"final/price/{k}": v for k, v in w.final["price"].items()}
                )
                run_ids[(w.cell, w.seed)] = child.run_id
        else:
            answers.setdefault((w.cell, w.seed), []).append(w)
    for (cell, seed), ws in answers.items():
        child_params = {"domain": "answers", "protocol": ws[0].protocol, "bidder": ws[0].bidder, "seed": seed,
                        "reward_multiples": [w.multiple for w in ws], "reward_usd": [w.reward_usd for w in ws]}
        with run.child(cell, seed, params=child_params, domain="answers") as child:
            series: dict[str, list[float]] = {}
            finals: dict[str, float] = {}
            for w in ws:  # every operating point's curves and finals in one call each (not two per point)
                op = operating_point(w.multiple)
                series |= {f"{op}/train/{k}": downsample(w.curves[k]) for k in ("success", "cost")}
                f = w.final
                finals |= {
                    f"{op}/eval/accuracy": f["accuracy"], f"{op}/cost/per_item_usd": f["cost_per_item"],
                    f"{op}/eval/calls_per_item": f["calls_per_item"], f"{op}/market/margin": f["margin"],
                    f"{op}/market/subsidy": f["subsidy"], f"{op}/market/clearing_price": f["clearing_price"],
                    f"{op}/market/consumer_pays": f["consumer_pays"], f"{op}/market/bankruptcies": len(w.bankrupt_agents),
                }
            child.log_series(series)
            child.log_metrics(finals)
            run_ids[(cell, seed)] = child.run_id
    return run_ids


def single_solver_points(matrices: dict, solvers: list[str]) -> pl.DataFrame:
    test = matrices["test"]
    return pl.DataFrame(
        {
            "method": [f"always-{s}" for s in solvers],
            "accuracy": test.correct.float().mean(0).tolist(),
            "cost_per_item_usd": test.cost.mean(0).tolist(),
        }
    )


def market(ctx: StageContext) -> None:
    """Run both sweeps and write every output."""
    params, solvers, matrices, n_buckets, verifier = check_inputs(ctx)
    progress = progress_bars(ctx.progress)
    layout = ctx.layout
    plots = layout.plots(STUDY)
    with ctx.tracker.stage_run(STUDY, STUDY, params) as run:
        started = time.perf_counter()
        if params.workers > 1:
            # every (domain, bidder) market in the pool; this process logs each one's MLflow children
            # as it arrives, while the others still run
            run_ids: dict[tuple[str, int], str | None] = {}
            logging = [0.0]

            def log_part(part: SweepResult) -> None:
                t0 = time.perf_counter()
                run_ids.update(log_children(run, part.worlds))
                logging[0] += time.perf_counter() - t0

            with ctx.phase("markets"):
                chain, answers = run_markets(params, matrices, n_buckets, solvers, verifier, params.workers, log_part, progress)
            seconds = time.perf_counter() - started
            ctx.phases["mlflow_children"] = round(logging[0], 3)  # inside `markets`, beside the pool's work
        else:
            with ctx.phase("chain"):
                chain = run_chain(params, progress) if params.chain.enabled else SweepResult([], {})
            with ctx.phase("answers"):
                answers = run_answers(params, matrices, n_buckets, solvers, verifier, progress) if matrices is not None else SweepResult([], {})
            seconds = time.perf_counter() - started
            with ctx.phase("mlflow_children"):
                run_ids = log_children(run, chain.worlds + answers.worlds)
        worlds = chain.worlds + answers.worlds
        with ctx.phase("trajectories"), TrajectoryWriter(layout, STUDY) as writer:
            for (method, seed), frame in {**chain.trajectories, **answers.trajectories}.items():
                writer.add(method, seed, frame)
        if answers.worlds:
            write_summaries(layout, STUDY, summary_rows(answers.worlds, run_ids, ctx.params.data.dataset, solvers))
        else:
            write_summaries(layout, STUDY, pl.DataFrame(schema=SUMMARY_SCHEMA))
        write_outcomes(layout, STUDY, outcome_rows(answers.worlds, ctx.params.data.dataset))
        confidence = ctx.params.evaluation.intervals.confidence
        cp = params.chain
        metrics = {
            "chain": chain_metrics(chain.worlds, confidence, cp.graph, cp.terminal_reward) if chain.worlds else {},
            "spread_sweep": spread_sweep_metrics(chain.worlds, confidence),
            "answers": answers_metrics(answers.worlds, ctx.params.evaluation.intervals) if answers.worlds else {},
            "run": {
                "seeds": params.seeds,
                "cells": [f"{p}/{b}" for p, b in market_cells(list(params.protocols), list(params.bidders))],
                "seconds": round(seconds, 2),
                "seconds_by_run": {k: round(v, 2) for k, v in {**chain.seconds, **answers.seconds}.items()},
                "trajectory_rows": writer.rows_written,
            },
        }
        if answers.worlds:
            metrics["answers"]["reward_unit_usd"] = answers.worlds[0].reward_usd / answers.worlds[0].multiple
            metrics["answers"]["solvers"] = solvers
            metrics["verifier"] = verifier.describe() | {"step": params.answers.verifier.enabled, "summaries": answers.worlds[0].verifier}
        metrics["provenance"] = market_provenance(metrics)
        write_json_atomic(metrics, layout.metrics(STUDY))
        write_plot_tables(worlds, plots)
        pictures = []
        density_sweep = [w for w in chain.worlds if w.group == "main"]
        if density_sweep:
            pictures += [
                plot_chain_density(density_sweep, plots / "chain_density.png"),
                plot_chain_curves(density_sweep, plots / "chain_curves.png"),
                plot_chain_prices(density_sweep, plots / "chain_prices.png", params.chain.graph.languages()),
            ]
        if answers.worlds:
            pictures.append(plot_answers_frontier(answers.worlds, plots / "answers_frontier.png", single_solver_points(matrices, solvers)))
        for picture in pictures:
            run.log_artifact(picture)
        run.log_artifact(layout.metrics(STUDY))
        run.log_metrics({"run/seconds": seconds, "run/trajectory_rows": writer.rows_written})
    print(summary_line(metrics, seconds))


def summary_line(metrics: dict, seconds: float) -> str:
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
    for key, cell in metrics.get("spread_sweep", {}).items():
        if isinstance(cell, dict):
            parts.append(f"spread {cell['cost_spread']:g}: success {cell['success']:.2f} margin {cell['margin'] if cell['margin'] is None else round(cell['margin'], 4)}")
    for protocol, bidders in metrics.get("answers", {}).items():
        if not isinstance(bidders, dict):
            continue
        for bidder, ops in bidders.items():
            best = max(ops.items(), key=lambda kv: kv[1]["accuracy"] or 0)
            parts.append(f"answers {protocol}/{bidder} best {best[0]}: acc {best[1]['accuracy']:.3f} at ${best[1]['cost_per_item']:.5f}/item")
    return "\n".join(parts)


if __name__ == "__main__":
    run_stage("market", market)
