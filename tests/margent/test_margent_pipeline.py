"""MARGENT end to end: the smoke DAG's margent stages (the session's `smoke_dag`), what they write,
what a ρ change reruns, and clear errors for bad params and unsupported input."""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml

from delegation_lab.data.arith import generate
from delegation_lab.data.items import items_frame
from delegation_lab.data.params import ArithParams
from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.margent import study
from delegation_lab.margent.params import MargentParams
from delegation_lab.reporting.paper import paper_vs_ours
from delegation_lab.pipeline.schemas import SUMMARY_SCHEMA
from delegation_lab.query.sealed import run_query

from tests.conftest import BIN, REPO, copy_project, ran, run, stage_here, upstream


def test_bad_params_exit_2_naming_the_key(tmp_path):
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw["margent"]["collect"]["depth"] = 5
    raw["margent"]["distill"]["rho"] = [0, -2]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    proc = stage_here(REPO, "margent_collect", "--params", str(bad))
    assert proc.returncode == 2
    assert "margent.collect.depth" in proc.stderr and "margent.distill.rho" in proc.stderr
    assert not (tmp_path / "results").exists()


def test_unsupported_dataset_and_too_few_items_are_input_errors():
    item = generate(ArithParams(), 1, seed=0)[0].model_copy(update={"program": None})
    with pytest.raises(InputError, match="data.dataset 'gsm8k'.*margent.team: llm"):
        study.agent_views([item], MargentParams(), "gsm8k")
    train = items_frame([i.model_copy(update={"split": "train"}) for i in generate(ArithParams(), 50, seed=1)])
    with pytest.raises(InputError, match=r"margent.collect.n_items \(2000\) \+ dev_items \(500\) = 2500 exceeds the 50 train items"):
        study.sample_pools(train, train, MargentParams().collect)


