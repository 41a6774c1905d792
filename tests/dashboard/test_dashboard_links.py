"""Links into Trajectories (dashboards/links.py): built and parsed in one place, round-trip for every
study's way of naming methods and operating points; each point resolves to the partition its study
wrote as holding it (in its files' metadata) or to none, never to another method's; a stale
URL value gets a notice and the defaults."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from dashboards.links import StepsKey, parse_steps, partition_of, point_link, point_of, steps_url
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.store import TrajectoryWriter

# (study, method, operating point, the partition the study writes its steps to), as each study names them
POINTS = [
    ("coordinator", "management.dqn_map", "lambda=10", "management.dqn_map.lambda10"),
    ("coordinator", "management.dqn_map", "lambda=100", "management.dqn_map.lambda100"),
    ("coordinator", "management.dqn_map", "lambda=1.5", "management.dqn_map.lambda1.5"),
    ("coordinator", "management.dqn_map", "lambda=15", "management.dqn_map.lambda15"),
    ("coordinator", "delegation.dqn_nomap", "default", "delegation.dqn_nomap"),
    ("routers", "learned_cascade", "tau=0.3", "learned_cascade.tau_0.3"),
    ("routers", "learned_cascade", "tau=0.7", "learned_cascade.tau_0.7"),
    ("routers", "knn", "tau=0.3", "knn.tau_0.3"),
    ("market", "ccv-truthful", "R0.5x", "ccv-truthful@R0.5x"),
    ("market", "ccv-truthful", "R2x", "ccv-truthful@R2x"),
    ("market", "1p-md", "R0.5x", "1p-md@R0.5x"),
    ("margent", "margent", "rho=0.5", "margent-rho0.5"),
    ("margent", "margent", "rho=1", "margent-rho1"),
    ("margent", "always_commit", "default", "always_commit"),
    ("redref", "cached.thompson", "B=0.5", "cached.thompson.b0.5"),
    ("redref", "cached.thompson", "B=2", "cached.thompson.b2"),
    ("redref", "thompson", "default", "sim.thompson"),
    ("credit", "sharp", "p=0.5", "sharp"),
]
ODD = [("baselines", "cascade:B>A", "default"), ("baselines", "mix:A+B", "p=0.25"), ("market", "ccv-truthful@R0.5x", "R0.5x"),
       ("s p a c e", "a&b=c?d#e", "x=1;y=2"), ("coordinator", "management.dqn_map", "lambda=10")]


@pytest.mark.parametrize(("study", "method", "point"), [p[:3] for p in POINTS] + ODD)
@pytest.mark.parametrize("seed", [None, 0, 17])
def test_a_link_parses_back_to_its_key(study: str, method: str, point: str, seed: int | None) -> None:
    key = StepsKey(study, method, point, seed, "it-007@x.y")
    url = steps_url(key)
    assert url.startswith("trajectories?") and "@" not in url.split("?", 1)[1] and ">" not in url
    query = parse_qs(urlsplit(url).query)
    assert parse_steps(query) == key
    assert parse_steps({k: v[-1] for k, v in query.items()}) == key  # st.query_params gives the last value


def test_a_bad_seed_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="seed='x'"):
        parse_steps({"study": "s", "method": "m", "seed": "x"})
    assert parse_steps({"study": "s"}) is None


def test_every_point_resolves_to_the_partition_its_study_wrote() -> None:
    held = {(study, method, point, seed): partition for study, method, point, partition in POINTS for seed in (0, 2)}
    for study, method, point, partition in POINTS:
        assert partition_of(study, method, point, held) == partition, (study, method, point)
        assert partition_of(study, method, point, held, seed=2) == partition
        assert partition_of(study, method, point, held, seed=1) is None  # no steps at that seed
        assert point_of(study, partition, held) == (method, point)
        key = parse_steps(parse_qs(urlsplit(point_link(study, method, point, 2, "it", held)).query))
        assert key == StepsKey(study, partition, "default", 2, "it")
        assert point_link(study, method, point, 1, "it", held) is None


def test_an_unknown_point_resolves_to_nothing() -> None:
    held = {("coordinator", "management.dqn_map", "lambda=10", 0): "management.dqn_map.lambda10"}
    assert partition_of("coordinator", "management.dqn_map", "lambda=1", held) is None
    assert partition_of("coordinator", "management.dqn_map", "default", held) is None
    assert partition_of("routers", "management.dqn_map", "lambda=10", held) is None  # another study's
    assert point_of("coordinator", "management.dqn_map", held) is None  # a partition name is not a point
    assert point_link("coordinator", "management.fixed_order", "A>B", 0, None, held) is None


# ---------------------------------------------------------------------------------------------
# The Trajectories page opens what a link names, and says so when it cannot

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
APP = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"
PARTITIONS = {"management.dqn_map.lambda10": ("management.dqn_map", "lambda=10"),  # partition -> the point it holds
              "management.dqn_map.lambda100": ("management.dqn_map", "lambda=100"), "best_single.solver_A": None}


@pytest.fixture(scope="module")
def steps_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("links") / "p"
    with TrajectoryWriter(Layout(root), "coordinator") as writer:
        for method, point in PARTITIONS.items():
            for seed in (0, 3):
                writer.add(method, seed, [{"episode": e, "step": 0, "split": "test", "item_id": f"it{e}", "action": "A",
                                           "executors": ["A"], "correct": True, "cost_usd": 0.01, "reward": 1.0,
                                           "calls": 1, "extra": None} for e in range(3)], point)
    return root


def open_trajectories(root: Path, monkeypatch: pytest.MonkeyPatch, **query: str):
    monkeypatch.setenv("DLAB_ROOT", str(root))
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("views/trajectories.py")
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def value_of(at, label: str):
    return next(w for w in at.selectbox if w.label == label).value


def test_a_compare_link_opens_that_method_point_and_seed(steps_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = StepsKey("coordinator", "management.dqn_map", "lambda=10", 3, "it1")
    query = {k: v[-1] for k, v in parse_qs(urlsplit(steps_url(key)).query).items()}
    at = open_trajectories(steps_project, monkeypatch, **query)
    assert not at.warning, [w.value for w in at.warning]
    assert value_of(at, "Method") == "management.dqn_map.lambda10"
    assert value_of(at, "Seed") == 3
    assert value_of(at, "Method to follow") == "management.dqn_map.lambda10"
    assert value_of(at, "Seed to follow") == 3


@pytest.mark.parametrize(("query", "said"), [
    ({"study": "coordinator", "method": "learned_cascade", "op": "tau=0.3"}, "learned_cascade @ tau=0.3"),
    ({"study": "coordinator", "method": "management.dqn_map", "op": "lambda=1"}, "lambda=1"),
    ({"study": "bogus", "method": "management.dqn_map"}, "bogus"),
])
def test_an_unknown_link_says_so_and_shows_the_defaults(steps_project: Path, monkeypatch: pytest.MonkeyPatch,
                                                         query: dict, said: str) -> None:
    at = open_trajectories(steps_project, monkeypatch, **query)
    assert any(said in w.value for w in at.warning), [w.value for w in at.warning]
    assert value_of(at, "Method") == "(all)"  # not silently another method


# ---------------------------------------------------------------------------------------------
# Every outcome point's link lands on a partition holding that point and seed, or there is none
#
# The committed experiments (experiments/*) carry no results/ in a clone (DVC outputs), so this runs
# on the synthetic project of test_dashboard.py plus a coordinator-like study written the way the
# real one names its partitions, with the shapes that used to link elsewhere: a fixed order (no
# steps), a point whose seed has no steps, an operating point no partition names.

COORDINATOR = "coordinator"
# partition -> (method, operating point) of the point whose steps it holds, and its seeds
WRITTEN = {
    "management.dqn_map.lambda10": (("management.dqn_map", "lambda=10"), (0, 1)),
    "management.dqn_map.lambda1.5": (("management.dqn_map", "lambda=1.5"), (0, 1)),
    "management.dqn_map.lambda15": (("management.dqn_map", "lambda=15"), (0,)),  # seed 1 wrote no steps
    "delegation.always_a": (("delegation.always_a", "default"), (0, 1)),
    "delegation.mgmt_policy": (("delegation.mgmt_policy", "default"), (0, 1)),
    "delegation.mgmt_policy_selected": (("delegation.mgmt_policy_selected", "default"), (0, 1)),
}
NO_STEPS = [("management.fixed_order", "A>B>C"), ("management.fixed_order", "B>A"), ("management.dqn_map", "lambda=100"),
            ("delegation.mgmt_policy", "mgmt_policy_selected"), ("margent", "rho=all")]


@pytest.fixture(scope="module")
def links_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from delegation_lab.evaluation.outcomes import write_outcomes
    from tests.dashboard.test_dashboard import build_project

    import polars as pl

    root = build_project(tmp_path_factory.mktemp("point_links") / "p")
    layout = Layout(root)
    outcomes = []
    with TrajectoryWriter(layout, COORDINATOR) as writer:
        for partition, ((method, point), seeds) in WRITTEN.items():
            for seed in seeds:  # each step says which point it belongs to: the test's ground truth
                writer.add(partition, seed, [{"episode": e, "step": 0, "split": "test", "item_id": f"te{e:03d}", "action": "A",
                                              "executors": ["A"], "correct": True, "cost_usd": 0.01, "reward": 1.0, "calls": 1,
                                              "extra": {"method": method, "operating_point": point}} for e in range(3)],
                           (method, point))
    points = [point for point, _ in WRITTEN.values()] + NO_STEPS
    for method, point in points:
        for seed in (0, 1):
            outcomes += [{"study": COORDINATOR, "method": method, "operating_point": point, "seed": seed, "split": "test",
                          "dataset": "synthetic", "verifier": "programmatic", "item_id": f"te{e:03d}", "correct": 1.0,
                          "cost_usd": 0.01} for e in range(3)]
    write_outcomes(layout, COORDINATOR, pl.DataFrame(outcomes))
    write_outcomes(layout, "baselines", pl.DataFrame([  # baselines write outcomes, never steps
        {"study": "baselines", "method": "cascade:B>A", "operating_point": "default", "seed": 0, "split": "test",
         "dataset": "synthetic", "verifier": "programmatic", "item_id": "te000", "correct": 1.0, "cost_usd": 0.01}]))
    return root


def test_every_outcome_point_links_to_its_own_steps_or_not_at_all(links_project: Path) -> None:
    import json

    from dashboards import queries
    from delegation_lab.pipeline.store import connect

    con = connect(Layout(links_project))
    held = queries.trajectory_points(con, str(links_project))
    keys = con.sql("SELECT DISTINCT study, method, operating_point, seed FROM outcomes ORDER BY ALL").fetchall()
    assert {s for s, *_ in keys} >= {"management", COORDINATOR, "baselines"}
    linked = set()
    for study, method, point, seed in keys:
        url = point_link(study, method, point, seed, "te001", held)
        if study == COORDINATOR:
            holder = next((p for p, (of, seeds) in WRITTEN.items() if of == (method, point) and seed in seeds), None)
        else:  # the synthetic study writes one partition per method, at its default point
            holder = method if study == "management" and point == "default" else None
        if holder is None:
            assert url is None, (study, method, point, seed, url)
            continue
        assert url is not None, (study, method, point, seed)
        key = parse_steps(parse_qs(urlsplit(url).query))
        assert (key.study, key.seed, key.item) == (study, seed, "te001")
        folder = links_project / "results" / "trajectories" / f"study={study}" / f"method={key.method}" / f"seed={seed}"
        assert any(folder.glob("*.parquet")), url  # the target partition exists on disk, at that seed
        extras = con.sql("SELECT DISTINCT extra FROM trajectories WHERE study = $s AND method = $m AND seed = $k",
                         params={"s": study, "m": key.method, "k": seed}).fetchall()
        assert extras, url
        if study == COORDINATOR:  # and holds that method and operating point
            assert {(json.loads(e)["method"], json.loads(e)["operating_point"]) for (e,) in extras} == {(method, point)}
        else:
            assert key.method == method
        linked.add((study, method, point, seed))
    assert len(linked) == 4 + sum(len(seeds) for _, seeds in WRITTEN.values())  # 4: management's 2 methods x 2 seeds


def test_a_link_carries_the_seed_that_disagreed() -> None:
    import polars as pl

    from dashboards.paired import disagreeing_seeds

    rows = pl.DataFrame({"seed": [0, 1, 2, 0, 1, 2], "item_id": ["x"] * 3 + ["y"] * 3, "correct": [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]})
    disagreements = pl.DataFrame({"item_id": ["x", "y", "z"], "A − B correct": [0.5, -0.5, 1.0]})
    assert disagreeing_seeds(rows, disagreements, "A") == [1, 1, None]  # right more often on x: first right seed
    assert disagreeing_seeds(rows, disagreements, "B") == [0, 0, None]  # B's rows here: worse on x, better on y


def test_compare_links_open_the_disagreeing_seed_and_none_for_a_point_without_steps(
        links_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import polars as pl

    from dashboards.paired import disagreeing_seeds
    from delegation_lab.pipeline.store import connect
    from tests.dashboard.test_dashboard import frame

    monkeypatch.setenv("DLAB_ROOT", str(links_project))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/compare.py")
    at.query_params.update({"a": "management/random · test", "b": f"{COORDINATOR}/management.fixed_order @ A>B>C · test"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [at.selectbox(key=k).value for k in ("a", "b")] == [at.query_params["a"], at.query_params["b"]]
    table = frame(at, "disagreements_table")
    assert "follow B" not in table.columns  # the fixed order wrote no steps: no link, not another method's
    con = connect(Layout(links_project))
    rows = pl.from_arrow(con.sql("SELECT seed, item_id, correct FROM outcomes WHERE study = 'management' AND method = 'random' "
                                 "AND item_id IN ('te000', 'te001', 'te002')").arrow())
    shown = pl.DataFrame({"item_id": table["item_id"].tolist(), "A − B correct": table["A − B correct"].tolist()})
    expected = disagreeing_seeds(rows, shown, "A")
    assert 1 in expected  # not always seed 0: B is right everywhere, so A's link opens its first wrong seed, 1 on some items
    for url, seed in zip(table["follow A"].tolist(), expected, strict=True):
        key = parse_steps(parse_qs(urlsplit(url).query))
        assert (key.study, key.method, key.seed) == ("management", "random", seed)


# ---------------------------------------------------------------------------------------------
# The same on every study, reproduced: the whole smoke DAG and the DAG on a replayed folder

@pytest.mark.parametrize("dag", ["smoke_dag", "replayed_dag"])
def test_every_outcome_point_of_a_reproduced_dag_links_to_its_own_steps(dag: str, request: pytest.FixtureRequest) -> None:
    """Every outcome point of every study (`links.audit`): the link opens the partition its study
    wrote as holding that point, which exists at that seed and visited only that point's test
    items; a point without a link is one its study wrote no steps for (a study without
    trajectories, a fixed order, a seed it did not record while another seed of the point has steps)."""
    from dashboards import queries
    from dashboards.links import audit
    from delegation_lab.pipeline.store import connect, read_trajectory_points

    project, _ = request.getfixturevalue(dag)
    layout = Layout(project)
    con = connect(layout)
    held = queries.trajectory_points(con, str(project))
    assert held == read_trajectory_points(layout)  # every partition a study named exists at its seeds
    keys = con.sql("SELECT DISTINCT study, method, operating_point, seed FROM outcomes ORDER BY ALL").fetchall()
    assert set(held) <= set(keys)  # and holds a point the study reported
    report = audit(project)
    assert report["wrong"] == [], report["wrong"][:10]
    assert report["linked"] == len(held) and report["linked"] + report["no_steps"] == len(keys) == report["points"]
    with_steps = {s for (s,) in con.sql("SELECT DISTINCT study FROM trajectories").fetchall()}
    assert {k[0] for k in held} >= with_steps & {s for s, *_ in keys}, "a study with steps and outcomes links none of its points"


def test_the_audit_finds_a_point_whose_steps_have_no_link(links_project: Path, tmp_path: Path) -> None:
    """The audit can fail: a study that wrote steps but named no point for them is reported."""
    import shutil

    from dashboards.links import audit

    import polars as pl

    broken = tmp_path / "p"
    shutil.copytree(links_project, broken)
    for part in Layout(broken).trajectories(COORDINATOR).glob("method=management.dqn_map.lambda10/seed=*/*.parquet"):
        pl.read_parquet(part).write_parquet(part)  # the same steps, without the point they hold
    report = audit(broken)
    assert any("management.dqn_map @ lambda=10 seed 0: no link" in w for w in report["wrong"]), report["wrong"]
