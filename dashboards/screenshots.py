"""The README's Frontier screenshots: `python -m dashboards.screenshots OUT.png PROJECT [OUT.png PROJECT ...]`.

Serves each project read-only with `streamlit run` (the browser test's Server) and has headless
Chromium (Playwright over Debian's `chromium`) capture the Frontier page's default view, after
checking it as the browser test does (tick labels on both axes, no overlapping point labels)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.dashboard.test_dashboard_browser import CHROMIUM_FLAGS, Server, assert_readable_frontier, chromium_path


def capture(project: Path, out: Path, browser) -> None:
    srv = Server(project.resolve(), Path("/tmp") / f"streamlit_{out.stem}.log")
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(srv.url, wait_until="domcontentloaded")
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        page.wait_for_timeout(2500)  # the last deltas and Plotly's transitions
        assert page.locator("[data-testid='stException']").count() == 0, f"{project}: the page shows an exception"
        assert_readable_frontier(page)
        # the chart from its title: the row of metrics above it at the top (the page header covers ~60 px)
        page.get_by_text("Points shown", exact=True).first.evaluate("e => e.scrollIntoView({block: 'start'})")
        page.screenshot(path=str(out), full_page=False)
    finally:
        srv.stop()


def main(args: list[str]) -> None:
    if not args or len(args) % 2:
        sys.exit("usage: python -m dashboards.screenshots OUT.png PROJECT [OUT.png PROJECT ...]")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS[1:])
        try:
            for out, project in zip(args[::2], args[1::2], strict=True):
                capture(Path(project), Path(out), browser)
        finally:
            browser.close()


if __name__ == "__main__":
    main(sys.argv[1:])
