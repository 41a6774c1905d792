"""The dashboard answers a researcher's questions with the numbers DuckDB gives: the best method
under a budget, A versus B on the same items (paired bootstrap), a view shared by its URL, and
every page of every study x split x dataset the results hold renders without an exception."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from dashboards import charts, queries
from dashboards.links import StepsKey, steps_url
from dashboards.paired import p_value_text
from delegation_lab.evaluation.params import IntervalParams, TieParams
from delegation_lab.evaluation.statistics import ItemBootstrap, paired_bootstrap
from tests.dashboard.test_dashboard import (
    CROWD,
    CROWD_METHODS,
    ENV_DATASET,
    ENV_STUDY,
    GAME,
    STUDY,
    AppTest,
    frame,
    metric,
    open_page,
    sql,
    widget,
)
from tests.dashboard.test_dashboard import APP, app, synthetic_project  # noqa: F401 - the fixtures

pytest.importorskip("streamlit.testing.v1")


# ---------------------------------------------------------------------------------------------
# Budget slider


BEST_SQL = """SELECT study, method, operating_point, accuracy, cost_per_item_usd, accuracy_ci_low, accuracy_ci_high
              FROM frontier WHERE dataset = $d AND kind <> 'oracle' AND cost_per_item_usd <= $b
              ORDER BY accuracy DESC, cost_per_item_usd, study, method LIMIT 1"""


def winner_shown(at) -> str:
    """The full name under "Best under budget" (wrapping text, not a metric that cuts it off)."""
    found = [m.value for m in at.markdown if m.value.startswith("**Best under budget**")]
    assert found, "no 'Best under budget'"
    return found[0].split("\n\n", 1)[1].strip("`")


@pytest.mark.parametrize("rank", [0, 3, -1])  # the cheapest stop, one in between, the most expensive
def test_budget_slider_names_the_best_method_duckdb_does(app, synthetic_project: Path, rank: int) -> None:  # noqa: F811
    at = open_page(app, "frontier")
    at.radio(key="view").set_value("All operating points").run()
    slider = widget(at.select_slider, "Budget (US$ per item)")
    costs = sql(synthetic_project, """SELECT DISTINCT cost_per_item_usd AS c FROM frontier
                                      WHERE dataset = 'synthetic' AND kind <> 'oracle' ORDER BY c""")["c"].to_list()
    stops = [float(v[1:]) for v in slider.options]  # "$0.000308" labels
    ratios = np.diff(np.log10(stops))
    assert stops[0] == pytest.approx(costs[0], rel=5e-3) and stops[-1] == pytest.approx(costs[-1], rel=5e-3)
    assert ratios.max() <= 1 / 12 + 0.01 and ratios.min() > 0  # evenly spaced in log dollars, 12 a decade
    assert len(stops) > 20
    budget = {0: costs[0], -1: costs[-1]}.get(rank) or stops[rank]
    slider.set_value(budget).run()
    assert not at.exception
    best = sql(synthetic_project, BEST_SQL, d="synthetic", b=budget).row(0, named=True)
    name = best["method"] if best["study"] == "baselines" else f"{best['study']}/{best['method']}"
    shown = winner_shown(at)
    assert shown == name or shown.startswith(f"{name} @ ")
    assert metric(at, "Its accuracy") == f"{best['accuracy']:.2%}"
    assert metric(at, "Its cost per item") == f"${best['cost_per_item_usd']:.3g}"
    caption = next(c.value for c in at.caption if c.value.startswith("Accuracy interval"))
    assert f"[{best['accuracy_ci_low']:.2%}, {best['accuracy_ci_high']:.2%}]" in caption
    assert float(at.query_params["budget"][0] if isinstance(at.query_params["budget"], list) else at.query_params["budget"]) == budget
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    line = next(t for t in figure["data"] if t.get("name", "").startswith("budget $"))
    assert line["x"] == [budget, budget]  # the budget drawn on the chart
    tied = sql(synthetic_project, """SELECT DISTINCT study, method FROM frontier WHERE dataset = 'synthetic' AND kind <> 'oracle'
                                     AND cost_per_item_usd <= $b AND accuracy_ci_high >= $lo AND NOT (study = $s AND method = $m)""",
               b=budget, lo=best["accuracy_ci_low"], s=best["study"], m=best["method"])
    if tied.height:
        table = frame(at, "tied_table")
        assert sorted(zip(table["study"], table["method"], strict=True)) == sorted(tied.iter_rows())
        costs = table["cost_per_item_usd"].to_list()
        assert costs == sorted(costs)  # cheapest first, with the cost shown
        note = next(m.value for m in at.markdown if m.value.startswith("**Tied within their intervals**"))
        cheapest = table.iloc[0]
        if cheapest["cost_per_item_usd"] < best["cost_per_item_usd"]:
            assert "Cheapest within the winner's interval: " in note and f"at ${cheapest['cost_per_item_usd']:.3g} per item" in note
        else:
            assert "The winner is the cheapest option within its interval" in note


def test_budget_slider_follows_the_dataset(app, synthetic_project: Path) -> None:
    at = open_page(app, "frontier")
    widget(at.selectbox, "Dataset").set_value(ENV_DATASET).run()
    assert not at.exception
    budget = sql(synthetic_project, "SELECT max(cost_per_item_usd) AS b FROM frontier WHERE dataset = $d", d=ENV_DATASET)["b"][0]
    best = sql(synthetic_project, BEST_SQL, d=ENV_DATASET, b=budget).row(0, named=True)
    assert winner_shown(at) == f"{ENV_STUDY}/{best['method']}"
    assert f"{ENV_DATASET} · test split" in at.title[0].value
    assert int(metric(at, "Points shown")) == sql(synthetic_project, "SELECT count(*) n FROM frontier WHERE dataset = $d", d=ENV_DATASET)["n"][0]
    assert not [m for m in at.metric if m.label == "Oracle accuracy"]  # this task has no oracle


def test_highlight_names_the_picked_method(app) -> None:
    at = open_page(app, "frontier")
    at.radio(key="zoom").set_value("off").run()
    widget(at.multiselect, "Highlight methods").set_value([f"{STUDY}/dqn_map"]).run()
    assert not at.exception
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    marked = next(t for t in figure["data"] if t.get("name") == f"highlighted: {STUDY}/dqn_map")
    labels = next(t for t in figure["data"] if t.get("name") == "labels")
    assert labels["text"][0] == f"{STUDY}/dqn_map"  # highlighted names are placed first
    assert {"<b>A</b>", "<b>B</b>", "<b>C</b>"} <= set(labels["text"])  # the single models are labelled
    others = [t for t in figure["data"] if t.get("mode") == "markers" and not t["name"].startswith("highlighted")]
    assert others and all(t["marker"]["opacity"] < 0.5 for t in others)
    widget(at.multiselect, "Highlight methods").set_value([f"{STUDY}/dqn_map", f"{STUDY}/random"]).run()
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    rings = [t["marker"]["symbol"] for t in figure["data"] if t.get("name", "").startswith("highlighted")]
    assert len(rings) == len(set(rings)) == 2  # a style each


# ---------------------------------------------------------------------------------------------
# Compare page


def outcome_arrays(root: Path, method: str, column: str, items: list[str]) -> np.ndarray:
    rows = sql(root, f"""SELECT seed, item_id, {column} AS v FROM outcomes WHERE study = $s AND method = $m
                         ORDER BY seed, item_id""", s=STUDY, m=method)
    return np.array([[rows.filter((pl.col("seed") == s) & (pl.col("item_id") == i))["v"][0] for i in items]
                     for s in sorted(set(rows["seed"]))], dtype=float)


def test_compare_page_matches_duckdb_and_the_paired_bootstrap(app, synthetic_project: Path) -> None:
    at = open_page(app, "compare")
    a, b = f"{STUDY}/dqn_map · test", f"{STUDY}/random · test"
    widget(at.selectbox, "A").set_value(a).run()
    widget(at.selectbox, "B").set_value(b).run()
    assert not at.exception
    items = sql(synthetic_project, "SELECT DISTINCT item_id FROM outcomes ORDER BY item_id")["item_id"].to_list()
    means = sql(synthetic_project, """SELECT method, avg(correct) AS acc, avg(cost_usd) AS cost FROM outcomes
                                      WHERE study = $s GROUP BY method ORDER BY method""", s=STUDY)
    (acc_a, cost_a), (acc_b, cost_b) = means.filter(pl.col("method") == "dqn_map").select("acc", "cost").row(0), \
        means.filter(pl.col("method") == "random").select("acc", "cost").row(0)
    p, ties = IntervalParams(), TieParams()  # the fixture has no params.yaml: the defaults
    boot = ItemBootstrap(len(items), p.resamples, p.confidence, p.seed)
    expected = {
        "accuracy": paired_bootstrap(boot, outcome_arrays(synthetic_project, "dqn_map", "correct", items),
                                     outcome_arrays(synthetic_project, "random", "correct", items), ties.accuracy(len(items))),
        "cost per item (USD)": paired_bootstrap(boot, outcome_arrays(synthetic_project, "dqn_map", "cost_usd", items),
                                                outcome_arrays(synthetic_project, "random", "cost_usd", items), ties.cost_usd),
    }
    table = frame(at, "compare_table").set_index("quantity")
    assert table.loc["accuracy", "A"] == pytest.approx(acc_a) and table.loc["accuracy", "B"] == pytest.approx(acc_b)
    assert table.loc["cost per item (USD)", "A"] == pytest.approx(cost_a)
    assert table.loc["cost per item (USD)", "B"] == pytest.approx(cost_b)
    for quantity, test in expected.items():
        assert table.loc[quantity, "A − B"] == pytest.approx(test["difference"])
        assert table.loc[quantity, "low"] == pytest.approx(test["ci_low"])
        assert table.loc[quantity, "high"] == pytest.approx(test["ci_high"])
        assert table.loc[quantity, "p-value"] == p_value_text(test["p_value"], p.resamples)  # as the metric reads it
        assert table.loc[quantity, "tie"] == test["tie"]
    # within half an item (evaluation.ties) the difference reads "tie"
    assert metric(at, "Accuracy A − B") == ("tie" if expected["accuracy"]["tie"] else f"{acc_a - acc_b:+.2%}")
    assert expected["accuracy"]["tie"] == (abs(acc_a - acc_b) * len(items) <= 0.5 + 1e-9)

    disagree = sql(synthetic_project, """
        WITH m AS (SELECT method, item_id, avg(correct) AS c FROM outcomes WHERE study = $s GROUP BY ALL)
        SELECT x.item_id FROM m x JOIN m y USING (item_id)
        WHERE x.method = 'dqn_map' AND y.method = 'random' AND x.c <> y.c ORDER BY x.item_id""", s=STUDY)
    shown = frame(at, "disagreements_table")
    assert sorted(shown["item_id"]) == disagree["item_id"].to_list() and len(shown) > 0
    first = shown.iloc[0]
    seed = sql(synthetic_project, "SELECT min(seed) AS s FROM outcomes WHERE study = $s AND method = 'dqn_map'", s=STUDY)["s"][0]
    assert first["follow A"] == f"trajectories?study={STUDY}&method=dqn_map&seed={seed}&item={first['item_id']}"
    assert first["follow A"] == steps_url(StepsKey(STUDY, "dqn_map", seed=int(seed), item=first["item_id"]))
    runs = sql(synthetic_project, "SELECT DISTINCT run_id FROM runs WHERE method = 'dqn_map' ORDER BY run_id")["run_id"].to_list()
    links = " ".join(m.value for m in at.markdown)
    for run in runs:
        assert f"(http://127.0.0.1:5000/#/runs/{run})" in links
    assert at.query_params["a"] in (a, [a])


def test_compare_breaks_the_difference_down_by_domain_and_difficulty(app, synthetic_project: Path) -> None:  # noqa: F811
    at = open_page(app, "compare")
    widget(at.selectbox, "A").set_value(f"{STUDY}/dqn_map · test").run()
    widget(at.selectbox, "B").set_value(f"{STUDY}/random · test").run()
    by_domain = frame(at, "slices_table")
    n_items = sql(synthetic_project, "SELECT count(DISTINCT item_id) n FROM outcomes WHERE study = $s", s=STUDY)["n"][0]
    assert list(by_domain["domain"]) == ["arith"] and by_domain["items"].sum() == n_items
    at.radio(key="slice_by").set_value("difficulty").run()
    assert not at.exception
    by_level = frame(at, "slices_table").set_index("difficulty")
    direct = sql(synthetic_project, """
        SELECT i.difficulty, count(DISTINCT o.item_id) AS n,
               avg(correct) FILTER (WHERE method = 'dqn_map') - avg(correct) FILTER (WHERE method = 'random') AS diff
        FROM outcomes o JOIN items i USING (item_id) WHERE study = $s GROUP BY i.difficulty ORDER BY i.difficulty""", s=STUDY)
    assert list(by_level.index) == [str(d) for d in direct["difficulty"]]
    for d, n, diff in direct.iter_rows():
        row = by_level.loc[str(d)]
        assert row["items"] == n and row["A − B accuracy"] == pytest.approx(100 * diff)  # shown in percent
        assert row["low accuracy"] <= row["A − B accuracy"] <= row["high accuracy"]
    shown = frame(at, "disagreements_table")
    assert {"domain", "difficulty", "more often right"} <= set(shown.columns)
    assert set(shown["more often right"]) <= {"A", "B"}


def test_compare_link_opens_the_item_on_trajectories(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("DLAB_ROOT", str(synthetic_project))
    item = sql(synthetic_project, "SELECT min(item_id) AS i FROM trajectories WHERE study = $s AND method = 'random'", s=STUDY)["i"][0]
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/trajectories.py")
    at.query_params.update({"study": STUDY, "method": "random", "item": item})
    at.run()
    assert not at.exception
    assert widget(at.selectbox, "Study").value == STUDY and widget(at.selectbox, "Method").value == "random"
    assert next(w for w in at.selectbox if w.label.startswith("Item (")).value == item
    n = sql(synthetic_project, "SELECT count(*) n FROM trajectories WHERE study = $s AND method = 'random' AND item_id = $i",
            s=STUDY, i=item)["n"][0]
    assert metric(at, "Steps matching") == f"{n:,}"


def test_frontier_view_is_restored_from_the_url(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("DLAB_ROOT", str(synthetic_project))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"dataset": "synthetic", "studies": ["baselines", STUDY], "highlight": f"{STUDY}/random"})
    at.run()
    assert not at.exception
    assert widget(at.multiselect, "Study").value == ["baselines", STUDY]
    assert widget(at.multiselect, "Highlight methods").value == [f"{STUDY}/random"]
    n = sql(synthetic_project, "SELECT count(*) n FROM frontier WHERE dataset = 'synthetic' AND study IN ('baselines', $s)", s=STUDY)["n"][0]
    assert metric(at, "Points shown") is not None and not at.warning
    at.radio(key="view").set_value("All operating points").run()
    assert int(metric(at, "Points shown")) == n


def test_a_stale_url_value_says_so_and_falls_back_to_the_defaults(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("DLAB_ROOT", str(synthetic_project))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"dataset": "synthetic", "studies": "bogus", "highlight": "nobody/none"})
    at.run()
    assert not at.exception
    said = " ".join(w.value for w in at.warning)
    assert "`bogus`" in said and "`nobody/none`" in said
    assert widget(at.multiselect, "Study").value == widget(at.multiselect, "Study").options  # the default: every study
    assert int(metric(at, "Points shown")) > 0


# ---------------------------------------------------------------------------------------------
# Every study x split, every dataset: no exception


def test_every_study_and_split_renders(app, synthetic_project: Path) -> None:
    at = open_page(app, "studies")
    pairs = sql(synthetic_project, "SELECT DISTINCT study, split FROM trajectories ORDER BY ALL").rows()
    summary_only = sql(synthetic_project, "SELECT DISTINCT study FROM summaries WHERE study NOT IN (SELECT study FROM trajectories)")
    assert (CROWD, "train") in pairs and (GAME, "eval") in pairs
    for study, split in pairs:
        widget(at.selectbox, "Study").set_value(study).run()
        widget(at.selectbox, "Split").set_value(split).run()
        assert not at.exception, (study, split, [e.value for e in at.exception])
        assert len(at.get("plotly_chart")) >= 1, (study, split)
    for study in summary_only["study"].to_list():
        widget(at.selectbox, "Study").set_value(study).run()
        assert not at.exception, study


def test_every_dataset_renders(app, synthetic_project: Path) -> None:
    at = open_page(app, "frontier")
    datasets = sql(synthetic_project, "SELECT DISTINCT dataset FROM frontier ORDER BY dataset")["dataset"].to_list()
    assert widget(at.selectbox, "Dataset").options == datasets
    for dataset in datasets:
        widget(at.selectbox, "Dataset").set_value(dataset).run()
        assert not at.exception, (dataset, [e.value for e in at.exception])
        assert int(metric(at, "Points shown")) > 0


def test_game_study_without_correct_or_cost_draws_return_only(app) -> None:
    at = open_page(app, "studies")
    widget(at.selectbox, "Study").set_value(GAME).run()
    assert not at.exception
    figure = json.loads(at.get("plotly_chart")[0].proto.spec)
    titles = [a["text"] for a in figure["layout"]["annotations"]]
    assert titles == ["return per episode (sum of reward)"]
    assert any("No panel for accuracy, cost" in c.value for c in at.caption)


def test_crowded_study_pages_its_methods(app) -> None:
    at = open_page(app, "studies")
    widget(at.selectbox, "Study").set_value(CROWD).run()
    assert not at.exception
    mix = json.loads(at.get("plotly_chart")[1].proto.spec)
    assert {a["text"] for a in mix["layout"]["annotations"]} == set(CROWD_METHODS[:12])
    curves = frame(at, "curves_table")
    assert sorted(set(curves["method"])) == CROWD_METHODS[:12]
    widget(at.number_input, "Methods, 12 at a time: page (of 2)").set_value(2).run()
    assert not at.exception
    mix = json.loads(at.get("plotly_chart")[1].proto.spec)
    assert {a["text"] for a in mix["layout"]["annotations"]} == set(CROWD_METHODS[12:])
    assert sorted(set(frame(at, "curves_table")["method"])) == CROWD_METHODS[12:]


def test_studies_method_filter_is_a_regex(app) -> None:  # noqa: F811
    at = open_page(app, "studies")
    widget(at.selectbox, "Study").set_value(CROWD).run()
    assert widget(at.selectbox, "Method group").value == "(all)"  # one family: m00 ... m20
    widget(at.text_input, "Method filter (regular expression)").set_value("m0[0-4]$").run()
    assert not at.exception
    assert sorted(set(frame(at, "curves_table")["method"])) == CROWD_METHODS[:5]
    widget(at.text_input, "Method filter (regular expression)").set_value("(").run()
    assert any("not a valid regular expression" in w.value for w in at.warning)


@pytest.mark.parametrize("n_methods", [1, 4, 14, 42, 63])
def test_executor_mix_figure_fits_any_number_of_methods(n_methods: int) -> None:
    mix = pl.DataFrame([{"method": f"m{k}", "episode": e, "executor": x, "share": 0.5, "n_steps": 2}
                        for k in range(n_methods) for e in range(3) for x in "AB"])
    fig = charts.executor_mix_figure(mix)  # 42 methods raised "Vertical spacing cannot be greater than ..."
    rows = -(-n_methods // 3)
    assert fig.layout.height == charts.PANEL_PX * rows + charts.GAP_PX * (rows - 1) + 80
    assert len([t for t in fig.data if t.showlegend]) == 2


def test_learning_curve_figure_with_null_metrics() -> None:
    curves = pl.DataFrame({"method": ["a", "a"], "episode": [0, 1], "return_mean": [1.0, 2.0], "return_std": [0.0, 0.1],
                           "accuracy_mean": [None, None], "accuracy_std": [None, None], "cost_mean": [None, None],
                           "cost_std": [None, None], "n_seeds": [1, 1]}, schema_overrides={c: pl.Float64 for c in
                                                                                           ("accuracy_mean", "accuracy_std", "cost_mean", "cost_std")})
    fig = charts.learning_curve_figure(curves)
    assert [a.text for a in fig.layout.annotations] == ["return per episode (sum of reward)"]


# ---------------------------------------------------------------------------------------------
# Paper vs reproduction


def test_paper_page_charts_comparable_quantities_only(app, synthetic_project: Path) -> None:
    at = open_page(app, "paper")
    assert not at.exception
    charts_ = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    game = next(c for c in charts_ if any(y.startswith(f"{GAME}.") for t in c["data"] for y in t["y"]))
    charted = sorted(y for t in game["data"] for y in t["y"])
    assert charted == [f"{GAME}.big", f"{GAME}.gain"]  # not gain_std, wilcoxon_p, history.count, the zero, the claim
    bar = next(t for t in game["data"] if f"{GAME}.big" in t["y"])
    k = bar["y"].index(f"{GAME}.big")
    assert bar["x"][k] == pytest.approx(charts.symlog(8800.0)) and bar["text"][k] == "+8800.0%"  # symmetric log
    gain = bar["y"].index(f"{GAME}.gain")
    assert bar["x"][gain] == pytest.approx(np.log10(1 + 3.0)) and bar["x"][gain] > 0.1 * bar["x"][k]  # not flattened
    table = next(df.value for df in at.dataframe if "not charted because" in df.value.columns
                 and df.value["metric"].iloc[0].startswith(GAME)).set_index("metric")
    assert table.loc[f"{GAME}.helps", "not charted because"] == "the paper's value is 0 (no relative difference)"
    assert table.loc[f"{GAME}.gain_std", "not charted because"] == "a spread, test statistic or count"
    worded = next(df.value for df in at.dataframe if "the paper says" in df.value.columns)
    assert worded.set_index("metric").loc[f"{GAME}.claim", "the paper says"] == "positive, unbounded"
    assert worded.set_index("metric").loc[f"{GAME}.claim", "ours"] == "2.5"
    heading = next(h.value for h in at.subheader if h.value.startswith(GAME))
    assert heading.endswith("1 of 2 within 5 %")  # gain (+3 %) yes, big (+8800 %) no


def test_paper_rows_take_their_provenance(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Rows of `paper.read_all` carrying `provenance` (issue 17) colour the bars and leave the n-of-m count."""
    real = queries.read_all

    def with_provenance(folder: Path) -> dict:
        out = real(folder)
        return {study: [{**r, "provenance": "calibrated"} if r["metric"] == f"{GAME}.gain" else r for r in rows]
                for study, rows in out.items()}

    monkeypatch.setattr(queries, "read_all", with_provenance)
    table = queries.paper_tables(synthetic_project / "metrics")[GAME]
    assert table.filter(pl.col("metric") == f"{GAME}.gain")["provenance"][0] == "calibrated"
    assert queries.within_summary(table) == (0, 1)  # only `big` is computed and charted
    figure = charts.paper_figure(table)
    assert {t.name for t in figure.data} == {"computed", "calibrated"}
    assert next(t for t in figure.data if t.name == "calibrated").marker.color == charts.PROVENANCE_COLORS["calibrated"]


