"""The dashboard in a real browser: `streamlit run` serves the synthetic project, Debian's headless
Chromium loads every page, the frontier chart and its legend render, no page shows an exception.
Screenshots land in test-artifacts/ (git-ignored): dashboard_frontier.png and one per other page."""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.test_dashboard import STUDY, build_project

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage"]
PAGES = {"frontier": "", "studies": "studies", "trajectories": "trajectories", "paper": "paper"}

pytestmark = pytest.mark.slow


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("Debian's chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    return path


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


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """`streamlit run dashboards/app.py` on a free port over a synthetic project; always stopped."""
    root = build_project(tmp_path_factory.mktemp("browser") / "project")
    port = free_port()
    log = root.parent / "streamlit.log"
    env = {**os.environ, "DLAB_ROOT": str(root), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "streamlit", "run", "dashboards/app.py", "--server.headless", "true",
           "--server.address", "127.0.0.1", "--server.port", str(port), "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode is not None


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


def test_pages_render_in_chromium(server: str) -> None:
    executable = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        try:
            browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS[1:])
        except sync_api.Error as e:
            pytest.skip(f"Playwright cannot drive {executable}: {e}")
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            for name, path in PAGES.items():
                page.goto(f"{server}/{path}", wait_until="domcontentloaded")
                page.wait_for_selector("h1", timeout=30_000)
                if name == "trajectories":
                    page.wait_for_selector("[data-testid='stDataFrame']", timeout=30_000)
                else:
                    page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
                page.wait_for_timeout(1500)  # let the last deltas and Plotly's transitions settle
                assert page.locator("[data-testid='stException']").count() == 0, f"{name}: the page shows an exception"
                heading = page.locator("h1").first.inner_text()
                if name == "frontier":
                    assert "frontier" in heading.lower()
                    legend = set(page.locator(".js-plotly-plot .legendtext").all_text_contents())
                    assert {"always-A", "oracle", "Pareto front", f"{STUDY}/dqn_map"} <= legend, legend
                    assert page.locator(".js-plotly-plot .scatterlayer .point").count() >= 19
                    assert page.get_by_text("Points shown").count() == 1
                    shot = ARTIFACTS / "dashboard_frontier.png"
                elif name == "studies":
                    assert page.locator(".js-plotly-plot").count() == 2  # learning curves, executor mix
                    legend = set(page.locator(".js-plotly-plot .legendtext").all_text_contents())
                    assert {"dqn_map", "random", "A", "B", "C"} <= legend, legend
                    shot = ARTIFACTS / "dashboard_studies.png"
                elif name == "trajectories":
                    assert page.get_by_text("Follow one item").count() == 1
                    assert page.locator("[data-testid='stDataFrame']").count() >= 3  # steps, answers, item steps
                    shot = ARTIFACTS / "dashboard_trajectories.png"
                else:
                    assert page.locator(".js-plotly-plot").count() == 1
                    assert page.get_by_text(f"{STUDY} · metrics/{STUDY}.json").count() == 1
                    shot = ARTIFACTS / "dashboard_paper.png"
                page.screenshot(path=str(shot), full_page=True)
                assert_nontrivial_png(shot)
        finally:
            browser.close()


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

    shot = ARTIFACTS / "dashboard_frontier_cli.png"
    shot.unlink(missing_ok=True)
    run = subprocess.run([*base, f"--screenshot={shot}", f"{server}/"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    assert_nontrivial_png(shot)
