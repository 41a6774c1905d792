"""Building the labels table: programmatic verdicts, the judge's sample, and their agreement report."""

from __future__ import annotations

from typing import Any

import polars as pl

from delegation_lab.params.root import LabelParams
from delegation_lab.data.items import Item
from delegation_lab.labeling.accuracy import count_accuracy, takes_imported
from delegation_lab.labeling.agreement import agreement_report, imported_agreement
from delegation_lab.labeling.judge import run_judge, sample_for_judge
from delegation_lab.labeling.matchers import MatchStats, imported_correct, match_frame
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
    take_imported = takes_imported(params.use_imported)
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


def graded_answers(labels: pl.DataFrame, answers: pl.DataFrame, items: pl.DataFrame) -> pl.DataFrame:
    """The labels joined to the answers they grade and the items' splits, with `imported` (the label the
    cache brought, `matchers.imported_correct`) for `labeling.accuracy`."""
    joined = labels.join(answers, on=["solver", "item_id", "request_hash"]).join(
        items.select("item_id", "split"), on="item_id")
    return joined.with_columns(pl.Series("imported", [imported_correct(e) for e in joined["extra"].to_list()],
                                         dtype=pl.Boolean))


def in_replay_cache() -> pl.Expr:
    """An answer row the replay cache holds (its provenance is recorded, `replay_source_index`), reply or
    not; a question the cache lacks has none."""
    return pl.col("extra").str.json_path_match("$.replay_source_index").is_not_null()


def replay_accuracy(joined: pl.DataFrame, backends: dict[str, str], confidence: float = 0.95) -> dict[str, Any]:
    """The stage's metrics/replay_accuracy.json: each replayed solver's accuracy as our labels score it over the
    items its cache holds (every split; a reply that is missing or empty is wrong and counted in
    `no_reply`, as `dlab import --json` counts it: `labeling.accuracy`), with a Wilson interval; items
    the cache lacks (`no_answer_in_cache`) are left out, where `accuracy_every_item` and the frontier
    count them wrong. `joined` is the labels joined to the answers they grade, with the cache's own label
    (`graded_answers`); `backends` maps solver -> backend name."""
    from delegation_lab.evaluation.statistics import wilson_interval

    out = {}
    for name, backend in backends.items():
        if backend != "replay":
            continue
        rows = joined.filter(pl.col("solver") == name)
        held = count_accuracy(rows.filter(in_replay_cache()), "answer_text")
        low, high = wilson_interval(held.right, held.n_items, confidence)
        every = count_accuracy(rows, "answer_text").accuracy
        out[name] = {
            "model": rows["model"][0] if rows.height else None,
            "n_items": held.n_items,
            "accuracy": None if held.accuracy is None else round(held.accuracy, 6),
            "accuracy_ci": [round(low, 6), round(high, 6)],
            "no_reply": held.no_reply,
            "no_answer_in_cache": rows.height - held.n_items,
            "accuracy_every_item": None if every is None else round(every, 6),
        }
    note = ("accuracy over the items each replayed cache holds (our labels, every split; a missing or empty reply "
            f"is wrong and counted in no_reply), Wilson {confidence:.0%} interval; accuracy_every_item counts an "
            "item the cache lacks as wrong (as the frontier does)")
    return {"confidence": confidence, "note": note if out else "no replayed solvers", "solvers": out}
