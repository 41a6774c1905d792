"""How the simulated team's parameters move Tables 1 and 2: the interventional collection of the
current params (items from `data`, roots from `margent.collect`) under a few simulator settings.

    python -m delegation_lab.margent.sensitivity [params.yaml]

Prints one markdown row per setting: A0, A1, A_D, Gain@1 and each sub-agent's net value (Tables 1-2
only; the stage `margent_eval` reruns the whole study per setting for Table 3 too: metrics
`sensitivity`).
"""

from __future__ import annotations

import sys

import polars as pl

from delegation_lab.params.root import load_params
from delegation_lab.data import build_items
from delegation_lab.data.items import items_frame
from delegation_lab.margent import analysis, study
from delegation_lab.margent.collect import build_tree
from delegation_lab.margent.params import SimulatorParams
from delegation_lab.margent.simulator import SimulatedTeam
from delegation_lab.margent.team import GoldScorer
from delegation_lab.margent.tree import SequenceTree


LABELS = {
    "defaults": "defaults",
    "independent_rescues": "independent rescues (`rescue_correlation: 0`)",
    "fresh_draws": "fresh draws (`rescue_correlation: 0`, `revise_if_flagged: 1`)",
    "extractor_corrupts": "Extractor corrupts (`extractor.corruption_at_d1: 0.15`)",
    "stronger_manager": "stronger manager (`manager.skill: 1.6`)",
}


def variants(sim: SimulatorParams) -> dict[str, SimulatorParams]:
    """The settings the study reports beside its defaults (metrics/margent.json `sensitivity`, keyed
    as LABELS; the first is the defaults)."""
    return {
        "defaults": sim,
        "independent_rescues": sim.model_copy(update={"rescue_correlation": 0.0}),
        "fresh_draws": sim.model_copy(update={
            "rescue_correlation": 0.0, "manager": sim.manager.model_copy(update={"revise_if_flagged": 1.0})}),
        "extractor_corrupts": sim.model_copy(update={
            "extractor": sim.extractor.model_copy(update={"corruption_at_d1": 0.15})}),
        "stronger_manager": sim.model_copy(update={
            "manager": sim.manager.model_copy(update={"skill": 1.6})}),
    }


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    params = load_params(args[0] if args else "params.yaml")
    m = params.margent
    frame = items_frame(build_items(params.data))
    pools = study.sample_pools(frame.filter(pl.col("split") == "train"), frame.filter(pl.col("split") == "test"), m.collect)
    views = study.agent_views(pools.collection, m, params.data.dataset)
    pool = tuple(m.subagents)
    print("| simulator setting | A0 | A1 | A_D | Gain@1 | " + " | ".join(pool) + " |")
    print("|---" * (5 + len(pool)) + "|")
    for name, sim in variants(m.simulator).items():
        team = SimulatedTeam(sim, study.role_prices(m, params))
        collected, _ = build_tree(team, views, GoldScorer(pools.collection), SequenceTree(pool, m.collect.depth))
        t1 = analysis.table1(collected, m.collect.depth)
        mv = analysis.marginal_values(collected, pool, m.eval.confidence)
        gain = f"{t1['gain_at_1']:.1f} %" if t1["gain_at_1"] is not None else "n/a"
        print(f"| {LABELS[name]} | {t1['A0']:.1f} | {t1['A1']:.1f} | {t1['AD']:.1f} | {gain} | "
              + " | ".join(f"{mv[a]['net_value']:+.1f}" for a in pool) + " |")


if __name__ == "__main__":
    main()
