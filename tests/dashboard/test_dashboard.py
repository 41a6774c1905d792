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

from delegation_lab.params.root import FrontierParams
from delegation_lab.data.items import Item, items_frame
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.frontier.build import DEFAULT_VERIFIER, build_frontier
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import ANSWERS_SCHEMA, CREDIT_SCHEMA, LABELS_SCHEMA
from delegation_lab.pipeline.store import TrajectoryWriter, connect, write_summaries
from delegation_lab.pipeline.tables import read_labeled_answers, read_outcomes, write_json_atomic, write_parquet_atomic

streamlit_testing = pytest.importorskip("streamlit.testing.v1")
AppTest = streamlit_testing.AppTest

APP = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"
SOLVERS = {"A": (0.95, 0.0020), "B": (0.80, 0.0004), "C": (0.50, 0.00003)}  # accuracy, cost per answer
METHODS = ["dqn_map", "random"]
SEEDS = [0, 1]
EPISODES = 6
STEPS = 4
STUDY = "management"
SUMMARY_ONLY = "market"
CROWD = "crowd"  # many methods: the executor-mix chart needs more panel rows than a fixed spacing allows
GAME = "game"  # steps without `correct` or `cost_usd` (like history_game), on splits train and eval
CROWD_METHODS = [f"m{k:02d}" for k in range(21)]
ENV_STUDY, ENV_DATASET = "envsim", "sim_env"  # a study on its own task: a second frontier dataset
PAPER_METRICS = {
    STUDY: {
        "paper": {"dqn_map": {"late_return_mean": 27.56, "accuracy": 0.9}},
        "dqn_map": {"late_return_mean": 27.1, "accuracy": 0.85},
        "random": {"late_return_mean": 11.0},
    }
}
GAME_PAPER = {  # spreads, p-values, counts, a zero and a worded claim: none of them charted
    GAME: {
        "paper": {"gain": 10.0, "gain_std": 0.1, "wilcoxon_p": 0.01, "history": {"count": 5}, "helps": 0.0,
                  "big": 1.0, "claim": "positive, unbounded"},
        "gain": 10.3, "gain_std": 0.9, "wilcoxon_p": 0.02, "history": {"count": 5}, "helps": 0.0, "big": 89.0, "claim": 2.5,
    }
}
PAGES = {
    "frontier": "views/frontier.py",
    "studies": "views/studies.py",
    "trajectories": "views/trajectories.py",
    "compare": "views/compare.py",
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
    labels, truth, outcomes = [], {}, []
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
                writer.add(method, seed, rows, (method, "default"))  # the steps of the point its outcomes name
                held_out = []  # item-level outcomes on test: the frontier's intervals and the compare page
                for item in items["test"]:
                    solver = "A" if method == "dqn_map" and int(item.item_id[2:]) % 3 == 0 else "BC"[(m + seed + int(item.item_id[2:])) % 2]
                    held_out.append({"study": STUDY, "method": method, "operating_point": "default", "seed": seed,
                                     "split": "test", "dataset": "synthetic", "verifier": DEFAULT_VERIFIER.name,
                                     "item_id": item.item_id, "correct": float(truth[(solver, item.item_id)]),
                                     "cost_usd": SOLVERS[solver][1]})
                outcomes += held_out
                summaries.append({
                    "study": STUDY, "method": method, "seed": seed, "split": "test", "operating_point": "default",
                    "accuracy": float(np.mean([o["correct"] for o in held_out])),
                    "cost_per_item_usd": float(np.mean([o["cost_usd"] for o in held_out])),
                    "calls_per_item": 1.0, "return": 20.0 + seed, "n_items": 12, "dataset": "synthetic",
                    "solver_set": "A,B,C" if m == 0 else "C,B,A", "run_id": f"run-{method}-{seed}", "verifier": DEFAULT_VERIFIER.name,
                })
    write_summaries(layout, STUDY, summaries)
    write_outcomes(layout, STUDY, pl.DataFrame(outcomes))
    with TrajectoryWriter(layout, CROWD) as writer:
        for k, method in enumerate(CROWD_METHODS):
            writer.add(method, 0, [
                {"episode": e, "step": 0, "split": "train", "item_id": items["train"][e].item_id, "action": "ABC"[(k + e) % 3],
                 "executors": ["ABC"[(k + e) % 3]], "correct": True, "cost_usd": 0.001, "reward": 1.0, "calls": 1, "extra": None}
                for e in range(3)
            ])
    with TrajectoryWriter(layout, GAME) as writer:
        for method in ("spe", "markov"):
            for split in ("train", "eval"):
                writer.add(method, 0 if split == "train" else 1, [
                    {"episode": e, "step": t, "split": split, "item_id": None, "action": "Yes" if (e + t) % 2 else "Null",
                     "executors": [], "correct": None, "cost_usd": None, "reward": float(e - t), "calls": 0, "extra": None}
                    for e in range(4) for t in range(2)
                ])
    env = [{"study": ENV_STUDY, "method": f"planner{k}", "seed": 0, "split": "test", "operating_point": "default",
            "accuracy": 0.3 + 0.1 * k, "cost_per_item_usd": 0.01 * (1 + k % 2) * (1 + k), "calls_per_item": 2.0,
            "n_items": 50, "dataset": ENV_DATASET, "solver_set": None, "run_id": f"env-{k}", "verifier": "environment"}
           for k in range(3)]
    write_summaries(layout, ENV_STUDY, env)
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
    summaries += market + env

    params = FrontierParams(mixture_points=3)
    labeled = read_labeled_answers(layout).filter(pl.col("split") == params.split)
    table, metrics = build_frontier(labeled, pl.DataFrame(summaries), params, "synthetic",
                                    outcomes=read_outcomes(Layout(root)))
    write_parquet_atomic(table, layout.frontier)
    write_json_atomic({"dataset": "synthetic", "split": params.split, **metrics}, layout.metrics("frontier"))
    write_json_atomic(PAPER_METRICS, layout.metrics(STUDY))
    write_json_atomic(GAME_PAPER, layout.metrics(GAME))
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
    "compare_table": ({"quantity", "A − B", "p-value"}, set()),
    "disagreements_table": ({"item_id", "correct_a", "follow A"}, set()),
    "paper_overview": ({"study", "rows"}, {"metric"}),
    "credit_table": ({"mean_credit", "positive_share", "agent"}, set()),
    "slices_table": ({"items", "A − B accuracy"}, set()),
    "frontier_slices_table": ({"point", "items", "accuracy low", "cost low"}, set()),
    "tied_table": ({"study", "method", "operating_point", "accuracy", "cost_per_item_usd"}, {"kind", "split"}),
}


