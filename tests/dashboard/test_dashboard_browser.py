"""The dashboard in a real browser: `streamlit run` serves a project, Debian's headless Chromium
loads every page, the frontier chart and its legend render, no page shows an exception — and every
study x split and every frontier dataset renders on the synthetic project, the default results and
a replay-dataset smoke run. Screenshots and per-view load times (dashboard_timings_<project>.json)
land in test-artifacts/ (git-ignored)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.dashboard.test_dashboard import STUDY, build_project

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]
PAGES = {"frontier": "", "studies": f"studies?study={STUDY}", "trajectories": "trajectories", "compare": "compare", "paper": "paper"}

pytestmark = pytest.mark.processes  # a streamlit server and Chromium


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    return path


@contextmanager
def chromium_page(height: int) -> Iterator:
    """A Playwright page (1400 x `height`) in this machine's Chromium, closed afterwards; the test
    skips, saying why, when Playwright is missing or cannot drive that Chromium."""
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS[1:])
        except sync_api.Error as e:
            pytest.skip(f"Playwright cannot drive {executable}: {e}")
        try:
            yield browser.new_page(viewport={"width": 1400, "height": height})
        finally:
            browser.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"streamlit exited with {proc.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.read().decode().strip() == "ok":
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.3)
    raise AssertionError(f"streamlit did not answer /_stcore/health within {timeout:.0f} s:\n{log.read_text()}")


class Server:
    """`streamlit run dashboards/app.py` on a free port over `root`; `stop()` always ends it."""

    def __init__(self, root: Path, log: Path) -> None:
        self.root, self.log, port = root, log, free_port()
        env = {**os.environ, "DLAB_ROOT": str(root), "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "streamlit", "run", "dashboards/app.py", "--server.headless", "true",
               "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
               "--server.fileWatcherType", "none"]
        with log.open("w") as out:
            self.proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(self.url, self.proc, log)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_project(tmp_path_factory.mktemp("browser") / "project")


@pytest.fixture(scope="module")
def server(synthetic_root: Path):
    """The dashboard over the synthetic project; always stopped."""
    srv = Server(synthetic_root, synthetic_root.parent / "streamlit.log")
    try:
        yield srv.url
    finally:
        srv.stop()
    assert srv.proc.returncode is not None


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def assert_nontrivial_png(path: Path) -> None:
    width, height = png_size(path)
    assert width >= 800 and height >= 600, (width, height)
    assert path.stat().st_size > 20_000, f"{path} is suspiciously small ({path.stat().st_size} bytes)"
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        return
    with Image.open(path) as image:
        colors = image.convert("RGB").resize((300, 200)).getcolors(maxcolors=1_000_000)
    assert colors is not None and len(colors) > 50, "the screenshot is (nearly) blank"


def assert_readable_frontier(page) -> None:
    """Both axes carry tick labels, no two point labels of the chart overlap (their boxes as drawn),
    the plot is at least as wide as the label placer assumes, and the legend below it is whole:
    inside the figure, nothing scrolled away."""
    from dashboards.frontier_chart import WIDTH_PX

    plot = page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
    figure = page.locator(".js-plotly-plot .main-svg").first.bounding_box()
    legend = page.locator(".js-plotly-plot .legend").first.bounding_box()
    assert plot["width"] >= WIDTH_PX, plot
    assert legend["y"] >= plot["y"] + plot["height"], (legend, plot)  # below the plot, not beside it
    assert legend["y"] + legend["height"] <= figure["y"] + figure["height"] + 0.5, (legend, figure)
    scrollbars = [b for b in (s.bounding_box() for s in page.locator(".js-plotly-plot .legend .scrollbar").all()) if b]
    assert all(b["height"] == 0 for b in scrollbars), scrollbars
    for axis in ("xtick", "ytick"):
        texts = [t for t in page.locator(f".js-plotly-plot .{axis} text").all_text_contents() if t.strip()]
        assert len(texts) >= 2, f"{axis}: {texts}"
    boxes = [b for b in (t.bounding_box() for t in page.locator(".js-plotly-plot .textpoint text").all()) if b]
    assert boxes, "no point is labelled"
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = (a["x"] + a["width"] <= b["x"] + 0.5 or b["x"] + b["width"] <= a["x"] + 0.5
                     or a["y"] + a["height"] <= b["y"] + 0.5 or b["y"] + b["height"] <= a["y"] + 0.5)
            assert apart, (a, b)


def test_pages_render_in_chromium(server: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    with chromium_page(1600) as page:
        for name, path in PAGES.items():
            page.goto(f"{server}/{path}", wait_until="domcontentloaded")
            page.wait_for_selector("h1", timeout=30_000)
            if name in ("trajectories", "compare"):
                page.wait_for_selector("[data-testid='stDataFrame']", timeout=30_000)
            else:
                page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
            page.wait_for_timeout(1500)  # let the last deltas and Plotly's transitions settle
            assert page.locator("[data-testid='stException']").count() == 0, f"{name}: the page shows an exception"
            heading = page.locator("h1").first.inner_text()
            if name == "frontier":
                assert "frontier" in heading.lower()
                legend = set(page.locator(".js-plotly-plot .legendtext").all_text_contents())
                assert {"always-A", "oracle", "Pareto front", "dqn_map", "random"} <= legend, legend
                assert {"baselines", STUDY} <= legend, legend  # the group titles: methods grouped by study
                assert page.locator(".js-plotly-plot .scatterlayer .point").count() >= 10
                assert page.get_by_text("Points shown", exact=True).count() == 1
                assert page.get_by_text("Best under budget", exact=True).count() == 1
                assert_readable_frontier(page)
                shot = ARTIFACTS / "dashboard_frontier.png"
            elif name == "studies":
                assert page.locator(".js-plotly-plot").count() == 2  # learning curves, executor mix
                legend = set(page.locator(".js-plotly-plot .legendtext").all_text_contents())
                assert {"dqn_map", "random", "A", "B", "C"} <= legend, legend
                shot = ARTIFACTS / "dashboard_studies.png"
            elif name == "compare":
                assert page.get_by_text("Accuracy A − B", exact=True).count() == 1
                shot = ARTIFACTS / "dashboard_compare.png"
            elif name == "trajectories":
                assert page.get_by_text("Follow one item").count() == 1
                assert page.locator("[data-testid='stDataFrame']").count() >= 3  # steps, answers, item steps
                shot = ARTIFACTS / "dashboard_trajectories.png"
            else:
                assert page.locator(".js-plotly-plot").count() == 2  # management and game
                assert page.get_by_text(f"{STUDY} · metrics/{STUDY}.json", exact=False).count() == 1
                shot = ARTIFACTS / "dashboard_paper.png"
            page.screenshot(path=str(shot), full_page=True)
            assert_nontrivial_png(shot)


def test_links_open_the_point_and_seed_they_name(server: str, synthetic_root: Path) -> None:
    """A Compare → Trajectories link (dashboards.links) opens that method and seed; a stale one says so."""
    from dashboards.links import StepsKey, steps_url

    with chromium_page(1600) as page:
        for method, seed in (("random", 1), ("dqn_map", 0)):
            page.goto(f"{server}/{steps_url(StepsKey(STUDY, method, seed=seed, item='tr003'))}", wait_until="domcontentloaded")
            settle(page)
            assert f"method={method}" in page.url and f"seed={seed}" in page.url, page.url  # the pickers' state
            text = page.locator("body").inner_text()
            assert f"of {method} (seed {seed}) on this item" in text, text[-1500:]  # the steps followed
            assert page.locator("[data-testid='stAlert']").count() == 0
        page.goto(f"{server}/trajectories?study={STUDY}&method=learned_cascade&op=tau%3D0.3", wait_until="domcontentloaded")
        settle(page)
        assert "learned_cascade @ tau=0.3" in page.locator("[data-testid='stAlert']").first.inner_text()


def test_a_hostile_url_value_renders_as_inert_text(server: str) -> None:
    """`?highlight=x[click](https://example.com)y` (issue 45): the notice shows the value as text, links nowhere,
    even when the value's own backticks would close a plain code span around it."""
    with chromium_page(1600) as page:
        page.goto(f"{server}/?{urlencode({'highlight': 'x`[click](https://example.com)`y<b>bold</b>'})}", wait_until="domcontentloaded")
        page.wait_for_selector("[data-testid='stAlert']", timeout=30_000)
        settle(page)
        alert = page.locator("[data-testid='stAlert']").filter(has_text="highlight").first
        assert "x`[click](https://example.com)`y<b>bold</b>" in alert.inner_text()
        assert page.locator("a[href*='example.com']").count() == 0
        assert alert.locator("b").count() == 0


