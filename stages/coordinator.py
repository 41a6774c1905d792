"""Stage `coordinator`: the DQN coordinator under management and delegation rules (History Matters
§3.1-3.2) on the cached answers — every seed batched — against always-A, every fixed order, random,
the oracle and the frozen management policy, every accept / retry decision by the shared verifier
(`evaluation.verifier`); held-out evaluation with item-level intervals, a cost-weight sweep, metrics,
plots, trajectories, summaries and item-level outcomes for the frontier, and an MLflow child run per
method x seed (written by a background process while the next method trains). The study is
`coordinator.contract.CoordinatorStudy`, written by `pipeline.study.write_study`."""

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("coordinator")

import numpy as np

from delegation_lab.coordinator.contract import CoordinatorStudy
from delegation_lab.pipeline.study import run_study_stage
from delegation_lab.pipeline.stage import run_stage

if __name__ == "__main__":
    np.seterr(divide="ignore", invalid="ignore")
    run_stage("coordinator", lambda ctx: run_study_stage(ctx, CoordinatorStudy()))