def frame(at, key: str):
    """The pandas frame behind the app's st.dataframe(key=...)."""
    keyed = [df.value for df in at.dataframe if getattr(df, "key", None) == key]
    if keyed:
        return keyed[0]
    has, lacks = TABLES[key]
    found = [df.value for df in at.dataframe if has <= set(df.value.columns) and not lacks & set(df.value.columns)]
    assert len(found) == 1, f"{len(found)} dataframes look like {key!r}"
    return found[0]


def widget(widgets, label: str):
    found = [w for w in widgets if w.label == label]
    assert found, f"no widget {label!r}; have {[w.label for w in widgets]}"
    return found[0]


MAIN = "SELECT * FROM frontier WHERE dataset = 'synthetic' AND NOT (kind = 'oracle' AND study <> 'baselines')"


def test_frontier_page_matches_duckdb(app, synthetic_project: Path) -> None:
    at = open_page(app, "frontier")
    at.radio(key="view").set_value("All operating points").run()
    assert widget(at.selectbox, "Dataset").value == "synthetic"  # the cached answers' dataset (metrics/frontier.json)
    assert widget(at.selectbox, "Dataset").options == [ENV_DATASET, "synthetic"]
    assert widget(at.selectbox, "Verifier").value == DEFAULT_VERIFIER.name
    assert widget(at.multiselect, "Study").value == ["baselines", STUDY, SUMMARY_ONLY]
    solver_filters = [w.label for w in at.multiselect if "olver" in w.label]
    assert solver_filters == ["Solvers taking part (3)"], solver_filters  # one solver filter
    assert widget(at.multiselect, "Solvers taking part (3)").value == ["A", "B", "C"]
    assert "synthetic" in at.title[0].value and "test split" in at.title[0].value

    expected = sql(synthetic_project, f"SELECT count(*) AS n, sum(on_pareto::INT) AS k FROM ({MAIN})").row(0, named=True)
    assert int(metric(at, "Points shown")) == expected["n"]
    assert int(metric(at, "On the Pareto front")) == expected["k"]  # all points shown: the stage's own front
    oracle = sql(synthetic_project, "SELECT accuracy, cost_per_item_usd FROM frontier WHERE kind = 'oracle'").row(0, named=True)
    assert metric(at, "Oracle accuracy") == f"{oracle['accuracy']:.2%}"
    assert metric(at, "Oracle cost per item") == f"${oracle['cost_per_item_usd']:.3g}"

    points = frame(at, "points_table")
    assert len(points) == expected["n"]
    assert set(points["method"]) >= {"always-A", "always-C", "oracle", "dqn_map", "random", "vickrey"}
    assert ENV_STUDY not in set(points["study"])  # another task: another frontier
    dqn = points[points["method"] == "dqn_map"].iloc[0]
    direct = sql(synthetic_project, "SELECT accuracy, accuracy_std, n_seeds FROM frontier WHERE method = 'dqn_map'").row(0, named=True)
    assert dqn["accuracy"] == pytest.approx(direct["accuracy"])
    assert dqn["accuracy_std"] == pytest.approx(direct["accuracy_std"])
    assert dqn["n_seeds"] == direct["n_seeds"] == 2
    assert dqn["run_ids"] == "run-dqn_map-0,run-dqn_map-1"  # joined from the run index (results/runs)

    methods = frame(at, "methods_table")
    summary = json.loads((synthetic_project / "metrics" / "frontier.json").read_text())
    row = methods[methods["method"] == f"{STUDY}/dqn_map"].iloc[0]
    assert row["AIQ"] == pytest.approx(summary["methods"][f"{STUDY}/dqn_map"]["aiq"])
    assert row["APGR"] == pytest.approx(summary["methods"][f"{STUDY}/dqn_map"]["apgr"])
    assert len(methods) == len(summary["methods"])

    charts = at.get("plotly_chart")
    assert len(charts) == 1
    figure = json.loads(charts[0].proto.spec)
    assert json.loads(charts[0].proto.config)["toImageButtonOptions"]["format"] == "svg"
    names = [t.get("name") for t in figure["data"]]
    assert {"oracle", "always-A", "Pareto front", "dqn_map", "random", "vickrey", "random mixtures"} <= set(names)
    legend = [(t.get("legendgroup"), t.get("name")) for t in figure["data"] if t.get("showlegend") is not False]
    assert len(legend) == len(set(legend)), "one legend entry per method, grouped by study"
    assert {t["legendgroup"] for t in figure["data"] if t.get("name") in ("dqn_map", "random")} == {STUDY}
    assert {t.get("legendgrouptitle", {}).get("text") for t in figure["data"] if t.get("name") == "vickrey"} == {SUMMARY_ONLY}
    oracle_trace = next(t for t in figure["data"] if t.get("name") == "oracle")
    assert oracle_trace["marker"]["symbol"] == "star" and len(oracle_trace["x"]) == 1
    assert figure["layout"]["xaxis"]["type"] == "log"
    assert "synthetic" in figure["layout"]["title"]["text"] and "test split" in figure["layout"]["title"]["text"]
    study_trace = next(t for t in figure["data"] if t.get("name") == "dqn_map")
    k = next(i for i, c in enumerate(study_trace["customdata"]) if c[0] == "dqn_map")
    method, op, study, n_seeds, runs = study_trace["customdata"][k][:5]
    assert (method, op, study, n_seeds) == ("dqn_map", "default", STUDY, 2)
    assert runs == "run-dqn_map-0, run-dqn_map-1"
    assert "MLflow runs: %{customdata[4]}" in study_trace["hovertemplate"]
    # error bars are the item-level bootstrap interval of results/frontier.parquet
    ci = sql(synthetic_project, """SELECT accuracy_ci_high - accuracy AS up, accuracy - accuracy_ci_low AS down,
                                          cost_ci_high - cost_per_item_usd AS right
                                   FROM frontier WHERE method = 'dqn_map'""").row(0, named=True)
    assert ci["up"] > 0 and study_trace["error_y"]["array"][k] == pytest.approx(ci["up"])
    assert study_trace["error_y"]["arrayminus"][k] == pytest.approx(ci["down"])
    assert study_trace["error_x"]["array"][k] == pytest.approx(ci["right"])
    single = next(t for t in figure["data"] if t.get("name") == "always-A")
    always_a = single["customdata"].index(next(c for c in single["customdata"] if c[0] == "always-A"))
    ci = sql(synthetic_project, "SELECT accuracy_ci_high - accuracy AS up FROM frontier WHERE method = 'always-A'").row(0, named=True)
    assert ci["up"] > 0 and single["error_y"]["array"][always_a] == pytest.approx(ci["up"])
    pareto = next(t for t in figure["data"] if t.get("name") == "Pareto front")
    assert len(pareto["x"]) == expected["k"]
    assert pareto["x"] == sorted(pareto["x"])