def test_frontier_solver_subset_and_breakdown_in_chromium(server: str) -> None:
    """A solver subset from the URL draws only points within it, readably, and the breakdown renders."""
    with chromium_page(1600) as page:
        page.goto(f"{server}/?{urlencode([('models', 'A'), ('models', 'B')])}", wait_until="domcontentloaded")
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
        settle(page)
        assert page.locator("[data-testid='stException']").count() == 0
        legend = set(page.locator(".js-plotly-plot .legendtext").all_text_contents())
        assert {"always-A", "always-B"} <= legend and "always-C" not in legend, legend
        assert "Solvers: 2 of 3" in page.locator("body").inner_text()
        assert_readable_frontier(page)
        page.goto(f"{server}/?{urlencode({'slice_points': f'{STUDY}/dqn_map', 'slice_by': 'difficulty'})}", wait_until="domcontentloaded")
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
        settle(page)
        assert "Per difficulty: each point on that slice's items alone" in page.locator("body").inner_text()


def test_the_42_model_default_view_holds_the_headline_cascade_routers_and_the_budget_winner(tmp_path: Path) -> None:
    """A 42-model frontier (test_dashboard_solver_subset's): at 1280 px the default view names the
    headline cascade and the routers in its whole legend, the budget winner is the one with all 42
    solvers, and the chart stays readable."""
    import polars as pl

    from dashboards import frontier_points, queries, solver_subset
    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.pipeline.schemas import FRONTIER_SCHEMA
    from delegation_lab.pipeline.tables import conform, write_parquet_atomic
    from tests.dashboard.test_dashboard_solver_subset import forty_two_model_frontier

    points, models = forty_two_model_frontier()
    table = points.with_columns(pl.lit("replay").alias("dataset"), pl.lit(1).alias("n_seeds"), pl.lit(False).alias("on_pareto"),
                                pl.when(pl.col("kind") == "oracle").then(pl.lit("oracle")).otherwise(pl.lit("agreement(x,y)")).alias("verifier"),
                                pl.lit(True).alias("verifier_deployable"))
    frame = conform(table.with_columns([pl.lit(None, dtype=t).alias(c) for c, t in FRONTIER_SCHEMA.items() if c not in table.columns]),
                    FRONTIER_SCHEMA, "the 42-model frontier").select(list(FRONTIER_SCHEMA))
    write_parquet_atomic(frame, Layout(tmp_path).frontier)
    everything = frontier_points.best_and_pareto(queries.with_pareto(points.filter(pl.col("kind") != "oracle")))
    shown = solver_subset.within(points, solver_subset.default_subset(points), whole_pool=models)
    budget = max(b for b in frontier_points.budget_stops(frontier_points.best_and_pareto(queries.with_pareto(shown))) if b <= 0.0004)
    winner = frontier_points.point_name(queries.best_under_budget(everything, budget))
    assert winner == "cascade:x>y"
    srv = Server(tmp_path, tmp_path / "streamlit.log")
    try:
        with chromium_page(1000) as page:
            page.set_viewport_size({"width": 1280, "height": 1000})
            page.goto(f"{srv.url}/?{urlencode({'budget': repr(budget)})}", wait_until="domcontentloaded")
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
            settle(page)
            assert page.locator("[data-testid='stException']").count() == 0
            legend = set(page.locator(".js-plotly-plot .legendtext").all_text_contents())
            assert {"cascade:x>y", "mf", "knn", "always-mini", "always-big"} <= legend, legend
            assert not {f"always-m{k:02d}" for k in range(38)} & legend  # the default subset leaves them out
            body = page.locator("body").inner_text()
            assert "Solvers: 4 of 42" in body and "chose among all 42 solvers" in body
            assert f"Best under budget\n\n{winner}" in body or f"Best under budget\n{winner}" in body, body[:3000]
            assert_readable_frontier(page)
    finally:
        srv.stop()


