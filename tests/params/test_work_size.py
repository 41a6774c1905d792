"""Every params value that sizes a study's work checked against an estimate when params load
(`work_size`, bound by `limits.max_memory` and `limits.max_work`): each study refused with one line
naming its keys, the estimate and the bound; every committed params file admitted; the bootstrap's
estimate against a measured peak."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from delegation_lab.params import work_size
from delegation_lab.params.root import deep_merge, parse_params, read_yaml
from delegation_lab.errors import ConfigError
from delegation_lab.games.limits import parse_size

from tests.conftest import BIN, REPO, run
from tests.memory_probe import peak_rss_mib

COMMITTED = [REPO / "params.yaml", *sorted((REPO / "profiles").glob("*.yaml")), *sorted(REPO.glob("experiments/*/params.yaml"))]


def base_params() -> dict:
    return read_yaml(REPO / "params.yaml")


def problems(overlay: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_params(deep_merge(base_params(), overlay))
    return info.value.problems


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_params_file_is_admitted(path: Path):
    raw = read_yaml(path)
    if path.parent.name == "profiles":
        raw = deep_merge(base_params(), raw)
    params = parse_params(raw, str(path))
    for est in work_size.estimates(params):
        assert est.memory <= parse_size(params.limits.max_memory) and est.work <= params.limits.max_work, (est.study, est.memory, est.work)


def test_the_committed_files_are_all_found():
    assert len(COMMITTED) >= 5 and any("experiments" in str(p) for p in COMMITTED)


@pytest.mark.parametrize("overlay, study, key", [
    ({"coordinator": {"episodes": 10**9}}, "coordinator", "coordinator.episodes 1.0e+09"),
    ({"coordinator": {"seeds": 10**6}}, "coordinator", "coordinator.seeds 1000000"),
    ({"market": {"seeds": 10**5}}, "market", "market.seeds 100000"),
    ({"market": {"chain": {"rounds": 10**8}}}, "market", "market.chain.rounds 1.0e+08"),
    ({"credit": {"iterations": 10**8}}, "credit", "credit.iterations 1.0e+08"),
    ({"credit": {"seeds": 10**7}}, "credit", "credit.seeds 1.0e+07"),
    ({"redref": {"judge_noise": {"horizon": 10**8}}}, "redref", "redref.judge_noise.horizon 1.0e+08"),
    ({"redref": {"rq1": {"seeds": 10**8}}}, "redref", "redref.rq1.seeds 1.0e+08"),
    ({"margent": {"collect": {"n_items": 10**8}}}, "margent", "margent.collect.n_items 1.0e+08"),
    ({"margent": {"eval": {"resamples": 10**9}}}, "margent", "margent.eval.resamples 1.0e+09"),
    ({"routers": {"seeds": 10**6}}, "routers", "routers.seeds 1000000"),
    ({"frontier": {"mixture_points": 10**7}}, "frontier", "frontier.mixture_points 1.0e+07"),
    ({"evaluation": {"intervals": {"resamples": 100_000}}, "data": {"test_size": 100_000}}, "evaluation",
     "evaluation.intervals.resamples 100000 x scored items 100000"),
])
def test_each_study_past_the_memory_bound_is_refused_naming_its_keys(overlay: dict, study: str, key: str):
    lines = [line for line in problems(overlay) if line.startswith(f"{study}: ")]
    assert len(lines) == 1, problems(overlay)
    assert key in lines[0] and "need an estimated" in lines[0] and "> limits.max_memory 8.0 GiB" in lines[0]


@pytest.mark.parametrize("overlay, study", [
    ({"routers": {"mlp": {"epochs": 10**9}}}, "routers"),
    ({"margent": {"manager": {"epochs": 10**7}}}, "margent"),
    ({"credit": {"epochs_per_batch": 10**6}}, "credit"),
])
def test_work_past_the_work_bound_is_refused_where_memory_is_not_the_issue(overlay: dict, study: str):
    (line,) = problems(overlay)
    assert line.startswith(f"{study}: ") and "ask for an estimated" in line and "> limits.max_work 1.00e+11" in line


def test_raising_the_bounds_admits_and_a_disabled_study_is_not_sized():
    big = {"coordinator": {"episodes": 20_000, "late_episodes": 100}}
    assert any(line.startswith("coordinator: ") for line in problems(big))
    parse_params(deep_merge(base_params(), {**big, "limits": {"max_memory": "64GiB"}}))
    parse_params(deep_merge(base_params(), {"coordinator": {"enabled": False, "episodes": 10**12}}))


def test_a_lowered_bound_refuses_the_committed_params():
    (line,) = [p for p in problems({"limits": {"max_work": 1000}}) if p.startswith("coordinator")]
    assert "coordinator.seeds 20 x coordinator.episodes 1000" in line and "4.09e+08 lane steps" in line
    assert problems({"limits": {"max_memory": "lots"}}) == [
        "limits.max_memory: Value error, memory size 'lots': expected a number with an optional unit "
        "(B, KB, KiB, MB, MiB, GB, GiB, TB, TiB) (got 'lots')"]


def test_an_integer_past_floats_range_is_refused_not_a_traceback():
    (line,) = problems({"market": {"seeds": 10**400}})
    assert line.startswith("market: market.seeds a 401-digit number need more memory than any machine has")


def test_params_check_exits_2_with_one_line_and_no_traceback(tmp_path: Path):
    path = tmp_path / "params.yaml"
    path.write_text((REPO / "params.yaml").read_text().replace("\n  episodes: 1000 ", "\n  episodes: 1000000000 ", 1))
    assert "\n  episodes: 1000000000 " in path.read_text()
    proc = run([str(BIN / "dlab"), "params", "check", "--path", str(path)], cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "coordinator: coordinator.seeds 20 x coordinator.episodes 1.0e+09" in proc.stderr + proc.stdout


_BOOTSTRAP = """
import numpy as np, sys
from delegation_lab.evaluation.statistics import ItemBootstrap
n, r = int(sys.argv[1]), int(sys.argv[2])
boot = ItemBootstrap(n_items=n, resamples=r)
boot.interval(np.random.default_rng(0).random(n))
"""


def test_the_bootstrap_estimate_matches_its_measured_peak():
    """The per-cell price of `ItemBootstrap` (BOOTSTRAP_BYTES) against the peak RSS of drawing one,
    less the same script's peak on a tiny bootstrap (the interpreter and numpy)."""
    n, r = 20_000, 400
    base, rc0, err0 = peak_rss_mib([sys.executable, "-c", _BOOTSTRAP, "10", "10"])
    peak, rc1, err1 = peak_rss_mib([sys.executable, "-c", _BOOTSTRAP, str(n), str(r)])
    assert rc0 == rc1 == 0, err0 + err1
    measured = (peak - base) * 1024**2
    estimate = n * r * work_size.BOOTSTRAP_BYTES
    assert 0.7 * estimate < measured < 1.3 * estimate, (measured / 1024**2, estimate / 1024**2)


