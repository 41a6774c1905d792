"""The deployed policies' own live decisions as frontier rows (`data.dataset: served`).

The other rows of a served dataset's frontier evaluate policies again, offline, on the live
questions; these rows say what each policy `dlab serve` ran actually did: one method
`served:<model>` (kind `served`) per policy in `data/served/decisions.parquet`, over the requests it
answered (HTTP 200) whose item is on the frontier split. Per request, `correct` is the label stage's
verdict on the very answer the client got — the label of (answered_by, item_id, the request hash of
that call), the answer the solve stage adopted from the journal — and the cost is what the journal
says the request cost (every call a cascade made). A conversation asked several times under one
policy is one item whose values are the mean over its requests, so the item-level bootstrap
resamples items as for every other row. A request whose answer has no label (a conversation the
solve stage renders differently, an errored answer) is left out and counted in the metrics.

The rows are the frontier's own points (study `baselines`, like the oracle), so their item-level
outcomes go to results/outcomes/baselines.parquet with the others.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from delegation_lab.frontier.baselines import BASELINES
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA

SERVED_KIND = "served"
SERVED_PREFIX = "served:"


@dataclass(frozen=True)
class ServedPoints:
    """Frontier rows (the baselines' point columns), their item-level outcomes, and what was left out."""

    points: pl.DataFrame
    outcomes: pl.DataFrame
    report: dict


def served_points(decisions: pl.DataFrame, labeled_split: pl.DataFrame, dataset: str, split: str, verifier: str) -> ServedPoints:
    """One point per served policy from the decisions journal joined with the labels of `split`
    (`labeled_split`: the labeled answers, with solver, item_id, request_hash, correct)."""
    answered = decisions.filter((pl.col("status") == 200) & pl.col("answered_by").is_not_null())
    on_split = answered.filter(pl.col("item_id").is_in(labeled_split["item_id"].unique().implode()))
    # the request hash of the call that answered (`request_hashes` is in `called` order; each solver is called once)
    answer_hash = (on_split.select("request_id", "answered_by", "called", "request_hashes").explode(["called", "request_hashes"])
                   .filter(pl.col("called") == pl.col("answered_by"))
                   .group_by("request_id").agg(pl.col("request_hashes").first().alias("answer_hash")))
    picked = on_split.join(answer_hash, on="request_id", how="left")
    labels = labeled_split.select(pl.col("solver").alias("answered_by"), "item_id", pl.col("request_hash").alias("answer_hash"),
                                  pl.col("correct").cast(pl.Float64)).unique(["answered_by", "item_id", "answer_hash"])
    joined = picked.join(labels, on=["answered_by", "item_id", "answer_hash"], how="left")
    graded = joined.filter(pl.col("correct").is_not_null())
    called = pl.col("called").list.explode(keep_nulls=False, empty_as_null=False)
    per_item = (graded.group_by("model", "item_id")
                .agg(pl.col("correct").mean(), pl.col("cost_usd").mean().alias("cost"),
                     pl.col("called").list.len().mean().alias("calls"), called.unique().sort().alias("solvers"))
                .sort("model", "item_id"))
    rows, parts = [], []
    for (model,), g in per_item.group_by("model", maintain_order=True):
        method = SERVED_PREFIX + model
        rows.append({"study": BASELINES, "method": method, "operating_point": "default", "kind": SERVED_KIND, "seed": 0,
                     "accuracy": float(g["correct"].mean()), "cost_per_item_usd": float(g["cost"].mean()),
                     "calls_per_item": float(g["calls"].mean()),
                     "solver_set": ",".join(sorted({s for ss in g["solvers"].to_list() for s in ss})),
                     "verifier": verifier, "dataset": dataset})
        parts.append(pl.DataFrame({
            "study": BASELINES, "method": method, "operating_point": "default", "seed": 0, "split": split,
            "dataset": dataset, "verifier": verifier, "item_id": g["item_id"], "correct": g["correct"], "cost_usd": g["cost"],
            "held_right": None, "answer_cost_usd": None, "check_cost_usd": None,  # the journal does not split them
        }, schema=OUTCOME_SCHEMA))
    report = {
        "requests_answered": answered.height,
        "requests_on_split": on_split.height,
        "requests_graded": graded.height,
        "requests_without_label": on_split.height - graded.height,
        "policies": {SERVED_PREFIX + m: n for m, n in graded.group_by("model").len().sort("model").iter_rows()},
    }
    points = pl.DataFrame(rows) if rows else pl.DataFrame()
    return ServedPoints(points, pl.concat(parts) if parts else pl.DataFrame(schema=OUTCOME_SCHEMA), report)
