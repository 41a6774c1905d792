"""Stage `history_game`: exact history-dependent vs Markov equilibrium value sets of game specs
(History Matters §2.3, App. B) and independent Q-learning on the alternating help game without and
with virtual money transfer (§2.4, §3.3), 20 seeds batched."""

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("history_game")

from delegation_lab.games.mlflow_log import log_children
from delegation_lab.games.plots import plot_curves, plot_equilibria
from delegation_lab.games.report import solution_json
from delegation_lab.games.study import (
    METHOD,
    equilibria_frame,
    help_games,
    load_games,
    solve_games,
    study_metrics,
    summary_line,
    train_conditions,
    trajectory_frames,
)
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.store import TrajectoryWriter
from delegation_lab.pipeline.tables import write_csv_atomic, write_json_atomic

STUDY = "history_game"


def history_game(ctx: StageContext) -> None:
    """Solve the game specs, train IQL without and with money, write metrics, plots, trajectories."""
    params = ctx.params.history_game
    confidence = ctx.params.evaluation.intervals.confidence
    games = load_games(params.equilibria, ctx.layout.root)  # bad specs fail here, before any work
    envs = help_games(params)
    with ctx.phase("solve"):
        solutions = solve_games(games, params.equilibria)
    with ctx.phase("iql"):
        runs, batches = train_conditions(envs, params, confidence, ctx.progress)
    metrics = study_metrics(solutions, runs, batches, envs, params, confidence, ctx.phases)

    results_dir = ctx.layout.study_results(STUDY)
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
        log_children(parent, solutions, metrics, runs, params, results_dir)
        for condition, run in runs.items():
            for seed, frame in trajectory_frames(run.result, params.trajectory_every).items():
                writer.add(METHOD[condition], seed, frame)
        write_json_atomic(metrics, ctx.layout.metrics(STUDY))
        for artifact in (ctx.layout.metrics(STUDY), plots / "figure5.png", plots / "equilibria.png"):
            parent.log_artifact(artifact)
    for name, m in metrics["equilibria"].items():
        print(f"{STUDY}: {name}: {m['history']['count']} history-dependent SPE values, {m['markov']['count']} Markov"
              + (f", favoured {m['favoured']['values']}" if "favoured" in m else ""))
    print(f"{STUDY}: {summary_line(runs)} ({metrics['timing']['iql_s']:.1f} s for IQL)")


if __name__ == "__main__":
    run_stage(STUDY, history_game)