@pytest.mark.slow
def test_repro_writes_every_output(smoke_dag):
    project, _ = smoke_dag
    # margent_eval reads the shared verifier's measured rates (metrics/labels.json) for its rows' verifier name
    assert upstream(project, "margent_eval") == {"prepare", "margent_collect", "margent_train", "margent_eval", "label", "solve"}
    m = json.loads((project / "metrics" / "margent.json").read_text())
    for key in ("A0", "A1", "AD", "gain_at_1"):
        assert isinstance(m["table1"][key], float) and key in m["table1"]["paper"]
    assert set(m["table2"]) == {"Extractor", "Reasoner", "Verifier", "paper"}
    assert set(m["rho"]) == {"0", "0.5", "1", "2", "3", "all", "paper"}
    assert all(set(v) >= {"accuracy", "calls", "call_gap"} for k, v in m["rho"].items() if k != "paper")
    assert set(m["baselines"]) == {"candidate", "forced_verifier", "force_all", "prompted", "oracle"}
    assert m["replay"]["resamples"] == 200 and m["replay"]["low"] <= m["replay"]["high"]
    assert set(m["ablation"]) >= {"with_candidate", "blank", "paper"}
    pairs = {r["metric"]: r for r in paper_vs_ours(m)}
    assert pairs["table1.gain_at_1"]["paper"] == 91.7 and pairs["eval.gain_pp"]["paper"] == 17.1
    assert pairs["selected_vs_force_all.selected_accuracy"]["paper"] == 71.5
    assert all(r["ours"] is not None for r in pairs.values()), [k for k, r in pairs.items() if r["ours"] is None]

    summaries = pl.read_parquet(project / "results" / "summaries" / "margent.parquet")
    assert list(summaries.columns) == list(SUMMARY_SCHEMA)
    assert (summaries["split"] == "test").all() and (summaries["n_items"] == 120).all()
    assert set(summaries["method"]) == {"margent", "margent-candidate", "margent-forced-verifier", "margent-force-all", "margent-prompted"}
    assert summaries.filter(pl.col("method") == "margent").height == 6 * 2  # ρ x seeds
    assert (summaries["cost_per_item_usd"] > 0).all() and summaries.join(pl.read_parquet(project / "results" / "runs" / "margent.parquet"), on=["study", "method", "seed", "split", "operating_point"], how="left")["run_id"].is_not_null().all()
    assert (summaries["solver_set"] == "C").all() and (summaries["dataset"] == "arith").all()
    assert summaries["verifier"].unique().to_list() == [m["verifier"]["name"]]
    outcomes = pl.read_parquet(project / "results" / "outcomes" / "margent.parquet")
    keys = ["method", "operating_point", "seed"]
    assert outcomes.select(keys).unique().sort(keys).equals(summaries.select(keys).sort(keys)) and outcomes.height == 120 * summaries.height
    force_all = summaries.filter(pl.col("method") == "margent-force-all").row(0, named=True)
    assert force_all["calls_per_item"] == 3.0
    cand = summaries.filter(pl.col("method") == "margent-candidate")["cost_per_item_usd"][0]
    assert force_all["cost_per_item_usd"] > 3 * cand  # three calls and revisions cost more than the candidate alone

    collect = json.loads((project / "metrics" / "margent_collect.json").read_text())
    traj = run_query(Layout(project), "SELECT method, count(*) AS n FROM trajectories WHERE study = 'margent' GROUP BY method")
    counts = dict(zip(traj["method"], traj["n"], strict=True))
    assert counts["collection"] == collect["collection"]["branches"]  # every branch is a row
    assert {"margent-rho0", "margent-rhoall", "margent-oracle", "margent-force-all"} <= set(counts)
    assert counts["margent-force-all"] == 120 * 4  # three delegations and a commit per item
    dupes = run_query(Layout(project), "SELECT method, seed, episode, step, count(*) AS c FROM trajectories "
                      "WHERE study = 'margent' GROUP BY ALL HAVING count(*) > 1")
    assert dupes.is_empty()  # (study, method, seed, episode, step) is a key
    kinds = run_query(Layout(project), "SELECT json_extract_string(extra, '$.kind') AS k, count(*) AS n FROM trajectories "
                      "WHERE study = 'margent' AND method = 'collection' GROUP BY 1")
    assert set(kinds["k"]) >= {"root", "rescue", "no_change", "corruption"}

    for label in ("0", "0.5", "1", "2", "3", "all"):
        assert (project / "results" / "margent" / "sft" / f"rho={label}.jsonl").stat().st_size > 0
    for name in ("operating_points", "table1", "table2", "rescue_by_difficulty", "rho_seeds", "train_loss"):
        assert pl.read_csv(project / "plots" / "margent" / f"{name}.csv", infer_schema_length=None).height > 0
    assert (project / "plots" / "margent" / "margent.png").stat().st_size > 10_000

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{project / 'mlflow.db'}")
    exp = client.get_experiment_by_name("margent")
    runs = client.search_runs([exp.experiment_id], max_results=500)
    stages = {r.data.tags.get("stage") for r in runs}
    assert stages == {"margent_collect", "margent_train", "margent_eval"}
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags and r.data.tags.get("stage") == "margent_eval"]
    assert len(children) == 12 + 5 and all("eval/accuracy" in r.data.metrics for r in children)


@pytest.mark.slow
def test_changing_rho_or_resamples_reruns_margent_but_collects_the_same_trees(smoke_dag, tmp_path):
    """The three MARGENT stages track the whole `margent` section (one DAG: an experiment where MARGENT
    does not apply names only `margent.enabled`), so any margent key reruns them; the collection does
    not depend on rho or the evaluation's resamples, and comes out byte-identical."""
    project = copy_project(smoke_dag[0], tmp_path / "p")
    assert ran(run([str(BIN / "dvc"), "repro", "margent_eval"], project).stdout) == set()
    collected = (project / "results" / "margent" / "collection.parquet").read_bytes()
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["margent"]["distill"]["rho"] = [0, 1, "all"]
    raw["margent"]["eval"]["resamples"] += 100  # rho and resamples change together: one rerun shows both
    # the replicates (further simulator seeds, sensitivity settings) rerun the whole study: off in
    # this copy, whose reruns are about what a margent key reruns, not about the replicates
    raw["margent"]["eval"].update(simulator_seeds=0, sensitivity=False)
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    out = run([str(BIN / "dvc"), "repro", "margent_eval"], project).stdout
    assert ran(out) == {"margent_collect", "margent_train", "margent_eval"}
    assert (project / "results" / "margent" / "collection.parquet").read_bytes() == collected
    m = json.loads((project / "metrics" / "margent.json").read_text())
    assert set(m["rho"]) == {"0", "1", "all", "paper"}
    # an evaluation key alone still reruns the evaluation (DVC's decision, read from a dry run)
    raw["margent"]["eval"]["resamples"] += 1
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    assert "margent_eval" in ran(run([str(BIN / "dvc"), "repro", "--dry", "margent_eval"], project).stdout)
