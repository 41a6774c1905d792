"""Stage `label`: offline correctness labels for every solver's current answers, a judge agreement
report (metrics/labels.json), the per-solver summary (metrics/solve.json) and each replayed
solver's accuracy over the items its cache answers (metrics/replay_accuracy.json)."""

if __name__ == "__main__":  # before the imports below: the process re-executed under the pins loads them once
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()

import json

import polars as pl

from delegation_lab.data.items import items_from_frame
from delegation_lab.errors import InputError
from delegation_lab.labeling.accuracy import count_accuracy
from delegation_lab.labeling.labels import build_labels, graded_answers, replay_accuracy
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.cache import AnswerCache, current_answers
from delegation_lab.solvers.params import SolverParams
from delegation_lab.solvers.replay.backend import missing_answers_advice
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.tables import read_items, read_table, write_json_atomic, write_parquet_atomic


def label(ctx: StageContext) -> None:
    """Label every current answer; judge a sample (or all) and report agreement."""
    layout = ctx.layout
    items_df = read_items(layout)
    items = items_from_frame(items_df)
    by_id = {i.item_id: i for i in items}
    frames = []
    for name, params in ctx.params.solvers.items():
        solver = build_solver(name, params)
        requests = [solver.request(item) for item in items]
        cached = read_table(layout.answers(name), f"answers of solver {name}")
        current = current_answers(cached, requests)
        if current.height < len(requests):
            raise InputError(
                f"{layout.answers(name)}: {len(requests) - current.height} of {len(requests)} items have no answer "
                f"for the current settings of solver {name}; run `dvc repro solve` (or `python stages/solve.py --solver {name}`)"
            )
        frames.append(current)
    answers = pl.concat(frames, how="vertical_relaxed")
    judge_cache = AnswerCache(layout.judge_answers(), layout.journal("judge"))
    labels, agreement, judge_run = build_labels(answers, items_df, by_id, ctx.params.label, judge_cache, ctx.progress)
    write_parquet_atomic(labels, layout.labels)

    joined = graded_answers(labels, answers, items_df)
    solve_metrics = {}
    for name in ctx.params.solvers:
        rows = joined.filter(pl.col("solver") == name)
        run_file = layout.solve_run(name)
        run_stats = json.loads(run_file.read_text()) if run_file.exists() else {}
        solve_metrics[name] = {
            "accuracy": round(count_accuracy(rows, "answer_text").accuracy, 6),
            **{f"accuracy_{s}": round(count_accuracy(g, "answer_text").accuracy, 6)
               for (s,), g in rows.group_by("split") if g.height},
            "n_items": rows.height,
            "cost_usd": round(float(rows["cost_usd"].sum()), 6),
            "tokens_in": int(rows["tokens_in"].sum()),
            "tokens_out": int(rows["tokens_out"].sum()),
            "errors": int(rows["error"].is_not_null().sum()),
            "backend_calls": run_stats.get("backend_calls"),
        }
    counts = {m: int(n) for m, n in labels.group_by("method").len().iter_rows()}
    label_metrics = {
        "method": ctx.params.label.method,
        "n_labels": labels.height,
        "by_method": counts,
        "judge": {
            "model": ctx.params.label.judge.solver.model,
            "judged": int(labels["judge_verdict"].is_not_null().sum()),
            "tokens": int(labels["judge_tokens"].fill_null(0).sum()),
            "backend_calls": judge_run.backend_calls,
        },
        "agreement": agreement,
    }
    write_json_atomic(label_metrics, layout.metrics("labels"))
    write_json_atomic(solve_metrics, layout.metrics("solve"))
    backends = {name: params.backend for name, params in ctx.params.solvers.items()}
    write_json_atomic(replay_accuracy(joined, backends), layout.metrics("replay_accuracy"))
    with ctx.tracker.stage_run("data", "label", ctx.params.label) as run:
        run.log_metrics({"labels": {k: v for k, v in agreement["all"].items()}, "solve": solve_metrics})
    for name, m in solve_metrics.items():
        print(f"label: {name}: accuracy {m['accuracy']:.3f} on {m['n_items']} items, ${m['cost_usd']:.4f}")
        if m["errors"]:
            print(f"label: warning: {error_advice(name, ctx.params.solvers[name], joined)}")
    a = agreement["all"]
    if a["n"]:
        print(f"label: judge agreement {a['agreement']:.3f} on {a['n']} answers (FP {a['judge_false_positives']}, FN {a['judge_false_negatives']})")


def error_advice(name: str, params: SolverParams, joined: pl.DataFrame) -> str:
    """What to do about a solver's error rows: ask the backend again, or (a replayed cache) nothing can."""
    errors = joined.filter((pl.col("solver") == name) & pl.col("error").is_not_null())
    if params.backend == "replay":
        return f"{name}: " + missing_answers_advice(name, params.replay, errors.height, errors["item_id"].head(3).to_list())
    return (f"{errors.height} answers of {name} are backend errors and count as wrong; "
            f"rerun `python stages/solve.py --solver {name} --retry-errors`")


if __name__ == "__main__":
    run_stage("label", label)