def test_comparable_rejects_spreads_tests_and_counts() -> None:
    for metric_ in ("a.late_return_std", "a.wilcoxon_p_cost", "a.seeds_cheaper", "a.history.count", "a.p_value", "x.n"):
        assert not queries.comparable(metric_), metric_
    for metric_ in ("a.late_return_mean", "p_sweep.p=0.accuracy", "rq1.success_redref", "a.cum_cost_mean"):
        assert queries.comparable(metric_), metric_


HM_METRICS = {"management": {
    "always_a": {"accuracy_mean": 0.40, "cost_mean": 0.02}, "dqn_map": {"accuracy_mean": 0.5},
    "paper": {"always_a": {"accuracy_mean": 0.967, "cost_mean": 0.0027}, "dqn_map": {"accuracy_mean": 0.95}}},
    "provenance": {"management.always_a.accuracy_mean": {"kind": "calibrated", "why": "reads back solver A's simulated accuracy and price"},
                   "management.always_a.cost_mean": {"kind": "calibrated", "why": "reads back solver A's simulated accuracy and price"}}}


@pytest.mark.parametrize("backend", ["simulated", "replay"])
def test_calibrated_rows_say_not_fitted_on_replayed_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.pipeline.schemas import ANSWERS_SCHEMA
    from delegation_lab.pipeline.tables import write_json_atomic, write_parquet_atomic

    layout = Layout(tmp_path)
    write_json_atomic(HM_METRICS, layout.metrics("coordinator"))
    write_parquet_atomic(pl.DataFrame([{"solver": "A", "item_id": "i", "request_hash": "h", "backend": backend}],
                                      schema_overrides={k: v for k, v in ANSWERS_SCHEMA.items() if k in ("solver", "item_id", "request_hash", "backend")})
                         .select([pl.col(c) if c in ("solver", "item_id", "request_hash", "backend") else pl.lit(None, dtype=t).alias(c)
                                  for c, t in ANSWERS_SCHEMA.items()]), layout.answers("A"))
    monkeypatch.setenv("DLAB_ROOT", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("views/paper.py").run()
    assert not at.exception, [e.value for e in at.exception]
    table = frame(at, "paper_table").set_index("metric")
    expected = "calibrated" if backend == "simulated" else queries.NOT_FITTED
    assert table.loc["management.always_a.accuracy_mean", "provenance"] == expected
    assert table.loc["management.dqn_map.accuracy_mean", "provenance"] == "computed"
    if backend == "replay":
        assert "not fitted" in table.loc["management.always_a.cost_mean", "why"]


def test_downloads_say_what_they_are(app, synthetic_project: Path) -> None:  # noqa: F811
    at = open_page(app, "compare")
    widget(at.selectbox, "A").set_value(f"{STUDY}/dqn_map · test").run()
    widget(at.selectbox, "B").set_value(f"{STUDY}/random · test").run()
    button = next(b for b in at.get("download_button") if "disagreements" in b.proto.label)
    assert button.proto.label == "Download disagreements (CSV)"
    from dashboards.cached import Project, csv_text, download_name
    text = csv_text(Project(synthetic_project, ""), pl.DataFrame({"x": [1]}), "disagreements", {"A": "a@b", "B": "c", "seed": None})
    assert text.splitlines() == [f"# delegation-lab disagreements; project {synthetic_project.name}; A = a@b; B = c", "x", "1"]
    name = download_name(Project(synthetic_project, ""), "disagreements", {"A": f"{STUDY}/dqn_map · test", "B": None})
    assert name.startswith(f"{synthetic_project.name}_disagreements_A-{STUDY}_dqn_map") and name.endswith(".csv")
    assert "None" not in " ".join(str(v) for v in frame(at, "disagreements_table").drop(columns=["follow A", "follow B"]).to_numpy().ravel())


def test_compare_hides_mlflow_when_tracking_is_off(synthetic_project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """tracking.enabled false: no MLflow section, no caption pointing at a UI that has no store."""
    import shutil

    import yaml

    params = yaml.safe_load((Path(APP).parents[1] / "params.yaml").read_text())
    for enabled in (True, False):
        root = tmp_path / f"tracking_{enabled}"  # one root each: the settings are cached per project
        shutil.copytree(synthetic_project, root)
        params["tracking"]["enabled"] = enabled
        (root / "params.yaml").write_text(yaml.safe_dump(params))
        monkeypatch.setenv("DLAB_ROOT", str(root))
        at = open_page(AppTest.from_file(APP, default_timeout=60), "compare")
        shown = [h.value for h in at.subheader] + [c.value for c in at.caption]
        assert any("MLflow" in s for s in shown) is enabled, shown


def test_frontier_breaks_chosen_points_down_by_domain_and_difficulty(app, synthetic_project: Path) -> None:  # noqa: F811
    """The frontier's breakdown equals the per-slice means DuckDB gives, each inside its bootstrap interval."""
    at = open_page(app, "frontier")
    widget(at.multiselect, "Points to break down").set_value([f"{STUDY}/dqn_map", f"{STUDY}/random"]).run()
    assert not at.exception, [e.value for e in at.exception]
    by_domain = frame(at, "frontier_slices_table")
    assert set(by_domain["domain"]) == {"arith"} and set(by_domain["point"]) == {f"{STUDY}/dqn_map", f"{STUDY}/random"}
    widget(at.radio, "Slice by").set_value("difficulty").run()
    shown = frame(at, "frontier_slices_table").set_index(["point", "difficulty"])
    direct = sql(synthetic_project, """
        SELECT o.method, i.difficulty, count(DISTINCT o.item_id) AS n, avg(correct) AS acc, avg(cost_usd) AS cost
        FROM outcomes o JOIN items i USING (item_id) WHERE study = $s AND o.split = 'test' GROUP BY ALL""", s=STUDY)
    assert len(direct) == len(shown)
    for method, level, n, acc, cost in direct.iter_rows():
        row = shown.loc[(f"{STUDY}/{method}", str(level))]
        assert row["items"] == n and row["accuracy"] == pytest.approx(100 * acc) and row["cost (USD/item)"] == pytest.approx(cost)
        assert row["accuracy low"] <= row["accuracy"] <= row["accuracy high"]
        assert row["cost low"] <= row["cost (USD/item)"] <= row["cost high"]
