"""Stage `history_game`: exact history-dependent vs Markov equilibrium value sets of game specs
(History Matters §2.3, App. B) and independent Q-learning on the alternating help game without and
with virtual money transfer (§2.4, §3.3), 20 seeds batched."""

import time
from contextlib import ExitStack

from delegation_lab.games.report import solution_json
from delegation_lab.games.study import (
    CONDITIONS,
    METHOD,
    PAPER_MONEY,
    PROVENANCE,
    MoneyRun,
    blocks_for,
    curve_frame,
    equilibria_frame,
    equilibria_metrics,
    help_games,
    history_learner_metrics,
    load_games,
    money_metrics,
    plot_curves,
    plot_equilibria,
    solve_games,
    summary_line,
    sweep_metrics,
    train_blocks,
    trajectory_frames,
)
from delegation_lab.parallel import spawn_pool
from delegation_lab.stage import StageContext, run_stage
from delegation_lab.store import TrajectoryWriter
from delegation_lab.tables import write_csv_atomic, write_json_atomic

STUDY = "history_game"


def history_game(ctx: StageContext) -> None:
    """Solve the game specs, train IQL without and with money, write metrics, plots, trajectories."""
    params = ctx.params.history_game
    root = ctx.layout.root
    games = load_games(params.equilibria, root)  # bad specs fail here, before any work
    envs = help_games(params)

    t0 = time.perf_counter()
    solutions = solve_games(games, params.equilibria)
    t_solve = time.perf_counter() - t0
    results_dir = ctx.layout.study_results(STUDY)

    runs: dict[str, MoneyRun] = {}
    confidence = ctx.params.evaluation.intervals.confidence
    t0 = time.perf_counter()
    batches = {}
    # The conditions are independent batches (each seed draws from its own generator): all but the
    # first train in `history_game.workers` - 1 spawned processes while this one trains the first.
    conditions = list(envs)
    with ExitStack() as stack:
        pool = None
        if params.workers > 1 and len(conditions) > 1:
            pool = stack.enter_context(spawn_pool(min(params.workers - 1, len(conditions) - 1), deterministic=False))
        elsewhere = {c: pool.submit(train_blocks, envs[c], params, blocks_for(params, CONDITIONS[c])) for c in conditions[1:]} if pool else {}
        for condition in conditions:
            blocks = blocks_for(params, CONDITIONS[condition])  # the reported learner, the gamma sweep, history-aware learners
            if condition in elsewhere:
                batches[condition] = elsewhere[condition].result()
            else:
                bar = None
                if ctx.progress:
                    from tqdm import tqdm

                    bar = tqdm(total=params.iql.episodes, desc=f"IQL {condition}", unit="ep", mininterval=1.0)
                batches[condition] = train_blocks(envs[condition], params, blocks, progress=(lambda e, b=bar: b.update(1)) if bar else None)
                if bar:
                    bar.close()
            result = batches[condition][blocks[0]]
            runs[condition] = MoneyRun(condition, result, money_metrics(result, params.iql.late_window, confidence), curve_frame(result))
    t_iql = time.perf_counter() - t0
    frames = {c: trajectory_frames(r.result, params.trajectory_every) for c, r in runs.items()}

    metrics = {
        # its own environment: the game specs and the help game, whatever data.dataset is
        "dataset": "own (game specs and the alternating help game; data.dataset not used)",
        "equilibria": {name: equilibria_metrics(sol) for name, sol in solutions.items()},
        "money": {**{c: r.metrics for c, r in runs.items()}, "gamma_sweep": sweep_metrics(batches, confidence), "paper": PAPER_MONEY},
        "timing": {"solve_s": round(t_solve, 3), "iql_s": round(t_iql, 3)},
    }
    if params.history_learner.enabled:
        metrics["history_learner"] = history_learner_metrics(envs["no_transfer"], params, batches["no_transfer"], confidence)
    metrics["provenance"] = dict(PROVENANCE)  # the rows of paper vs ours that are not plain outcomes
    for name, sol in solutions.items():
        write_json_atomic(solution_json(sol), results_dir / f"{name}.json")
    plots = ctx.layout.plots(STUDY)
    for condition, run in runs.items():
        write_csv_atomic(run.curve, plots / f"return_{condition}.csv")
    eq_frame = equilibria_frame(solutions)
    write_csv_atomic(eq_frame, plots / "equilibria.csv")
    plot_curves({c: r.curve for c, r in runs.items()}, plots / "figure5.png",
                f"Independent Q-learning, {params.iql.seeds} seeds (mean ± std)")
    plot_equilibria(eq_frame, plots / "equilibria.png")

    with ctx.tracker.stage_run(STUDY, STUDY, params) as parent, TrajectoryWriter(ctx.layout, STUDY) as writer:
        for name, sol in solutions.items():
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
                writer.add(METHOD[condition], seed, frames[condition][seed])
        parent.log_metrics({c: {k: v for k, v in r.metrics.items() if isinstance(v, float)} for c, r in runs.items()})
        write_json_atomic(metrics, ctx.layout.metrics(STUDY))
        parent.log_artifact(ctx.layout.metrics(STUDY))
        parent.log_artifact(plots / "figure5.png")
        parent.log_artifact(plots / "equilibria.png")
    for name, m in metrics["equilibria"].items():
        print(f"{STUDY}: {name}: {m['history']['count']} history-dependent SPE values, {m['markov']['count']} Markov"
              + (f", favoured {m['favoured']['values']}" if "favoured" in m else ""))
    print(f"{STUDY}: {summary_line(runs)} ({t_iql:.1f} s for IQL)")


if __name__ == "__main__":
    run_stage(STUDY, history_game)
