"""The offline LLM judge: any solver backend asked with role `judge`, answers cached like any other.

Judge tokens are recorded in the labels table and never enter a policy's cost.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from delegation_lab.params.root import JudgeParams
from delegation_lab.data.items import Item
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.cache import AnswerCache, CacheRun, current_answers
from delegation_lab.solvers.executor import build_executor

JUDGE_NAME = "judge"


def sample_for_judge(matched: pl.DataFrame, params: JudgeParams, judge_all: bool) -> pl.DataFrame:
    """Rows to judge: all (method judge) or a seeded sample of `sample_size` per solver; gold needed."""
    eligible = matched.filter(pl.col("gold").is_not_null() & pl.col("error").is_null())
    if judge_all:
        return eligible
    picks = []
    for solver, group in eligible.group_by("solver", maintain_order=True):
        rng = np.random.default_rng([params.seed, sum(map(ord, str(solver[0])))])
        n = min(params.sample_size, group.height)
        picks.append(group[sorted(rng.choice(group.height, size=n, replace=False).tolist())])
    return pl.concat(picks) if picks else eligible.head(0)


def run_judge(
    rows: pl.DataFrame, items: dict[str, Item], params: JudgeParams, cache: AnswerCache, progress: bool = True
) -> tuple[pl.DataFrame, CacheRun]:
    """Judge verdicts for `rows` (solver, item_id, answer_text): verdict, judge tokens."""
    judge = build_solver(JUDGE_NAME, params.solver)
    requests = [
        judge.request(
            items[r["item_id"]], "judge",
            {"reference": items[r["item_id"]].gold or "", "candidate": r["answer_text"] or ""},
        )
        for r in rows.select(["item_id", "answer_text"]).iter_rows(named=True)
    ]
    executor = build_executor(JUDGE_NAME, params.solver)
    try:
        run = cache.fill(judge, requests, batch_size=params.solver.batch_size, progress=progress, executor=executor)
    finally:
        executor.close()
    judged = current_answers(cache.read(), requests).select(
        "item_id", "request_hash", "parsed_answer", "tokens_in", "tokens_out", "error"
    )
    keyed = rows.with_columns(pl.Series("judge_hash", [r.request_hash for r in requests], dtype=pl.String))
    out = keyed.join(
        judged.rename({"request_hash": "judge_hash", "parsed_answer": "judge_parsed", "error": "judge_error",
                       "tokens_in": "judge_in", "tokens_out": "judge_out"}),
        on=["item_id", "judge_hash"], how="left",
    ).unique(subset=["solver", "item_id"], keep="first")
    verdict = (
        pl.when(pl.col("judge_parsed") == "correct").then(True)
        .when(pl.col("judge_parsed") == "incorrect").then(False)
        .otherwise(None)
    )
    return out.select(
        "solver", "item_id",
        verdict.alias("judge_verdict"),
        (pl.col("judge_in") + pl.col("judge_out")).alias("judge_tokens"),
    ), run
