"""What a download holds (dashboards/view_line.py): every CSV's first line records the whole view —
solver subset and highlight included — and the Frontier figure's title carries it; no download names
the server's absolute project path."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dashboards import view_line
from dashboards.cached import Project, csv_text
from tests.dashboard.test_dashboard import APP, AppTest, widget
from tests.dashboard.test_dashboard import synthetic_project  # noqa: F401 - the fixture

pytest.importorskip("streamlit.testing.v1")


def test_a_csv_first_line_records_the_subset_and_the_highlight(tmp_path: Path) -> None:
    root = tmp_path / "deep" / "project"
    view = view_line.frontier_view(dataset="gsm8k", split="test", verifier="judge(fp=0.03)", deployable=False,
                                   points="every operating point", subset=["A", "B"], models=["A", "B", "C"],
                                   highlight=["cascade:B>A"], zoom=(0.8, 0.95), budget=0.000115,
                                   studies=["baselines"], whole_pool=None)
    first, *rest = csv_text(Project(root, ""), pl.DataFrame({"x": [1]}), "frontier_points", view).splitlines()
    assert first == ("# delegation-lab frontier_points; project project; dataset = gsm8k (test split); "
                     "verifier = judge(fp=0.03) (not deployable); points = every operating point; "
                     "solvers = 2 of 3 solvers: A, B; highlight = cascade:B>A; zoom = accuracy 80.0%–95.0%; "
                     "budget = $0.000115 per item; studies = baselines")
    assert rest == ["x", "1"]
    assert str(tmp_path) not in first


def test_the_project_is_named_relative_to_the_repository(tmp_path: Path) -> None:
    assert view_line.project_name(view_line.REPO / "experiments" / "zeroeval_gsm8k") == "experiments/zeroeval_gsm8k"
    assert view_line.project_name(view_line.REPO) == view_line.REPO.name
    assert view_line.project_name(tmp_path / "elsewhere") == "elsewhere"


def test_all_solvers_read_as_a_count_and_a_subset_is_named_whole_in_lines_that_fit() -> None:
    models = [f"model-{k:02d}" for k in range(42)]
    assert view_line.solvers_text(models, models) == "all 42 solvers"
    view = {"dataset": "gsm8k (test split)", "solvers": view_line.solvers_text(models[:11], models), "highlight": "none"}
    lines = view_line.title(view).split("<br>")
    assert all(len(line) <= 80 for line in lines), lines  # fits the narrowest chart the page draws
    assert all(m in view_line.title(view) for m in models[:11]) and "more" not in view_line.title(view)
    assert lines[0].startswith("gsm8k (test split)") and lines[-1].endswith("highlight none")
    view["solvers"] = view_line.solvers_text(models[:20], models)  # beyond SHORT_LIST the title counts the rest
    assert f"+{20 - view_line.SHORT_LIST} more" in view_line.title(view)
    assert all(len(line) <= 80 for line in view_line.title({**view, "filler": "x" * 70}).split("<br>"))


def test_frontier_downloads_carry_the_view_and_no_absolute_path(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
    from streamlit.testing.v1 import app_test

    storage = MemoryMediaFileStorage("/mock/media")  # keeps the bytes each download button serves after the run
    monkeypatch.setattr(app_test, "MemoryMediaFileStorage", lambda _prefix: storage)
    monkeypatch.setenv("DLAB_ROOT", str(synthetic_project))
    at = AppTest.from_file(APP, default_timeout=60).run()
    widget(at.multiselect, "Solvers taking part (3)").set_value(["B", "C"]).run()
    widget(at.multiselect, "Highlight methods").set_value(["always-B"]).run()
    assert not at.exception, [e.value for e in at.exception]

    import json
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert "solvers 2 of 3 solvers: B, C" in title and "highlight always-B" in title and "zoom" in title

    texts = {b.proto.label: storage.get_file(b.proto.url.rsplit("/", 1)[-1].split(".")[0]).content.decode()
             for b in at.get("download_button")}
    points = texts["Download frontier_points (CSV)"]
    first = points.splitlines()[0]
    assert first.startswith(f"# delegation-lab frontier_points; project {synthetic_project.name}; dataset = synthetic (test split)")
    assert "solvers = 2 of 3 solvers: B, C" in first and "highlight = always-B" in first
    assert texts and not [label for label, text in texts.items() if str(synthetic_project) in text]


def test_every_exported_chart_says_what_it_shows(synthetic_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    import json

    from tests.dashboard.test_dashboard import STUDY, open_page

    monkeypatch.setenv("DLAB_ROOT", str(synthetic_project))
    at = open_page(AppTest.from_file(APP, default_timeout=60), "studies")
    at.selectbox(key="study").set_value(STUDY).run()
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert len(titles) == 2 and all(t.startswith(f"study {STUDY} · split ") and "episodes per point" in t for t in titles)
    assert "smoothing 0.0" in titles[0]  # the learning curves, the executor mix has no smoothing
    at.switch_page("views/paper.py").run()
    assert all(json.loads(c.proto.spec)["layout"]["title"]["text"].startswith("paper vs reproduction metrics/")
               for c in at.get("plotly_chart"))
