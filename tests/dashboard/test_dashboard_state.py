"""Page state kept in the URL (issue 45, item 5): the Studies page's regex filter, smoothing, episodes
per point and method page, the Trajectories page's rows, page, followed method, seed and step,
reopen from an address; the regex
searches every method group; the Frontier's breakdown points follow the highlight until picked."""

from __future__ import annotations

from pathlib import Path

import pytest

from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.store import TrajectoryWriter
from tests.dashboard.test_dashboard import (  # noqa: F401
    APP,
    CROWD,
    CROWD_METHODS,
    STUDY,
    AppTest,
    app,
    frame,
    open_page,
    sql,
    synthetic_project,
    widget,
)


def open_with(root: Path, monkeypatch: pytest.MonkeyPatch, page: str, query: dict[str, str]):
    """The app opened on `page` at an address holding `query` (as a shared link would)."""
    monkeypatch.setenv("DLAB_ROOT", str(root))
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update(query)
    at.run()
    at.switch_page(page)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def url(at, key: str):
    value = at.query_params.get(key)
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def test_a_studies_address_reopens_its_filter_smoothing_bucket_and_page(synthetic_project: Path,  # noqa: F811
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    query = {"study": CROWD, "method_regex": "m[01]", "smoothing": "0.5", "bucket": "2", "method_page": "2"}
    at = open_with(synthetic_project, monkeypatch, "views/studies.py", query)
    assert not at.warning, [w.value for w in at.warning]
    assert at.text_input(key="method_regex").value == "m[01]"
    assert at.slider(key="smoothing").value == 0.5
    assert at.number_input(key="bucket").value == 2
    assert at.number_input(key="method_page").value == 2
    matched = [m for m in CROWD_METHODS if m[:2] in ("m0", "m1")]  # 20 methods: two pages of 12
    assert sorted(set(frame(at, "curves_table")["method"])) == matched[12:]
    assert sorted(set(frame(at, "curves_table")["episode"])) == [0, 2]  # buckets of 2 episodes
    for key, value in query.items():
        assert str(url(at, key)) == value, key  # and the page writes them back


def test_a_changed_studies_filter_goes_to_the_url_and_restarts_the_page(app) -> None:  # noqa: F811
    at = open_page(app, "studies")
    widget(at.selectbox, "Study").set_value(CROWD).run()
    at.number_input(key="method_page").set_value(2).run()
    assert url(at, "method_page") == "2"
    at.text_input(key="method_regex").set_value("m0").run()
    assert not at.exception
    assert url(at, "method_regex") == "m0"
    assert "method_page" not in at.query_params  # 10 methods: one page
    at.slider(key="smoothing").set_value(0.3).run()
    assert url(at, "smoothing") == "0.3"
    at.slider(key="smoothing").set_value(0.0).run()
    assert "smoothing" not in at.query_params  # the default leaves the address


@pytest.mark.parametrize(("key", "value"), [("smoothing", "2"), ("bucket", "99"), ("method_page", "x")])
def test_a_studies_address_value_out_of_range_gets_a_notice_and_the_default(
        synthetic_project: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: str) -> None:  # noqa: F811
    at = open_with(synthetic_project, monkeypatch, "views/studies.py", {"study": CROWD, key: value})
    said = [w.value for w in at.warning if f"{key} = `{value}`" in w.value]
    assert len(said) == 1, [w.value for w in at.warning]


@pytest.fixture(scope="module")
def grouped_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study whose 14 methods fall in three families: the default group (`aa`, the first) hides `knn`
    and `mlp`, as the 42-model routers study's default group hid them."""
    root = tmp_path_factory.mktemp("groups") / "p"
    with TrajectoryWriter(Layout(root), "routers") as writer:
        for method in [f"aa{k:02d}" for k in range(12)] + ["knn_router", "mlp_router"]:
            writer.add(method, 0, [{"episode": e, "step": 0, "split": "train", "item_id": f"it{e}", "action": "A",
                                    "executors": ["A"], "correct": True, "cost_usd": 0.01, "reward": 1.0, "calls": 1,
                                    "extra": None} for e in range(3)])
    return root


def test_the_regex_searches_every_group(grouped_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_with(grouped_project, monkeypatch, "views/studies.py", {})
    assert widget(at.selectbox, "Method group").value == "aa"
    at.text_input(key="method_regex").set_value("mlp|knn").run()
    assert not at.exception
    assert sorted(set(frame(at, "curves_table")["method"])) == ["knn_router", "mlp_router"]
    assert any("searches every group: 2 of 14" in c.value for c in at.caption)
    at.text_input(key="method_regex").set_value("").run()
    assert sorted(set(frame(at, "curves_table")["method"])) == [f"aa{k:02d}" for k in range(12)]  # the group again


def test_a_trajectories_address_reopens_its_rows_and_page(synthetic_project: Path,  # noqa: F811
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    at = open_with(synthetic_project, monkeypatch, "views/trajectories.py", {"study": STUDY, "rows": "25", "page": "3"})
    assert not at.warning, [w.value for w in at.warning]
    assert widget(at.selectbox, "Rows per page").value == 25
    assert at.number_input(key="page").value == 3
    shown = frame(at, "steps_table")
    direct = sql(synthetic_project, """SELECT method, seed, episode, step FROM trajectories WHERE study = $s
                                       ORDER BY method, seed, episode, step LIMIT 25 OFFSET 50""", s=STUDY)
    assert list(shown["episode"]) == direct["episode"].to_list() and list(shown["seed"]) == direct["seed"].to_list()
    widget(at.selectbox, "Seed").set_value(1).run()  # other rows: back to their first page
    assert at.number_input(key="page").value == 1 and "page" not in at.query_params


def test_the_followed_method_seed_and_step_go_to_the_url_and_reopen(synthetic_project: Path,  # noqa: F811
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    first = sql(synthetic_project, "SELECT item_id FROM trajectories WHERE study = $s ORDER BY item_id LIMIT 1", s=STUDY)["item_id"][0]
    at = open_with(synthetic_project, monkeypatch, "views/trajectories.py", {"study": STUDY, "item": first})
    assert "follow" not in at.query_params and "step" not in at.query_params  # the defaults stay out of the address
    methods = widget(at.selectbox, "Method to follow").options
    widget(at.selectbox, "Method to follow").set_value(methods[-1]).run()
    widget(at.selectbox, "Seed to follow").set_value(1).run()
    steps = widget(at.selectbox, "Step details (extra)")
    steps.select_index(len(steps.options) - 1).run()
    query = {k: url(at, k) for k in ("study", "item", "follow", "follow_seed", "step")}
    assert query["follow"] == methods[-1] and query["follow_seed"] == "1" and query["step"], query
    again = open_with(synthetic_project, monkeypatch, "views/trajectories.py", query)  # the address reopens the same view
    assert not again.warning, [w.value for w in again.warning]
    assert widget(again.selectbox, "Method to follow").value == methods[-1]
    assert widget(again.selectbox, "Seed to follow").value == 1
    assert widget(again.selectbox, "Step details (extra)").value == query["step"]


def test_the_breakdown_points_follow_the_highlight_until_picked(app) -> None:  # noqa: F811
    at = open_page(app, "frontier")
    dqn, rnd = f"{STUDY}/dqn_map", f"{STUDY}/random"  # the points with item-level outcomes
    assert sorted(at.multiselect(key="slice_points").options) == [dqn, rnd]
    at.multiselect(key="highlight").set_value([dqn]).run()
    assert at.multiselect(key="slice_points").value == [dqn]
    at.multiselect(key="highlight").set_value([rnd]).run()  # kept its first default before (issue 45)
    assert at.multiselect(key="slice_points").value == [rnd]
    assert "slice_points" not in at.query_params  # the default needs no address
    at.multiselect(key="slice_points").set_value([dqn, rnd]).run()
    at.multiselect(key="highlight").set_value([dqn]).run()
    assert at.multiselect(key="slice_points").value == [dqn, rnd]  # a pick of one's own stays
    assert sorted(at.query_params["slice_points"]) == sorted([dqn, rnd])
