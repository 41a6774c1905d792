"""Stage `credit`: SHARP (seed 002) on a simulated planner-worker tool-use task — the single agent,
broadcast reward (MATPO-like), SHARP and its ablations (no Shapley, planner-only, worker-only
credit) and the p-sweep, every seed batched; held-out evaluation on common draws; metrics with the
paper's figures beside ours, summaries, trajectories with per-agent credit per step, the credit
table of the held-out rollouts (the `dlab credit` replay), plots, and the MLflow experiment `credit`.
The study is `credit.contract.CreditStudy`, written by `pipeline.study.write_study`."""

from __future__ import annotations

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("credit")

import numpy as np

from delegation_lab.credit.contract import CreditStudy
from delegation_lab.pipeline.study import run_study_stage
from delegation_lab.pipeline.stage import run_stage

if __name__ == "__main__":
    np.seterr(divide="ignore", invalid="ignore")
    run_stage("credit", lambda ctx: run_study_stage(ctx, CreditStudy()))