def test_points_under_a_simulated_verifier_say_it_is_not_deployable(app, synthetic_project: Path) -> None:
    """The synthetic project's verifier is a judge with chosen rates: a study point and a cascade rest on it."""
    at = open_page(app, "frontier")
    at.radio(key="view").set_value("All operating points").run()
    assert any("not deployable" in i.value and DEFAULT_VERIFIER.name in i.value for i in at.info)
    points = frame(at, "points_table")
    assert set(points[points["method"] == "dqn_map"]["verifier_note"]) == {"simulated verifier: not deployable"}
    assert set(points[points["kind"] == "cascade"]["verifier_note"]) == {"simulated verifier: not deployable"}
    assert set(points[points["kind"] == "single"]["verifier_note"]) == {"—"}  # a single takes no accept decision
    assert not points[points["method"] == "dqn_map"]["verifier_deployable"].any()
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    hover = next(t for t in figure["data"] if t.get("name") == "dqn_map")["customdata"][0][9]
    assert hover == f"{DEFAULT_VERIFIER.name} — simulated verifier: not deployable"
    methods = frame(at, "methods_table")
    assert methods[methods["method"] == f"{STUDY}/dqn_map"]["verifier"].item() == "simulated verifier: not deployable"


# a point is on the front of the shown points iff no other shown contender costs no more and is at
# least as accurate, one of the two strictly (the definition, in SQL)
PARETO_SQL = """
    WITH shown AS ({shown}), c AS (SELECT * FROM shown WHERE kind <> 'oracle')
    SELECT method, operating_point, study FROM c x
    WHERE NOT EXISTS (SELECT 1 FROM c y WHERE y.cost_per_item_usd <= x.cost_per_item_usd AND y.accuracy >= x.accuracy
                      AND (y.cost_per_item_usd < x.cost_per_item_usd OR y.accuracy > x.accuracy))
      AND NOT EXISTS (SELECT 1 FROM c y WHERE y.cost_per_item_usd = x.cost_per_item_usd AND y.accuracy = x.accuracy
                      AND (y.study, y.method, y.operating_point) < (x.study, x.method, x.operating_point))
    ORDER BY study, method, operating_point"""


