"""Stage `market`: decentralized delegation through sequential auctions (seed 004).

Domain 1, the chain-translation density sweep (N x protocol x bidder, seeds batched), and domain 2,
a market over the cached solver answers (train split to learn, test split for the frontier).
Writes metrics/market.json (ours beside the paper's claims), plots/market/, the trajectories (every
auction a row), results/summaries/market.parquet, and an MLflow experiment `market` with one child
run per cell x seed. The study is `market.contract.MarketStudy`, written by
`pipeline.study.write_study`.
"""

from __future__ import annotations

if __name__ == "__main__":  # before the imports below: the pins (a re-executed process loads them once), and a
    # switched-off study skips without loading them at all
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()
    from delegation_lab.pipeline.stage import skip_if_disabled

    skip_if_disabled("market")

from delegation_lab.market.contract import MarketStudy
from delegation_lab.pipeline.study import run_study_stage
from delegation_lab.pipeline.stage import run_stage

if __name__ == "__main__":
    run_stage("market", lambda ctx: run_study_stage(ctx, MarketStudy()))
