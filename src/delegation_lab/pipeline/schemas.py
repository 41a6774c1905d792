"""The data contracts of DESIGN.md: the columns and types of every table, in one module.

Where each table lives is `delegation_lab.pipeline.layout.Layout`; reading and atomic writing is
`delegation_lab.pipeline.tables`; the DuckDB views over them are `delegation_lab.pipeline.views`.
"""

from __future__ import annotations

import polars as pl

SPLITS = ("ability", "train", "test")

ITEMS_SCHEMA: dict[str, pl.DataType] = {
    "item_id": pl.String,
    "split": pl.String,
    "question": pl.String,
    "gold": pl.String,
    "choices": pl.List(pl.String),
    "difficulty": pl.Int64,
    "domain": pl.String,
    "source": pl.String,
    "source_id": pl.String,
    "program": pl.String,  # JSON list of steps (arith, gsm8k) or null
}

# Columns an items table may leave out; a table without one reads as null in every row, so tables
# written before a column existed still conform (and ones that never set it are written without it).
ITEMS_OPTIONAL_SCHEMA: dict[str, pl.DataType] = {
    "answer_format": pl.String,  # the item's label matcher (numeric / choice / math / auto), null = label.matcher
}

ANSWERS_SCHEMA: dict[str, pl.DataType] = {
    "solver": pl.String,
    "item_id": pl.String,
    "request_hash": pl.String,
    "role": pl.String,
    "backend": pl.String,
    "model": pl.String,
    "answer_text": pl.String,
    "parsed_answer": pl.String,
    "tokens_in": pl.Int64,
    "tokens_out": pl.Int64,
    "cost_usd": pl.Float64,
    "latency_s": pl.Float64,
    "error": pl.String,
    "created_at": pl.Datetime("us", "UTC"),
    "extra": pl.String,  # JSON: backend-specific facts (imported correctness, estimated tokens, ...)
}

LABELS_SCHEMA: dict[str, pl.DataType] = {
    "solver": pl.String,
    "item_id": pl.String,
    "request_hash": pl.String,
    "correct": pl.Boolean,
    "method": pl.String,  # programmatic | judge | imported
    "programmatic": pl.Boolean,  # exact match against gold (null when gold is unknown)
    "judge_verdict": pl.Boolean,  # null when this answer was not judged
    "judge_model": pl.String,
    "judge_tokens": pl.Int64,
}

ABILITY_MAP_SCHEMA: dict[str, pl.DataType] = {
    "solver": pl.String,
    "bucket": pl.Int64,  # lower edge of the difficulty bucket
    "bucket_label": pl.String,
    "n": pl.Int64,
    "successes": pl.Int64,
    "success_rate": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "mean_cost_usd": pl.Float64,
}

# Columns stored in each part file; study / method / seed live in the partition path.
TRAJECTORY_SCHEMA: dict[str, pl.DataType] = {
    "episode": pl.Int64,
    "step": pl.Int64,
    "split": pl.String,
    "item_id": pl.String,
    "action": pl.String,
    "executors": pl.List(pl.String),
    "correct": pl.Boolean,
    "cost_usd": pl.Float64,
    "reward": pl.Float64,
    "calls": pl.Int64,
    "extra": pl.String,  # JSON object: study-specific facts of the step
}

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "study": pl.String,
    "method": pl.String,
    "seed": pl.Int64,
    "split": pl.String,
    "operating_point": pl.String,
    "accuracy": pl.Float64,
    "cost_per_item_usd": pl.Float64,
    "calls_per_item": pl.Float64,
    "return": pl.Float64,  # nullable: studies without an RL return leave it empty
    "n_items": pl.Int64,
    "dataset": pl.String,
    "solver_set": pl.String,  # comma-joined solver names the method could use
    "verifier": pl.String,  # the Verifier.name whose verdicts made the method's accept decisions
}

# The MLflow run behind each summary row (results/runs/<study>.parquet). Kept out of the summaries
# because a rerun mints new run ids: no stage depends on this table, so an unchanged rerun leaves
# the frontier clean. The dashboard joins it on (study, method, seed, split, operating_point).
RUN_INDEX_SCHEMA: dict[str, pl.DataType] = {
    "study": pl.String,
    "method": pl.String,
    "seed": pl.Int64,
    "split": pl.String,
    "operating_point": pl.String,
    "run_id": pl.String,
}

# Per-agent Shapley credit of replayed trajectories (results/credit/<study>.parquet, `dlab credit`).
CREDIT_SCHEMA: dict[str, pl.DataType] = {
    "study": pl.String, "method": pl.String, "seed": pl.Int64, "split": pl.String, "episode": pl.Int64,
    "step": pl.Int64, "rollout": pl.Int64, "item_id": pl.String, "agent": pl.String, "role": pl.String,
    "credit": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "v_full": pl.Float64, "v_empty": pl.Float64,
    "n_agents": pl.Int64, "estimator": pl.String,
}

FRONTIER_SCHEMA: dict[str, pl.DataType] = {
    "method": pl.String,
    "operating_point": pl.String,
    "dataset": pl.String,
    "study": pl.String,  # `baselines` for the solver-only references
    "kind": pl.String,  # single | mixture | cascade | oracle | study
    "accuracy": pl.Float64,
    "accuracy_std": pl.Float64,
    "cost_per_item_usd": pl.Float64,
    "cost_std": pl.Float64,
    "calls_per_item": pl.Float64,
    "n_seeds": pl.Int64,
    "solver_set": pl.String,
    "accuracy_ci_low": pl.Float64,  # item-level bootstrap interval (null: the study wrote no outcomes)
    "accuracy_ci_high": pl.Float64,
    "cost_ci_low": pl.Float64,
    "cost_ci_high": pl.Float64,
    "on_pareto": pl.Boolean,
    "verifier": pl.String,  # the verifier behind the point's accept decisions; one Pareto set per (dataset, verifier)
    "verifier_deployable": pl.Boolean,  # could a deployment run that verifier (null: one the frontier did not build)
}

OUTCOME_SCHEMA: dict[str, pl.DataType] = {
    "study": pl.String,
    "method": pl.String,
    "operating_point": pl.String,
    "seed": pl.Int64,
    "split": pl.String,
    "dataset": pl.String,
    "verifier": pl.String,
    "item_id": pl.String,
    "correct": pl.Float64,  # 0/1, or an expected value in [0, 1] (a random mixture)
    "cost_usd": pl.Float64,
    # Where the oracle gap goes (frontier/gap.py); null = the study does not record it:
    "held_right": pl.Float64,  # 1 when a right answer was within the method's reach on the item (gap.py)
    "answer_cost_usd": pl.Float64,  # what the call whose answer was returned cost
    "check_cost_usd": pl.Float64,  # dollars paid to verify (answers a check obtained)
}

# The outcome columns a producer may leave out, and files written before they existed lack: they
# read (and are written) as nulls (`pipeline.tables.with_outcome_columns`).
OUTCOME_OPTIONAL = ("held_right", "answer_cost_usd", "check_cost_usd")