def test_frontier_filter_recomputes_the_pareto_front(app, synthetic_project: Path) -> None:
    at = open_page(app, "frontier")
    widget(at.multiselect, "Study").set_value([STUDY]).run()
    assert not at.exception
    shown = f"SELECT * FROM frontier WHERE study = '{STUDY}'"
    n = sql(synthetic_project, f"SELECT count(*) AS n FROM ({shown})")["n"][0]
    assert n == 2
    assert int(metric(at, "Points shown")) == n
    points = frame(at, "points_table")
    assert set(points["method"]) == {"dqn_map", "random"}
    assert len(frame(at, "methods_table")) == 2
    front = sql(synthetic_project, PARETO_SQL.format(shown=shown))
    assert not sql(synthetic_project, f"SELECT bool_or(on_pareto) AS any FROM ({shown})")["any"][0], "off the full front"
    assert front.height == 1  # ...but the cheaper of the two leads once the baselines are hidden
    assert sorted(points[points["on_pareto"]]["method"]) == front["method"].to_list()
    assert int(metric(at, "On the Pareto front")) == front.height


def test_studies_page_learning_curves_match_duckdb(app, synthetic_project: Path) -> None:
    at = open_page(app, "studies")
    assert widget(at.selectbox, "Study").value == CROWD  # the first study in name order
    widget(at.selectbox, "Study").set_value(STUDY).run()
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
    widget(at.selectbox, "Study").set_value(STUDY).run()
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
    widget(at.selectbox, "Study").set_value(STUDY).run()
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


