"""The Streamlit dashboard (dashboards/app.py) on a small synthetic project, through AppTest.

Every page must render without an exception, show its widgets, and show the numbers the same
question gives when asked of DuckDB directly; an empty project shows a friendly message instead.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from delegation_lab.config import FrontierParams
from delegation_lab.data.items import Item, items_frame
from delegation_lab.frontier import DEFAULT_VERIFIER, build_frontier
from delegation_lab.store import CREDIT_SCHEMA, TrajectoryWriter, connect, frontier_path, write_summaries
from delegation_lab.tables import (
    ANSWERS_SCHEMA,
    LABELS_SCHEMA,
    Layout,
    read_labeled_answers,
    write_json_atomic,
    write_parquet_atomic,
)

streamlit_testing = pytest.importorskip("streamlit.testing.v1")
AppTest = streamlit_testing.AppTest

APP = Path(__file__).resolve().parents[1] / "dashboards" / "app.py"
SOLVERS = {"A": (0.95, 0.0020), "B": (0.80, 0.0004), "C": (0.50, 0.00003)}  # accuracy, cost per answer
METHODS = ["dqn_map", "random"]
SEEDS = [0, 1]
EPISODES = 6
STEPS = 4
STUDY = "management"
SUMMARY_ONLY = "market"
PAPER_METRICS = {
    STUDY: {
        "paper": {"dqn_map": {"late_return_mean": 27.56, "accuracy": 0.9}},
        "dqn_map": {"late_return_mean": 27.1, "accuracy": 0.85},
        "random": {"late_return_mean": 11.0},
    }
}
PAGES = {
    "frontier": "views/frontier.py",
    "studies": "views/studies.py",
    "trajectories": "views/trajectories.py",
    "paper": "views/paper.py",
}


def build_project(root: Path) -> Path:
    """items, answers, labels, trajectories (2 methods x 2 seeds), summaries, the frontier and its
    metrics, and a metrics file with paper figures, all through the library's own writers."""
    layout = Layout(root)
    rng = np.random.default_rng(7)
    items = {
        split: [
            Item(item_id=f"{split[:2]}{k:03d}", split=split, question=f"What is {k} + {k}?", gold=str(2 * k),
                 difficulty=1 + k % 3, domain="arith", source="synthetic", source_id=f"{split}-{k}")
            for k in range(12 if split != "ability" else 4)
        ]
        for split in ("ability", "train", "test")
    }
    for split, rows in items.items():
        write_parquet_atomic(items_frame(rows), layout.items(split))

    now = datetime(2025, 1, 1, tzinfo=UTC)
    labels, truth = [], {}
    for solver, (acc, cost) in SOLVERS.items():
        answers = []
        for item in items["ability"] + items["train"] + items["test"]:
            right = bool(rng.random() < acc)
            truth[(solver, item.item_id)] = right
            answer = item.gold if right else str(int(item.gold) + 1)
            answers.append({
                "solver": solver, "item_id": item.item_id, "request_hash": f"h-{solver}", "role": "answer",
                "backend": "simulated", "model": f"sim-{solver}", "answer_text": f"The answer is {answer}.",
                "parsed_answer": answer, "tokens_in": 40, "tokens_out": 20, "cost_usd": cost, "latency_s": 0.1,
                "error": None, "created_at": now, "extra": None,
            })
            labels.append({
                "solver": solver, "item_id": item.item_id, "request_hash": f"h-{solver}", "correct": right,
                "method": "programmatic", "programmatic": right, "judge_verdict": None, "judge_model": None,
                "judge_tokens": 0,
            })
        write_parquet_atomic(pl.DataFrame(answers, schema=ANSWERS_SCHEMA), layout.answers(solver))
    write_parquet_atomic(pl.DataFrame(labels, schema=LABELS_SCHEMA), layout.labels)

    summaries = []
    with TrajectoryWriter(layout, STUDY) as writer:
        for m, method in enumerate(METHODS):
            for seed in SEEDS:
                rows = []
                for episode in range(EPISODES):
                    for step in range(STEPS):
                        item = items["train"][(episode * STEPS + step + seed) % len(items["train"])]
                        solver = "ABC"[(episode + step + m + seed) % 3] if method == "random" else "BA"[step % 2]
                        right = truth[(solver, item.item_id)]
                        cost = SOLVERS[solver][1]
                        rows.append({
                            "episode": episode, "step": step, "split": "train", "item_id": item.item_id,
                            "action": f"ask:{solver}", "executors": [solver] if step != 3 else [solver, "C"],
                            "correct": right, "cost_usd": cost, "reward": float(right) - 100 * cost,
                            "calls": 1 if step != 3 else 2, "extra": {"q": round(0.1 * step, 1), "episode": episode},
                        })
                writer.add(method, seed, rows)
                summaries.append({
                    "study": STUDY, "method": method, "seed": seed, "split": "test", "operating_point": "default",
                    "accuracy": 0.7 + 0.1 * m + 0.02 * seed, "cost_per_item_usd": 0.0005 + 0.0003 * m + 0.00001 * seed,
                    "calls_per_item": 1.0, "return": 20.0 + seed, "n_items": 12, "dataset": "synthetic",
                    "solver_set": "A,B,C", "run_id": f"run-{method}-{seed}", "verifier": DEFAULT_VERIFIER.name,
                })
    write_summaries(layout, STUDY, summaries)
    credit = [  # `dlab credit` rows: per attempt and agent, the replayed Shapley credit
        {"study": STUDY, "method": method, "seed": seed, "split": "test", "episode": episode, "step": 0, "rollout": 0,
         "item_id": f"te{episode:03d}", "agent": agent, "role": "solver",
         "credit": (0.1 * (k + 1) + 0.01 * seed - 0.05 * (episode % 3)) * (1 if method == "dqn_map" else -1),
         "ci_low": None, "ci_high": None, "v_full": 1.0, "v_empty": 0.0, "n_agents": 3, "estimator": "exact"}
        for method in METHODS for seed in SEEDS for episode in range(EPISODES) for k, agent in enumerate("ABC")
    ]
    write_parquet_atomic(pl.DataFrame(credit, schema=CREDIT_SCHEMA), root / "results" / "credit" / f"{STUDY}.parquet")
    market = [  # a study with summary rows only (no trajectories)
        {"study": SUMMARY_ONLY, "method": "vickrey", "seed": seed, "split": "test", "operating_point": f"reserve={r}",
         "accuracy": 0.6 + 0.1 * r + 0.01 * seed, "cost_per_item_usd": 0.0002 * (1 + r), "calls_per_item": 1.0,
         "n_items": 12, "dataset": "synthetic", "solver_set": "B,C", "run_id": None,
         "verifier": DEFAULT_VERIFIER.name}
        for seed in range(3) for r in (0, 1)
    ]
    write_summaries(layout, SUMMARY_ONLY, market)
    summaries += market

    params = FrontierParams(mixture_points=3)
    labeled = read_labeled_answers(layout).filter(pl.col("split") == params.split)
    table, metrics = build_frontier(labeled, pl.DataFrame(summaries), params, "synthetic")
    write_parquet_atomic(table, frontier_path(layout))
    write_json_atomic({"dataset": "synthetic", "split": params.split, **metrics}, layout.metrics("frontier"))
    write_json_atomic(PAPER_METRICS, layout.metrics(STUDY))
    return root


