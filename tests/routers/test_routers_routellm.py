"""The routers end to end on RouteLLM's GSM8K answers (Mixtral-8x7B vs GPT-4, 1319 official test
questions, RouteLLM's own correctness labels), and RouteLLM's question: does a learned router
recover more than half of the GPT-4 - Mixtral accuracy gap at under half of GPT-4's cost?

RouteLLM's answers cover GSM8K's test split only, so half of those questions (by a hash of
item_id) train the routers (a fifth of them the dev split) and the other half are the test split.
Prices: GPT-4 ($10 / $30 per 1M input / output tokens, gpt-4-1106-preview's list price) and
Mixtral-8x7B ($0.60 / $0.60, a hosted list price); token counts are estimated from the texts (the
CSV has none). `pytest -s` prints the table; it is also written to a temp file (path printed).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from delegation_lab.data import build_items
from delegation_lab.data.params import DataParams, Gsm8kParams
from delegation_lab.embeddings import load_embedder, text_features
from delegation_lab.evaluation import Verifier, uniforms
from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.routers import LEARNED, Inputs
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.report import study_metrics
from delegation_lab.routers.study import RoutingData, carve_dev, run_study
from delegation_lab.solvers.base import Solver
from delegation_lab.solvers.params import Price, ReplayParams, SolverParams
from delegation_lab.solvers.replay.backend import ReplayBackend

MODELS = {"mixtral": ("mistralai/Mixtral-8x7B-Instruct-v0.1", Price(input_usd_per_mtok=0.6, output_usd_per_mtok=0.6)),
          "gpt4": ("gpt-4-1106-preview", Price(input_usd_per_mtok=10.0, output_usd_per_mtok=30.0))}


@pytest.fixture(scope="module")
def routellm_data(shared_data: Path) -> RoutingData:
    csv = shared_data / "routellm_gsm8k" / "gsm8k_responses.csv"
    if not csv.exists():
        pytest.skip(f"{csv} is absent: RouteLLM's GSM8K answers are not on this machine")
    params = DataParams(dataset="gsm8k", gsm8k=Gsm8kParams(path=str(shared_data / "gsm8k")), ability_size=1000, train_size=None, test_size=None)
    items = [i for i in build_items(params) if i.split == "test"]
    correct, cost = [], []
    for name, (model, price) in MODELS.items():
        sp = SolverParams(backend="replay", model=model, price=price,
                          replay=ReplayParams(path=str(csv), format="routellm_csv", source_model=model))
        answers = {a.item_id: a for a in Solver(name, sp, ReplayBackend(sp.replay, sp.price)).solve(items)}
        correct.append([json.loads(answers[i.item_id].extra)["imported_correct"] for i in items])
        cost.append([answers[i.item_id].cost_usd for i in items])
    ids = np.array([i.item_id for i in items])
    questions = [i.question for i in items]
    embedder = load_embedder("auto", key="the RouteLLM test's embedder")
    emb = np.asarray(embedder.encode(questions), dtype=np.float32)
    half = np.where(uniforms("routellm-train-test", ids, 0) < 0.5, "train", "test")
    return RoutingData(ids, carve_dev(ids, half, 0.2, 0), Inputs(emb, text_features(questions, [None] * len(items))),
                       np.array(correct, dtype=bool).T, np.array(cost, dtype=float).T, list(MODELS), embedder.name)


def test_routers_run_end_to_end_on_routellm_gsm8k(routellm_data, tmp_path_factory):
    data = routellm_data
    params = RoutersParams.model_validate({"seeds": 3, "cluster": {"clusters": 8}, "knn": {"k": 15}})
    verifier = Verifier("judge", 0.02, 0.03, 0, "configured")
    run = run_study(data, params, verifier)
    metrics = study_metrics(run, IntervalParams(resamples=500), verifier.describe(), {"name": data.embedder})
    singles = metrics["singles"]
    assert singles["gpt4"]["accuracy"] > singles["mixtral"]["accuracy"] + 0.1  # 85.7 % vs 63.8 % on all 1319
    assert singles["gpt4"]["cost_per_item_usd"] > 10 * singles["mixtral"]["cost_per_item_usd"]
    lines = [f"RouteLLM GSM8K, {data.embedder} embeddings, split sizes {metrics['split_sizes']}",
             f"singles: {json.dumps(singles)}", f"oracle: {json.dumps(metrics['oracle'])}"]
    for name, r in metrics["routers"].items():
        assert len(r["operating_points"]) >= 1 and all(0 <= o["accuracy"] <= 1 for o in r["operating_points"])
        rec = r["gap_recovery"]["best_share_under_half_cost"]
        lines.append(f"{name}: best gap share under half GPT-4 cost = {rec if rec is None else round(rec, 3)}")
        for o in r["operating_points"]:
            lines.append(f"   {o['operating_point']:>18} acc {o['accuracy']:.3f} [{o['accuracy_ci'][0]:.3f}, {o['accuracy_ci'][1]:.3f}] "
                         f"cost ${o['cost_per_item_usd']:.5f} [{o['cost_ci'][0]:.5f}, {o['cost_ci'][1]:.5f}]")
    lines.append(f"learned routers recovering > half the gap at < half GPT-4's cost: {metrics['learned_half_gap_under_half_cost']}")
    out = tmp_path_factory.mktemp("routellm") / "routers_routellm_gsm8k.txt"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines) + f"\n(written to {out})")
    # every learned router's curve is reported; whether one recovers half the gap is a finding, stated in the doc
    assert set(LEARNED) <= set(metrics["routers"])
    assert all(metrics["routers"][n]["gap_recovery"]["strong"] == "gpt4" for n in LEARNED)