def test_the_step_record_price_matches_its_measured_peak():
    """Coordinator's per-lane-step price (STEP_RECORD_BYTES) against tracemalloc's peak of a
    `StepRecord` filled and read lane-major, as the trajectory writer reads it."""
    import tracemalloc

    import numpy as np

    from delegation_lab.coordinator.envs import StepRecord

    lanes, steps = 16, 4 * StepRecord.chunk  # whole chunks: a run's last partial chunk is noise at study sizes
    values = {k: np.ones(lanes, dtype=d) for k, d in StepRecord.DTYPES.items()}
    tracemalloc.start()
    try:
        record = StepRecord(lanes)
        for _ in range(steps):
            record.add(**values)
        record.lane(0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    per_step = peak / (lanes * steps)
    assert 0.8 * work_size.STEP_RECORD_BYTES < per_step <= work_size.STEP_RECORD_BYTES, per_step


def test_router_folds_past_the_select_split_are_refused_at_params_check(tmp_path: Path):
    """`portfolio.router_folds: 1000000` passed params check and `dlab portfolio` ran on (issue 42)."""
    (line,) = problems({"portfolio": {"router_folds": 1_000_000}})
    assert line.startswith("portfolio: portfolio.router_folds 1000000 > the ") and "portfolio.select_split 'train'" in line
    parse_params(deep_merge(base_params(), {"portfolio": {"router_folds": 1_000_000, "router": None}}))  # no folds then
    path = tmp_path / "params.yaml"
    raw = yaml.safe_load((REPO / "params.yaml").read_text())
    raw.setdefault("portfolio", {})["router_folds"] = 1_000_000
    path.write_text(yaml.safe_dump(raw))
    proc = run([str(BIN / "dlab"), "params", "check", "--path", str(path)], cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "portfolio.router_folds 1000000 >" in proc.stderr
