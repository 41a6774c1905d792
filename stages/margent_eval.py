"""Stage `margent_eval`: the paper's tables and diagnostics, every ρ operating point, the baselines
and the oracle on collection-disjoint test items; trajectories, summaries, metrics and plots. The
study is `margent.contract.MargentStudy`, written by `pipeline.study.write_study`."""

from __future__ import annotations

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("margent_eval", section="margent")

from delegation_lab.margent.contract import MargentStudy
from delegation_lab.pipeline.study import run_study_stage
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.skip import skip_reason, skip_stage


def evaluate(ctx: StageContext) -> None:
    """Write metrics/margent.json, plots/margent/, the margent trajectories and summaries."""
    reason = skip_reason(ctx.layout.study_results("margent") / "collect.json")
    if reason:  # margent_collect skipped: no trees to evaluate, no summary rows for the frontier
        skip_stage(ctx.layout, "margent_eval", reason, extra={"dataset": ctx.params.data.dataset})
        return
    run_study_stage(ctx, MargentStudy())


if __name__ == "__main__":
    run_stage("margent_eval", evaluate, section="margent")
