"""Building the labels table: programmatic verdicts, the judge's sample, and their agreement report."""

from __future__ import annotations

from typing import Any

import polars as pl

from delegation_lab.params.root import LabelParams
from delegation_lab.data.items import Item
from delegation_lab.labeling.agreement import agreement_report, imported_agreement
from delegation_lab.labeling.judge import run_judge, sample_for_judge
from delegation_lab.labeling.matchers import MatchStats, match_frame
from delegation_lab.pipeline.schemas import LABELS_SCHEMA
from delegation_lab.solvers.cache import AnswerCache, CacheRun
from delegation_lab.pipeline.tables import conform


def build_labels(
    answers: pl.DataFrame, items_df: pl.DataFrame, items: dict[str, Item], params: LabelParams,
    judge_cache: AnswerCache, progress: bool = True,
) -> tuple[pl.DataFrame, dict[str, Any], CacheRun]:
    """One label per (solver, item) of `answers`, plus the judge agreement report."""
    stats = MatchStats()
    matched = match_frame(answers, items_df, params.numeric_tolerance, params.matcher, params.math_timeout_s, stats)
    to_judge = sample_for_judge(matched, params.judge, judge_all=params.method == "judge")
    verdicts, run = run_judge(to_judge, items, params.judge, judge_cache, progress)
    labels = matched.join(verdicts, on=["solver", "item_id"], how="left")
    chosen = "judge_verdict" if params.method == "judge" else "programmatic"
    take_imported = pl.col("imported").is_not_null() & (pl.lit(params.use_imported) | pl.col("gold").is_null())
    labels = labels.with_columns(
        pl.when(take_imported).then(pl.col("imported")).otherwise(pl.col(chosen)).alias("correct"),
        pl.when(take_imported).then(pl.lit("imported")).otherwise(pl.lit(params.method)).alias("method"),
        pl.when(pl.col("judge_verdict").is_not_null()).then(pl.lit(params.judge.solver.model)).alias("judge_model"),
    )
    unlabeled = labels.filter(pl.col("correct").is_null())
    if unlabeled.height:
        example = unlabeled.row(0, named=True)
        raise ValueError(
            f"{unlabeled.height} answers get no label (e.g. solver {example['solver']}, item {example['item_id']}): "
            "the item has no gold and the cache brought no correctness, or the judge gave no verdict"
        )
    report = agreement_report(labels)
    report["imported_vs_programmatic"] = imported_agreement(labels)
    if stats.math_answers:  # absent where no answer is math: numeric and choice reports stay as they were
        report["math_matcher"] = {"answers": stats.math_answers, "timeouts": stats.math_timeouts}
    labels = conform(labels, LABELS_SCHEMA, "labels").select(list(LABELS_SCHEMA))
    return labels, report, run


def replay_accuracy(joined: pl.DataFrame, backends: dict[str, str], confidence: float = 0.95) -> dict[str, Any]:
    """The stage's metrics/replay_accuracy.json: each replayed solver's accuracy as our labels score it over the
    items its cache answers (every split; `no_answer_in_cache` items are left out, where the frontier
    counts them wrong), with a Wilson interval, beside its accuracy over every item. `joined` is the
    labels joined to the answers they grade; `backends` maps solver -> backend name."""
    from delegation_lab.evaluation.statistics import wilson_interval

    out = {}
    for name, backend in backends.items():
        if backend != "replay":
            continue
        rows = joined.filter(pl.col("solver") == name)
        answered = rows.filter(pl.col("error").is_null())
        right = int(answered["correct"].sum())
        low, high = wilson_interval(right, answered.height, confidence)
        out[name] = {
            "model": rows["model"][0] if rows.height else None,
            "n_items": answered.height,
            "accuracy": round(right / answered.height, 6) if answered.height else None,
            "accuracy_ci": [round(low, 6), round(high, 6)],
            "no_answer_in_cache": rows.height - answered.height,
            "accuracy_every_item": round(float(rows["correct"].mean()), 6) if rows.height else None,
        }
    note = ("accuracy over the items each replayed cache answers (our labels, every split), Wilson "
            f"{confidence:.0%} interval; accuracy_every_item counts an item the cache lacks as wrong (as the frontier does)")
    return {"confidence": confidence, "note": note if out else "no replayed solvers", "solvers": out}
