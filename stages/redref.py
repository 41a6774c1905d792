"""Stage `redref`: REDEREF (seed 003) — RQ1 efficiency, RQ2 specialization, RQ3 impairment, the
judge-noise sweep (Theorem 3.1), and Thompson-sampling delegation on the cached solver answers
(summary rows for the frontier; the shared `evaluation.verifier` judges every cached answer). Writes
metrics/redref.json, plots/redref/, trajectories, results/summaries/redref.parquet and the item-level
results/outcomes/redref.parquet; logs MLflow experiment `redref`. The study is
`redref.study.RedrefStudy`, written by `pipeline.study.write_study`."""

from __future__ import annotations

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("redref")

from delegation_lab.pipeline.study import run_study_stage
from delegation_lab.redref.study import STUDY, RedrefStudy
from delegation_lab.pipeline.stage import run_stage

if __name__ == "__main__":
    run_stage(STUDY, lambda ctx: run_study_stage(ctx, RedrefStudy()))