def test_studies_page_smoothing_draws_the_smoothed_curve_and_keeps_the_raw_table(app) -> None:
    import json

    import numpy as np

    from dashboards.smoothing import debiased_ema

    at = open_page(app, "studies")
    widget(at.selectbox, "Study").set_value(STUDY).run()
    widget(at.number_input, "Episodes per point").set_value(1).run()
    raw = frame(at, "curves_table")
    widget(at.slider, "Smoothing").set_value(0.8).run()
    assert not at.exception
    assert frame(at, "curves_table").equals(raw)  # the table stays raw
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    drawn = next(t for t in figure["data"] if t.get("name") == "dqn_map" and t.get("mode") == "lines"
                 and "customdata" in t)  # the mean line of the first panel (return)
    expected = debiased_ema(raw[raw["method"] == "dqn_map"].sort_values("episode")["return_mean"].to_numpy(), 0.8)
    assert np.allclose(drawn["y"], expected)


def test_studies_page_with_summaries_only(app, synthetic_project: Path) -> None:
    at = open_page(app, "studies")
    assert widget(at.selectbox, "Study").options == sorted([CROWD, ENV_STUDY, GAME, STUDY, SUMMARY_ONLY])
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
    widget(at.selectbox, "Study").set_value(STUDY).run()
    for label in ("Study", "Method", "Seed", "Rows per page", "Method to follow", "Seed to follow"):
        widget(at.selectbox, label)
    widget(at.text_input, "Search item id")
    total = len(METHODS) * len(SEEDS) * EPISODES * STEPS
    assert metric(at, "Steps matching") == f"{total:,}"
    first = frame(at, "steps_table")
    assert len(first) == min(50, total)

    widget(at.selectbox, "Rows per page").set_value(25).run()
    widget(at.number_input, "Page (of 4)").set_value(2).run()
    assert not at.exception
    page2 = frame(at, "steps_table")
    direct = sql(synthetic_project, """SELECT method, seed, episode, step FROM trajectories WHERE study = $s
                             ORDER BY method, seed, episode, step LIMIT 25 OFFSET 25""", s=STUDY)
    assert len(page2) == 25
    assert list(page2["episode"]) == direct["episode"].to_list()
    assert list(page2["method"]) == direct["method"].to_list()

    widget(at.selectbox, "Method").set_value("random").run()
    widget(at.selectbox, "Seed").set_value(1).run()
    assert not at.exception
    assert metric(at, "Steps matching") == str(EPISODES * STEPS)
    assert widget(at.selectbox, "Method to follow").value == "random"
    assert widget(at.selectbox, "Seed to follow").value == 1

    # one item selection: the search finds it, the steps table and "follow one item" both use it
    item = sql(synthetic_project, """SELECT min(item_id) AS i FROM trajectories
                                     WHERE study = $s AND method = 'random' AND seed = 1""", s=STUDY)["i"][0]
    widget(at.text_input, "Search item id").set_value(item).run()
    assert not at.exception
    picker = next(w for w in at.selectbox if w.label.startswith("Item ("))
    assert picker.value == item and picker.label.startswith("Item (1 match")
    steps = frame(at, "item_steps_table")
    direct = sql(synthetic_project, """SELECT episode, step, correct, cost_usd FROM trajectories
                             WHERE study = $s AND method = 'random' AND seed = 1 AND item_id = $i
                             ORDER BY episode, step""", s=STUDY, i=item)
    assert len(steps) == direct.height > 0
    assert metric(at, "Steps matching") == str(direct.height)
    assert list(steps["episode"]) == direct["episode"].to_list()
    assert list(steps["cost_usd"]) == pytest.approx(direct["cost_usd"].to_list())
    answers = frame(at, "answers_table")
    assert sorted(answers["solver"]) == ["A", "B", "C"]
    direct_labels = sql(synthetic_project, "SELECT solver, correct FROM labels WHERE item_id = $i ORDER BY solver", i=item)
    assert list(answers.sort_values("solver")["correct"]) == direct_labels["correct"].to_list()
    shown = at.get("json")
    assert shown and json.loads(shown[0].proto.body)["episode"] == direct["episode"][0]
    assert at.query_params["item"] == [item] or at.query_params["item"] == item