def test_frontier_with_chromium_command_line(server: str) -> None:
    """The same check without Playwright: Chromium's own --dump-dom and --screenshot."""
    executable = chromium_path()
    ARTIFACTS.mkdir(exist_ok=True)
    # Streamlit renders over a websocket after load; on a busy machine one virtual-time budget may end
    # before the chart arrives, so try longer budgets before calling it a failure.
    for budget in (20_000, 45_000, 90_000):
        base = [executable, *CHROMIUM_FLAGS, f"--virtual-time-budget={budget}", "--window-size=1400,1400"]
        dom = subprocess.run([*base, "--dump-dom", f"{server}/"], capture_output=True, text=True, timeout=180)
        assert dom.returncode == 0, dom.stderr[-2000:]
        html = dom.stdout
        if "main-svg" in html:
            break
    assert "js-plotly-plot" in html and "main-svg" in html, "the frontier chart did not render"
    for name in ("always-A", "oracle", "Pareto front"):
        assert f'data-unformatted="{name}"' in html, f"legend entry {name!r} missing"
    assert 'data-testid="stException"' not in html

    # The screenshot is a separate page load: Streamlit's skeleton arrives first and the chart over a
    # websocket, which virtual time does not wait for (a 90 s budget can end in a second of real time
    # on a busy machine), so try again, with longer budgets, until a real-time deadline.
    shot, deadline = ARTIFACTS / "dashboard_frontier_cli.png", time.monotonic() + 240
    for attempt in itertools.count():
        budget = (budget, 45_000, 90_000)[min(attempt, 2)]
        shot.unlink(missing_ok=True)
        base = [executable, *CHROMIUM_FLAGS, f"--virtual-time-budget={budget}", "--window-size=1400,1400"]
        run = subprocess.run([*base, f"--screenshot={shot}", f"{server}/"], capture_output=True, text=True, timeout=180)
        assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
        if shot.stat().st_size > 20_000 or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert_nontrivial_png(shot)


