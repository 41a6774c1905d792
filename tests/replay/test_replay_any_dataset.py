"""`dvc repro` on any dataset: the whole DAG of the smoke profile on a replayed folder of
correctness-only per-subject CSVs (RouteLLM's MMLU layout). Stages that need `arith` items
(MARGENT's simulated team) skip and say so; those with their own environment (history_game,
credit) run on it and say so; the frontier lists what ran."""

from __future__ import annotations

import csv
import json
import re

import pytest
import yaml
from pathlib import Path

from tests.conftest import REPO, make_project

MODELS = {"A": "org/strong-model", "B": "org/medium-model", "C": "org/weak-model"}
SUBJECTS = {"mmlu_algebra": 500, "mmlu_anatomy": 400, "mmlu_law": 400}  # 1300 = the smoke profile's 200 + 800 + 300


def write_subjects(folder) -> None:
    folder.mkdir()
    for s, (subject, n) in enumerate(SUBJECTS.items()):
        with (folder / f"{subject}.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["prompt", *MODELS.values()])
            for i in range(n):
                h = (i * 7919 + s * 104729) % 100
                w.writerow([f"{subject} question {i}?\nA. yes\nB. no\nAnswer:", h < 85, h < 70, h < 45])


def replay_project(dest: Path, overlay: Path | None = None) -> Path:
    """A project whose three solvers replay the RouteLLM-layout folder `write_subjects` writes
    (`overlay`: as make_project's)."""
    project = make_project(dest, overlay=overlay)
    write_subjects(project / "cache")
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["data"].update(dataset="replay", replay={"path": "cache", "format": "routellm_csv"})
    raw["solvers"] = {
        name: {"backend": "replay", "model": model,
               "price": {"input_usd_per_mtok": p, "output_usd_per_mtok": 2 * p, "source": "test prices"},
               "replay": {"path": "cache", "format": "routellm_csv", "source_model": model}}
        for (name, model), p in zip(MODELS.items(), (1.0, 0.25, 0.05), strict=True)
    }
    raw["label"]["judge"]["sample_size"] = 0
    # nothing is judged, so no judge rates are measured: the shared verifier's rates are configured
    raw["evaluation"]["verifier"].update(false_positive_rate=0.03, false_negative_rate=0.03)
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return project


@pytest.mark.slow
def test_full_dag_on_a_replayed_folder(replayed_dag):
    project, out = replayed_dag
    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    assert set(re.findall(r"Running stage '([^']+)'", out)) == set(stages)

    def metrics(name: str) -> dict:
        return json.loads((project / "metrics" / f"{name}.json").read_text())

    for name in ("margent_collect", "margent_train", "margent"):
        assert "step structure" in metrics(name)["skipped"], name
    assert metrics("history_game")["dataset"].startswith("own")
    assert metrics("credit")["setup"]["dataset"] == "sharp_multihop"
    frontier = metrics("frontier")
    assert "step structure" in frontier["studies"]["margent"]["skipped"]
    for study in ("coordinator", "market", "redref"):
        assert frontier["studies"][study]["ran"] and any(k.startswith(f"{study}/") for k in frontier["methods"])
    assert metrics("labels")["by_method"] == {"imported": 3 * 1300}
    assert set(metrics("ability_map")["A"]["by_bucket"]) == {"1", "2", "3"}  # one bucket per subject
    assert metrics("solve")["A"]["errors"] == 0
