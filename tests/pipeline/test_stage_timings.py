"""Every stage writes metrics/timings/<stage>.json (wall and CPU seconds, phases)."""

import json
import shutil
import time
from pathlib import Path

from delegation_lab.pipeline.stage import run_stage

REPO = Path(__file__).resolve().parents[2]


def test_a_stage_writes_its_timings(tmp_path, monkeypatch):
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)

    def body(ctx):
        with ctx.phase("busy"):
            end = time.process_time() + 0.2
            while time.process_time() < end:
                pass

    run_stage("demo", body, argv=["--no-progress"])
    got = json.loads((tmp_path / "metrics" / "timings" / "demo.json").read_text())
    assert got["seconds"] >= 0.2 and got["cpu_seconds"] >= 0.15 and got["phases"]["busy"] >= 0.2