# ---------------------------------------------------------------------------------------------
# Every study x split and every frontier dataset, on the synthetic project, the default results
# (this checkout's, when `dvc repro` made them) and a replay-dataset smoke run


def views(root: Path) -> list[tuple[str, str]]:
    """(name, path?query) of every page view the results hold: the frontier of each dataset, the
    studies page of each study x split (and each study with summaries only), the other pages once."""
    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.pipeline.store import connect

    con = connect(Layout(root))
    try:
        datasets = [r[0] for r in con.sql("SELECT DISTINCT dataset FROM frontier WHERE dataset IS NOT NULL ORDER BY 1").fetchall()]
        pairs = con.sql("SELECT DISTINCT study, coalesce(split, '(none)') FROM trajectories ORDER BY ALL").fetchall()
        summary_only = [r[0] for r in con.sql("""SELECT DISTINCT study FROM summaries
                                                  WHERE study NOT IN (SELECT study FROM trajectories) ORDER BY 1""").fetchall()]
    finally:
        con.close()
    out = [(f"frontier:{d}", "?" + urlencode({"dataset": d})) for d in datasets]
    out += [(f"studies:{st}:{sp}", "studies?" + urlencode({"study": st, "split": sp})) for st, sp in pairs]
    out += [(f"studies:{st}", "studies?" + urlencode({"study": st})) for st in summary_only]
    out += [(name, path) for name, path in (("trajectories", "trajectories"), ("compare", "compare"), ("paper", "paper"))]
    return out


def server_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) the streamlit server has used: on a busy machine a
    fairer page cost than wall time. NaN where /proc is absent."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(page, timeout_ms: int = 120_000) -> None:
    """Wait until the page's script run is over (Streamlit's own e2e signal: the app root's
    `data-test-script-state` turns `notRunning` after the run of a fresh load) and nothing is stale."""
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout_ms)
    page.wait_for_selector("h1", timeout=timeout_ms)
    page.wait_for_function("() => !document.querySelector('[data-stale=\"true\"]')", timeout=timeout_ms)


