"""Which outcome point a trajectory partition holds is written by the study with the steps (each
file's Parquet metadata), checked against what it wrote and reported, and read back as the one key
of a link into Trajectories (pipeline/store.py, pipeline/study.py); the files read as before."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.store import POINT_KEY, TrajectoryWriter, read_trajectory_points
from delegation_lab.pipeline.study import check_points


def steps(n: int = 2) -> list[dict]:
    return [{"episode": e, "step": 0, "split": "test", "item_id": f"it{e}", "action": "A", "executors": ["A"],
             "correct": True, "cost_usd": 0.01, "reward": 1.0, "calls": 1, "extra": None} for e in range(n)]


def test_each_file_says_which_point_its_partition_holds(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    with TrajectoryWriter(layout, "routers", flush_rows=2) as w:
        w.add("knn.tau_0.3", 0, steps(3), ("knn", "tau=0.3"))
        w.add("knn.tau_0.3", 0, steps(3), ("knn", "tau=0.3"))  # two files
        w.add("knn.tau_0.3", 2, steps(), ("knn", "tau=0.3"))
        w.add("knn.tau_0.5", 1, [], ("knn", "tau=0.5"))  # no rows: no partition, so no point
        w.add("warmup", 0, steps())  # steps of no point
    assert w.points() == {"knn.tau_0.3": {"method": "knn", "operating_point": "tau=0.3", "seeds": [0, 2]}}
    files = sorted(layout.trajectories("routers").glob("method=knn.tau_0.3/seed=*/*.parquet"))
    assert len(files) == 3
    for f in files:
        assert json.loads(pq.read_metadata(f).metadata[POINT_KEY.encode()]) == {"method": "knn", "operating_point": "tau=0.3"}
    assert read_trajectory_points(layout) == {("routers", "knn", "tau=0.3", 0): "knn.tau_0.3",
                                              ("routers", "knn", "tau=0.3", 2): "knn.tau_0.3"}
    # a directory read sees the steps and nothing else (no file beside them)
    frame = pl.read_parquet(layout.trajectories("routers"), hive_partitioning=True)
    assert frame.height == 10 and set(frame["method"]) == {"knn.tau_0.3", "warmup"}


def test_a_rerun_replaces_the_points_with_the_partitions(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    with TrajectoryWriter(layout, "s") as w:
        w.add("a", 0, steps(), ("a", "default"))
    with TrajectoryWriter(layout, "s") as w:
        w.add("b", 0, steps(), ("b", "default"))
    assert read_trajectory_points(layout) == {("s", "b", "default", 0): "b"}
    assert not (layout.trajectories("s") / "method=a").exists()


def test_one_partition_holds_one_point_and_a_point_one_partition(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"s/a: the partition holds \('a', 'x=1'\), not also \('a', 'x=2'\)"):
        with TrajectoryWriter(Layout(tmp_path), "s") as w:
            w.add("a", 0, steps(), ("a", "x=1"))
            w.add("a", 1, steps(), ("a", "x=2"))
    with pytest.raises(InputError, match=r"\('a', 'x=1'\) at seed 0 is in partition 'a1', not also in 'a2'"):
        with TrajectoryWriter(Layout(tmp_path), "s") as w:
            w.add("a1", 0, steps(), ("a", "x=1"))
            w.add("a2", 0, steps(), ("a", "x=1"))
    with pytest.raises(InputError, match="s/a: steps with and without a point in one partition"):
        with TrajectoryWriter(Layout(tmp_path), "s") as w:
            w.add("a", 0, steps())
            w.add("a", 1, steps(), ("a", "x=1"))
    assert not Layout(tmp_path).trajectories("s").exists()  # a failed write leaves nothing half-written


def test_a_point_no_summary_row_reports_is_an_error_naming_it() -> None:
    points = {"knn.tau_0.3": {"method": "knn", "operating_point": "tau=0.3", "seeds": [0, 1]}}
    check_points("routers", points, [{"method": "knn", "operating_point": "tau=0.3", "seed": s} for s in (0, 1, 2)])
    with pytest.raises(InputError, match=r"routers/knn.tau_0.3: hold \('knn', 'tau=0.3'\) at seed\(s\) \[1\]"):
        check_points("routers", points, [{"method": "knn", "operating_point": "tau=0.3", "seed": 0},
                                         {"method": "knn", "operating_point": "tau=0.5", "seed": 1}])


def test_a_broken_point_in_a_files_metadata_is_an_error_naming_it(tmp_path: Path) -> None:
    from delegation_lab.pipeline.tables import write_parquet_atomic

    layout = Layout(tmp_path)
    path = layout.trajectories("s") / "method=a" / "seed=0" / "part-00000.parquet"
    write_parquet_atomic(pl.DataFrame({"episode": [0]}), path, {POINT_KEY: '{"method": "a"}'})
    with pytest.raises(InputError, match=r"study=s/method=a/seed=0/part-00000.parquet: metadata delegation_lab.point"):
        read_trajectory_points(layout)
