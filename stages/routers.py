"""Stage `routers`: the field's standard routers (every one in the router registry,
`routers.ROUTERS`) fitted on the train split's labels and costs, calibrated on a dev split carved
from train, evaluated once on test. Writes metrics/routers.json, plots/routers/points.csv,
trajectories, results/summaries/routers.parquet, results/outcomes/routers.parquet and one saved
model per router in models/routers/ (`dlab route`); logs MLflow experiment `routers`. The study is
`routers.contract.RoutersStudy`, written by `pipeline.study.write_study`."""

from __future__ import annotations

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("routers")

from delegation_lab.pipeline.study import run_study_stage
from delegation_lab.routers.contract import RoutersStudy
from delegation_lab.pipeline.stage import run_stage

if __name__ == "__main__":
    run_stage("routers", lambda ctx: run_study_stage(ctx, RoutersStudy()))