def visit_every_view(root: Path, label: str) -> dict[str, dict[str, float]]:
    """Load every view of `root` in Chromium; fail on any exception element or traceback text.
    Returns each view's wall seconds to settle and the server's CPU seconds for it (written to
    test-artifacts/dashboard_timings_<label>.json; a record, not a timed test)."""
    ARTIFACTS.mkdir(exist_ok=True)
    srv = Server(root, ARTIFACTS / f"streamlit_{label}.log")
    timings: dict[str, dict[str, float]] = {}
    failures: list[str] = []
    try:
        with chromium_page(1200) as page:
            for name, path in views(root):
                start, cpu = time.monotonic(), server_cpu(srv.proc.pid)
                page.goto(f"{srv.url}/{path}", wait_until="domcontentloaded")
                settle(page)
                timings[name] = {"wall_s": round(time.monotonic() - start, 2),
                                 "server_cpu_s": round(server_cpu(srv.proc.pid) - cpu, 2)}
                page.wait_for_timeout(300)  # Plotly's first draw
                exceptions = page.locator("[data-testid='stException']").count()
                body = page.locator("body").inner_text()
                if exceptions or "Traceback (most recent call last)" in body:
                    failures.append(f"{name}: {exceptions} exception element(s): {body[:600]!r}")
                    page.screenshot(path=str(ARTIFACTS / f"dashboard_{label}_{name.replace(':', '_')}.png"), full_page=True)
    finally:
        srv.stop()
        (ARTIFACTS / f"dashboard_timings_{label}.json").write_text(json.dumps(timings, indent=1))
    assert not failures, "\n".join(failures)
    assert timings, "no view visited"
    return timings


def test_every_view_renders_on_the_synthetic_project(synthetic_root: Path) -> None:
    timings = visit_every_view(synthetic_root, "synthetic")
    assert {"frontier:synthetic", "frontier:sim_env", "studies:crowd:train", "studies:game:eval", "compare"} <= set(timings)


def test_every_view_renders_on_the_default_dag(smoke_dag: tuple[Path, str]) -> None:
    """The default DAG's results (on the smoke profile, which every test run builds: CI renders them
    on every change, not only where `make repro` ran first)."""
    timings = visit_every_view(smoke_dag[0], "default")
    assert any(name.startswith("frontier:") for name in timings)


def test_every_view_renders_on_a_replay_dataset_smoke_run(replayed_dag: tuple[Path, str]) -> None:
    """The whole smoke DAG on a replayed folder (the session's `replayed_dag`, which
    tests/replay/test_replay_any_dataset.py checks), then every view of its results."""
    timings = visit_every_view(replayed_dag[0], "replay")
    assert any(name.startswith("frontier:") for name in timings)


@pytest.mark.parametrize("project", ["toy", "zeroeval_gsm8k"])
def test_portfolio_page_renders_in_chromium(project: str, tmp_path: Path) -> None:
    """The Portfolio page over a metrics/portfolio.json: the toy's (a router chosen at k = 2) and the
    42-model experiment's, when this checkout has it."""
    from tests.dashboard.test_dashboard_portfolio import write_portfolio_metrics

    if project == "toy":
        root = tmp_path / "project"
        write_portfolio_metrics(root)
    else:
        root = REPO / "experiments" / project
        if not (root / "metrics" / "portfolio.json").exists():
            pytest.skip(f"no metrics/portfolio.json in experiments/{project} (dvc checkout there)")
    ARTIFACTS.mkdir(exist_ok=True)
    srv = Server(root, tmp_path / "streamlit.log")
    try:
        with chromium_page(1600) as page:
            page.goto(f"{srv.url}/portfolio", wait_until="domcontentloaded")
            settle(page)
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
            page.wait_for_timeout(1000)
            assert page.locator("[data-testid='stException']").count() == 0
            assert "Portfolio" in page.locator("h1").first.inner_text()
            legend = page.locator(".js-plotly-plot .legendtext").all_text_contents()
            assert [t.split(" ", 1)[0] for t in legend] == [f"k={k}" for k in range(1, len(legend) + 1)], legend
            if project == "toy":
                assert legend[1].startswith("k=2 router knn") and legend[1].endswith("a | b"), legend
            assert page.locator("[data-testid='stDataFrame']").count() == 2
            shot = ARTIFACTS / f"dashboard_portfolio_{project}.png"
            page.screenshot(path=str(shot), full_page=True)
            assert_nontrivial_png(shot)
    finally:
        srv.stop()