@pytest.fixture(scope="module")
def synthetic_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_project(tmp_path_factory.mktemp("dashboard") / "project")


@pytest.fixture
def app(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DLAB_ROOT", str(synthetic_project))
    return AppTest.from_file(APP, default_timeout=60)


def open_page(at, page: str):
    at.run()
    if page != "frontier":
        at.switch_page(PAGES[page]).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def sql(root: Path, query: str, **params) -> pl.DataFrame:
    con = connect(Layout(root))
    try:
        return con.sql(query, params=params).pl()
    finally:
        con.close()


def metric(at, label: str) -> str:
    found = [m for m in at.metric if m.label == label]
    assert found, f"no metric {label!r}; have {[m.label for m in at.metric]}"
    return found[0].value


# what tells each st.dataframe of the app apart: (columns it has, columns it lacks)
TABLES = {
    "points_table": ({"on_pareto", "run_ids"}, set()),
    "methods_table": ({"AIQ", "APGR"}, set()),
    "curves_table": ({"return_mean", "cost_mean"}, set()),
    "mix_table": ({"executor", "share"}, set()),
    "summary_table": ({"n_items", "run_ids"}, {"on_pareto"}),
    "steps_table": ({"method", "episode", "extra"}, set()),
    "item_steps_table": ({"episode", "step", "executors"}, {"method"}),
    "answers_table": ({"solver", "parsed_answer"}, set()),
    "paper_table": ({"metric", "paper", "ours", "difference"}, set()),
    "credit_table": ({"mean_credit", "positive_share", "agent"}, set()),
}


def frame(at, key: str):
    """The pandas frame behind the app's st.dataframe(key=...)."""
    has, lacks = TABLES[key]
    found = [df.value for df in at.dataframe if has <= set(df.value.columns) and not lacks & set(df.value.columns)]
    assert len(found) == 1, f"{len(found)} dataframes look like {key!r}"
    return found[0]


def widget(widgets, label: str):
    found = [w for w in widgets if w.label == label]
    assert found, f"no widget {label!r}; have {[w.label for w in widgets]}"
    return found[0]


def test_frontier_page_matches_duckdb(app, synthetic_project: Path) -> None:
    at = open_page(app, "frontier")
    for label in ("Dataset", "Solver set", "Study"):
        assert widget(at.multiselect, label).value, f"{label} should start with everything selected"
    assert widget(at.multiselect, "Study").value == ["baselines", STUDY, SUMMARY_ONLY]

    expected = sql(synthetic_project, "SELECT count(*) AS n, sum(on_pareto::INT) AS k FROM frontier").row(0, named=True)
    assert int(metric(at, "Points shown")) == expected["n"]
    assert int(metric(at, "On the Pareto front")) == expected["k"]
    oracle = sql(synthetic_project, "SELECT accuracy, cost_per_item_usd FROM frontier WHERE kind = 'oracle'").row(0, named=True)
    assert metric(at, "Oracle accuracy") == f"{oracle['accuracy']:.2%}"
    assert metric(at, "Oracle cost per item") == f"${oracle['cost_per_item_usd']:.3g}"

    points = frame(at, "points_table")
    assert len(points) == expected["n"]
    assert set(points["method"]) >= {"always-A", "always-C", "oracle", "dqn_map", "random", "vickrey"}
    dqn = points[points["method"] == "dqn_map"].iloc[0]
    direct = sql(synthetic_project, "SELECT accuracy, accuracy_std, n_seeds, run_ids FROM frontier WHERE method = 'dqn_map'").row(0, named=True)
    assert dqn["accuracy"] == pytest.approx(direct["accuracy"])
    assert dqn["accuracy_std"] == pytest.approx(direct["accuracy_std"])
    assert dqn["n_seeds"] == direct["n_seeds"] == 2
    assert dqn["run_ids"] == direct["run_ids"] == "run-dqn_map-0,run-dqn_map-1"

    methods = frame(at, "methods_table")
    summary = json.loads((synthetic_project / "metrics" / "frontier.json").read_text())
    row = methods[methods["method"] == f"{STUDY}/dqn_map"].iloc[0]
    assert row["AIQ"] == pytest.approx(summary["methods"][f"{STUDY}/dqn_map"]["aiq"])
    assert row["APGR"] == pytest.approx(summary["methods"][f"{STUDY}/dqn_map"]["apgr"])
    assert len(methods) == len(summary["methods"])

    charts = at.get("plotly_chart")
    assert len(charts) == 1
    figure = json.loads(charts[0].proto.spec)
    names = {t.get("name") for t in figure["data"]}
    assert {"oracle", "always-A", "Pareto front", f"{STUDY}/dqn_map"} <= names
    oracle_trace = next(t for t in figure["data"] if t.get("name") == "oracle")
    assert oracle_trace["marker"]["symbol"] == "star"
    assert figure["layout"]["xaxis"]["type"] == "log"
    dqn_trace = next(t for t in figure["data"] if t.get("name") == f"{STUDY}/dqn_map")
    method, op, study, n_seeds, runs = dqn_trace["customdata"][0][:5]
    assert (method, op, study, n_seeds) == ("dqn_map", "default", STUDY, 2)
    assert runs == "run-dqn_map-0, run-dqn_map-1"
    assert "MLflow runs: %{customdata[4]}" in dqn_trace["hovertemplate"]
    # error bars are the item-level bootstrap interval (none here: the fixture study wrote no outcomes)
    ci = sql(synthetic_project, """SELECT coalesce(accuracy_ci_high - accuracy, 0) AS up, coalesce(accuracy - accuracy_ci_low, 0) AS down
                                   FROM frontier WHERE method = 'dqn_map'""").row(0, named=True)
    assert dqn_trace["error_y"]["array"][0] == pytest.approx(ci["up"]) and dqn_trace["error_y"]["arrayminus"][0] == pytest.approx(ci["down"])
    always_a = next(t for t in figure["data"] if t.get("name") == "always-A")
    ci = sql(synthetic_project, "SELECT accuracy_ci_high - accuracy AS up FROM frontier WHERE method = 'always-A'").row(0, named=True)
    assert ci["up"] > 0 and always_a["error_y"]["array"][0] == pytest.approx(ci["up"])
    pareto = next(t for t in figure["data"] if t.get("name") == "Pareto front")
    assert len(pareto["x"]) == expected["k"]
    assert pareto["x"] == sorted(pareto["x"])


def test_frontier_filter_narrows_points(app, synthetic_project: Path) -> None:
    at = open_page(app, "frontier")
    widget(at.multiselect, "Study").set_value([STUDY]).run()
    assert not at.exception
    n = sql(synthetic_project, "SELECT count(*) AS n FROM frontier WHERE study = $s", s=STUDY)["n"][0]
    assert n == 2
    assert int(metric(at, "Points shown")) == n
    assert set(frame(at, "points_table")["method"]) == {"dqn_map", "random"}
    assert len(frame(at, "methods_table")) == 2


def test_studies_page_learning_curves_match_duckdb(app, synthetic_project: Path) -> None:
    at = open_page(app, "studies")
    assert widget(at.selectbox, "Study").value == STUDY
    assert widget(at.selectbox, "Split").value == "train"
    widget(at.number_input, "Episodes per point").set_value(1).run()
    assert not at.exception
    curves = frame(at, "curves_table")
    assert len(curves) == len(METHODS) * EPISODES
    # episode 2 of dqn_map, by hand: per seed the sum of reward / mean correct / sum of cost, then over seeds
    direct = sql(synthetic_project, """
        WITH e AS (SELECT seed, sum(reward) r, avg(correct::DOUBLE) a, sum(cost_usd) c FROM trajectories
                   WHERE study = $s AND method = 'dqn_map' AND episode = 2 GROUP BY seed)
        SELECT avg(r) r, stddev_samp(r) rs, avg(a) a, avg(c) c, count(*) n FROM e""", s=STUDY).row(0, named=True)
    row = curves[(curves["method"] == "dqn_map") & (curves["episode"] == 2)].iloc[0]
    assert row["return_mean"] == pytest.approx(direct["r"])
    assert row["return_std"] == pytest.approx(direct["rs"])
    assert row["accuracy_mean"] == pytest.approx(direct["a"])
    assert row["cost_mean"] == pytest.approx(direct["c"])
    assert row["n_seeds"] == direct["n"] == len(SEEDS)

    mix = frame(at, "mix_table")
    # random asks C at steps where (episode + step + 1 + seed) % 3 == 2, and always at step 3
    direct_share = sql(synthetic_project, """
        SELECT avg(list_contains(executors, 'C')::DOUBLE) s FROM trajectories
        WHERE study = $s AND method = 'random' AND episode = 0""", s=STUDY)["s"][0]
    share = mix[(mix["method"] == "random") & (mix["executor"] == "C") & (mix["episode"] == 0)]["share"].iloc[0]
    assert share == pytest.approx(direct_share)
    assert set(mix["executor"]) == {"A", "B", "C"}

    summary = frame(at, "summary_table")
    direct_acc = sql(synthetic_project, "SELECT avg(accuracy) a FROM summaries WHERE method = 'random'")["a"][0]
    assert summary[summary["method"] == "random"]["accuracy"].iloc[0] == pytest.approx(direct_acc)
    assert len(at.get("plotly_chart")) == 2


def test_studies_page_shows_per_agent_credit(app, synthetic_project: Path) -> None:
    at = open_page(app, "studies")
    table = frame(at, "credit_table")
    direct = sql(synthetic_project, """
        WITH s AS (SELECT method, agent, seed, avg(credit) c, avg((credit > 0)::DOUBLE) pos FROM credit
                   WHERE study = $s GROUP BY ALL)
        SELECT method, agent, avg(c) c, stddev_samp(c) sd, avg(pos) pos FROM s GROUP BY ALL ORDER BY method, agent""", s=STUDY)
    assert len(table) == direct.height == len(METHODS) * 3
    got = table.sort_values(["method", "agent"])
    assert list(got["mean_credit"]) == pytest.approx(direct["c"].to_list())
    assert list(got["credit_std"]) == pytest.approx(direct["sd"].to_list())
    assert list(got["positive_share"]) == pytest.approx(direct["pos"].to_list())
    assert set(got[got["method"] == "random"]["negative_share"]) != {0.0}
    widget(at.selectbox, "Study").set_value(SUMMARY_ONLY).run()
    assert not at.exception
    assert not [df for df in at.dataframe if "mean_credit" in df.value.columns]  # no credit rows: no table


def test_studies_page_buckets_episodes(app, synthetic_project: Path) -> None:
    at = open_page(app, "studies")
    widget(at.number_input, "Episodes per point").set_value(3).run()
    assert not at.exception
    curves = frame(at, "curves_table")
    assert sorted(set(curves["episode"])) == [0, 3]
    direct = sql(synthetic_project, """
        WITH e AS (SELECT seed, episode, avg(correct::DOUBLE) a FROM trajectories
                   WHERE study = $s AND method = 'random' AND episode >= 3 GROUP BY seed, episode),
             b AS (SELECT seed, avg(a) a FROM e GROUP BY seed)
        SELECT avg(a) a FROM b""", s=STUDY)["a"][0]
    row = curves[(curves["method"] == "random") & (curves["episode"] == 3)].iloc[0]
    assert row["accuracy_mean"] == pytest.approx(direct)


def test_studies_page_with_summaries_only(app, synthetic_project: Path) -> None:
    at = open_page(app, "studies")
    assert widget(at.selectbox, "Study").options == [STUDY, SUMMARY_ONLY]
    widget(at.selectbox, "Study").set_value(SUMMARY_ONLY).run()
    assert not at.exception
    assert any("no trajectories" in i.value for i in at.info)
    assert not at.get("plotly_chart")
    summary = frame(at, "summary_table")
    direct = sql(synthetic_project, """SELECT operating_point, avg(accuracy) a, count(*) n FROM summaries
                             WHERE study = $s GROUP BY operating_point ORDER BY operating_point""", s=SUMMARY_ONLY)
    assert list(summary["operating_point"]) == direct["operating_point"].to_list()
    assert list(summary["accuracy"]) == pytest.approx(direct["a"].to_list())
    assert list(summary["n_seeds"]) == direct["n"].to_list() == [3, 3]


def test_trajectories_page_pages_and_follows_an_item(app, synthetic_project: Path) -> None:
    at = open_page(app, "trajectories")
    for label in ("Study", "Method", "Seed", "Item", "Rows per page", "Method to follow", "Seed to follow", "Item to follow"):
        widget(at.selectbox, label)
    total = len(METHODS) * len(SEEDS) * EPISODES * STEPS
    assert metric(at, "Steps matching") == f"{total:,}"
    first = frame(at, "steps_table")
    assert len(first) == min(50, total)

    widget(at.selectbox, "Rows per page").set_value(25).run()
    widget(at.number_input, "Page (of 4)").set_value(2).run()
    assert not at.exception
    page2 = frame(at, "steps_table")
    direct = sql(synthetic_project, """SELECT method, seed, episode, step FROM trajectories
                             ORDER BY method, seed, episode, step LIMIT 25 OFFSET 25""")
    assert len(page2) == 25
    assert list(page2["episode"]) == direct["episode"].to_list()
    assert list(page2["method"]) == direct["method"].to_list()

    widget(at.selectbox, "Method").set_value("random").run()
    widget(at.selectbox, "Seed").set_value(1).run()
    assert not at.exception
    assert metric(at, "Steps matching") == str(EPISODES * STEPS)
    assert widget(at.selectbox, "Method to follow").value == "random"
    assert widget(at.selectbox, "Seed to follow").value == 1

    item = widget(at.selectbox, "Item to follow").value
    steps = frame(at, "item_steps_table")
    direct = sql(synthetic_project, """SELECT episode, step, correct, cost_usd FROM trajectories
                             WHERE study = $s AND method = 'random' AND seed = 1 AND item_id = $i
                             ORDER BY episode, step""", s=STUDY, i=item)
    assert len(steps) == direct.height > 0
    assert list(steps["episode"]) == direct["episode"].to_list()
    assert list(steps["cost_usd"]) == pytest.approx(direct["cost_usd"].to_list())
    answers = frame(at, "answers_table")
    assert sorted(answers["solver"]) == ["A", "B", "C"]
    direct_labels = sql(synthetic_project, "SELECT solver, correct FROM labels WHERE item_id = $i ORDER BY solver", i=item)
    assert list(answers.sort_values("solver")["correct"]) == direct_labels["correct"].to_list()
    shown = at.get("json")
    assert shown and json.loads(shown[0].proto.body)["episode"] == direct["episode"][0]


def test_paper_page_shows_paper_and_ours(app) -> None:
    at = open_page(app, "paper")
    table = frame(at, "paper_table")
    by_metric = table.set_index("metric")
    assert set(by_metric.index) == {f"{STUDY}.dqn_map.late_return_mean", f"{STUDY}.dqn_map.accuracy"}
    assert by_metric.loc[f"{STUDY}.dqn_map.late_return_mean", "paper"] == pytest.approx(27.56)
    assert by_metric.loc[f"{STUDY}.dqn_map.late_return_mean", "ours"] == pytest.approx(27.1)
    assert by_metric.loc[f"{STUDY}.dqn_map.late_return_mean", "difference"] == pytest.approx(27.1 - 27.56)
    assert by_metric.loc[f"{STUDY}.dqn_map.accuracy", "relative difference %"] == pytest.approx(100 * (0.85 - 0.9) / 0.9)
    charts = at.get("plotly_chart")
    assert len(charts) == 1
    bars = json.loads(charts[0].proto.spec)["data"][0]
    assert sorted(bars["y"]) == [f"{STUDY}.dqn_map.accuracy", f"{STUDY}.dqn_map.late_return_mean"]


def test_new_results_show_up_without_restart(synthetic_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache key holds the files' fingerprint: a rewritten metrics file is read again."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(synthetic_project, copy)
    monkeypatch.setenv("DLAB_ROOT", str(copy))
    at = open_page(AppTest.from_file(APP, default_timeout=60), "paper")
    assert frame(at, "paper_table").set_index("metric").loc[f"{STUDY}.dqn_map.late_return_mean", "ours"] == pytest.approx(27.1)
    changed = json.loads(json.dumps(PAPER_METRICS))
    changed[STUDY]["dqn_map"]["late_return_mean"] = 30.5
    write_json_atomic(changed, Layout(copy).metrics(STUDY))
    at.run()
    assert frame(at, "paper_table").set_index("metric").loc[f"{STUDY}.dqn_map.late_return_mean", "ours"] == pytest.approx(30.5)


def test_unreadable_results_give_a_clear_error(synthetic_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(synthetic_project, copy)
    (copy / "results" / "frontier.parquet").write_bytes(b"not parquet at all")
    monkeypatch.setenv("DLAB_ROOT", str(copy))
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert at.error and "Could not read the project's results" in at.error[0].value


@pytest.mark.parametrize("page", list(PAGES))
def test_empty_project_shows_a_friendly_message(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DLAB_ROOT", str(tmp_path))
    at = open_page(AppTest.from_file(APP, default_timeout=60), page)
    assert not at.exception
    assert not at.error
    messages = [i.value for i in at.info]
    assert any(m.startswith("No results yet — run `dvc repro`") for m in messages), messages
    assert not at.get("plotly_chart")
