"""The held-out rollouts' per-agent credit replayed through `dlab credit` (results/credit/credit.parquet)
and checked against the exact credit the study computed in place: metrics/credit.json `replay`."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from delegation_lab.credit.replay import compute_credit, describe
from delegation_lab.credit.report import agent_names
from delegation_lab.credit.study import StudyOutcome
from delegation_lab.pipeline.layout import Layout


def stored_credit(study: StudyOutcome) -> pl.DataFrame:
    """The exact credit the study computed on each seed's first held-out replicate, per agent."""
    frames = []
    for m in study.methods:
        if not m.spec.team:
            continue
        e = m.eval
        roll = e.team
        L, H, K = roll.worker_present.shape
        names = np.array(agent_names(H, K))
        present = np.concatenate([np.ones((L, 1), dtype=bool), roll.worker_present.reshape(L, -1)], axis=1)
        t, s = np.nonzero(present)
        N = study.eval_set.n
        frames.append(pl.DataFrame({
            "method": m.spec.name, "seed": np.asarray(m.train.seeds)[t // N].astype(np.int64),
            "episode": roll.task[t].astype(np.int64), "agent": names[s], "stored": e.credit.credit[t, s],
        }))
    return pl.concat(frames)


def replay_check(layout: Layout, study_name: str, study: StudyOutcome, params_path: str) -> tuple[dict[str, Any], str]:
    """(the `replay` block, a line saying what was replayed and how far it is from the in-place credit)."""
    run = compute_credit(layout, study_name, params_path=params_path, split="test", estimator="exact")
    joined = run.frame.join(stored_credit(study), on=["method", "seed", "episode", "agent"], how="inner")
    block = {"trajectories": run.trajectories, "agent_rows": run.frame.height, "coalitions": run.coalitions,
             "seconds": round(run.seconds, 3), "coalitions_per_second": run.coalitions_per_second,
             "max_abs_diff_vs_training_code": float((joined["credit"] - joined["stored"]).abs().max()),
             "matched_rows": joined.height}
    line = (f"credit: replay of the held-out rollouts: {describe(run)}; max |replayed - in-place| = "
            f"{block['max_abs_diff_vs_training_code']:.2e} over {joined.height:,} agent rows")
    return block, line
