"""The `history_game` MLflow children: one per game spec (its equilibrium counts and the solution
JSON) and one per IQL condition x seed (its training curves and greedy evaluation)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from delegation_lab.games.equilibria import Solution
from delegation_lab.games.params import HistoryGameParams
from delegation_lab.games.study import CONDITIONS, METHOD, MoneyRun
from delegation_lab.tracking.tracker import StageRun


def log_children(parent: StageRun, solutions: dict[str, Solution], metrics: dict[str, Any], runs: dict[str, MoneyRun],
                 params: HistoryGameParams, results_dir: Path) -> None:
    for name in solutions:
        m = metrics["equilibria"][name]
        with parent.child(f"equilibria/{name}", params={"game": name, "favour": params.equilibria.favour}) as child:
            child.log_metrics({"history/count": m["history"]["count"], "markov/count": m["markov"]["count"],
                               "history_only/count": m["history_only_count"],
                               "cost/combinations": m["combinations_enumerated"]})
            child.log_artifact(results_dir / f"{name}.json")
    for condition, run in runs.items():
        res, every = run.result, params.curve_log_every
        for k, seed in enumerate(res.seeds):
            child_params = {"condition": condition, "money": CONDITIONS[condition], "iql": params.iql, "game": params.game}
            with parent.child(METHOD[condition], seed, params=child_params) as child:
                child.log_series({
                    "train/return": res.returns[k, ::every].mean(axis=1).tolist(),
                    "train/return_A": res.returns[k, ::every, 0].tolist(),
                    "train/return_B": res.returns[k, ::every, 1].tolist(),
                    "train/helps": res.helps[k, ::every].sum(axis=1).tolist(),
                }, start_step=0)
                child.log_metrics({
                    "eval/return": float(res.eval_returns[k].mean()),
                    "eval/return_A": float(res.eval_returns[k, 0]),
                    "eval/return_B": float(res.eval_returns[k, 1]),
                    "eval/helps": float(res.eval_helps[k].sum()),
                    "eval/payments": float(res.eval_payments[k].sum()),
                    "train/late_return": float(res.returns[k, -params.iql.late_window:].mean()),
                })
    parent.log_metrics({c: {k: v for k, v in r.metrics.items() if isinstance(v, float)} for c, r in runs.items()})