def paper_frames(at) -> dict:
    """study -> the pandas frame of its paper-vs-ours table."""
    return {df.value["metric"].iloc[0].split(".")[0]: df.value for df in at.dataframe
            if {"metric", "paper", "ours", "difference"} <= set(df.value.columns) and len(df.value)}


def test_paper_page_shows_paper_and_ours(app) -> None:
    at = open_page(app, "paper")
    table = paper_frames(at)[STUDY]
    by_metric = table.set_index("metric")
    assert set(by_metric.index) == {f"{STUDY}.dqn_map.late_return_mean", f"{STUDY}.dqn_map.accuracy"}
    assert by_metric.loc[f"{STUDY}.dqn_map.late_return_mean", "paper"] == pytest.approx(27.56)
    assert by_metric.loc[f"{STUDY}.dqn_map.late_return_mean", "ours"] == pytest.approx(27.1)
    assert by_metric.loc[f"{STUDY}.dqn_map.late_return_mean", "difference"] == pytest.approx(27.1 - 27.56)
    assert by_metric.loc[f"{STUDY}.dqn_map.accuracy", "relative difference %"] == pytest.approx(100 * (0.85 - 0.9) / 0.9)
    assert set(by_metric["provenance"]) == {"computed"}
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 2  # management and game
    bars = next(c for c in charts if any(f"{STUDY}." in y for t in c["data"] for y in t["y"]))
    assert sorted(y for t in bars["data"] for y in t["y"]) == [f"{STUDY}.dqn_map.accuracy", f"{STUDY}.dqn_map.late_return_mean"]


def test_new_results_show_up_without_restart(synthetic_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache key holds the files' fingerprint: a rewritten metrics file is read again."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(synthetic_project, copy)
    monkeypatch.setenv("DLAB_ROOT", str(copy))
    at = open_page(AppTest.from_file(APP, default_timeout=60), "paper")
    assert paper_frames(at)[STUDY].set_index("metric").loc[f"{STUDY}.dqn_map.late_return_mean", "ours"] == pytest.approx(27.1)
    changed = json.loads(json.dumps(PAPER_METRICS))
    changed[STUDY]["dqn_map"]["late_return_mean"] = 30.5
    write_json_atomic(changed, Layout(copy).metrics(STUDY))
    at.run()
    assert paper_frames(at)[STUDY].set_index("metric").loc[f"{STUDY}.dqn_map.late_return_mean", "ours"] == pytest.approx(30.5)


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
