"""Dashboard page times on a project's results (default: this checkout's `dvc repro` outputs).

Every view the results hold — the Frontier of each dataset, Studies for each study x split, then
Trajectories, Compare and Paper vs reproduction — is run through Streamlit's AppTest twice: cold
(a fresh process-wide cache, as the first visitor after new results sees it) and warm (the same view
again, cached queries). Reports CPU seconds of this process (the script thread and DuckDB's threads)
and wall seconds, and writes them to test-artifacts/dashboard_page_timings.json. The issue's bar:
each page usable within 5 s on 2 busy cores. `DLAB_ROOT` picks another project.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
APP = REPO / "dashboards" / "app.py"
OUT = REPO / "test-artifacts" / "dashboard_page_timings.json"
PAGES = {"studies": "views/studies.py", "trajectories": "views/trajectories.py", "compare": "views/compare.py", "paper": "views/paper.py"}


def views(root: Path) -> list[tuple[str, str, dict[str, str]]]:
    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.pipeline.store import connect

    con = connect(Layout(root))
    try:
        datasets = [r[0] for r in con.sql("SELECT DISTINCT dataset FROM frontier WHERE dataset IS NOT NULL ORDER BY 1").fetchall()]
        pairs = con.sql("SELECT DISTINCT study, coalesce(split, '(none)') FROM trajectories ORDER BY ALL").fetchall()
    finally:
        con.close()
    out = [(f"frontier:{d}", "frontier", {"dataset": d}) for d in datasets]
    out += [(f"studies:{s}:{sp}", "studies", {"study": s, "split": sp}) for s, sp in pairs]
    out += [(name, name, {}) for name in ("trajectories", "compare", "paper")]
    return out


def run_view(page: str, query: dict[str, str]) -> tuple[float, float, list[str]]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=300)
    cpu, wall = time.process_time(), time.perf_counter()
    if page == "frontier":
        at.query_params.update(query)
        at.run()
    else:
        at.run()  # the app's shell on the default page, then the page itself with its URL filters
        cpu, wall = time.process_time(), time.perf_counter()
        at.switch_page(PAGES[page])
        at.query_params.update(query)
        at.run()
    return time.process_time() - cpu, time.perf_counter() - wall, [e.value[:200] for e in at.exception]


def main() -> None:
    root = Path(os.environ.get("DLAB_ROOT") or REPO).resolve()
    os.environ["DLAB_ROOT"] = str(root)
    if not (root / "results" / "frontier.parquet").exists():
        print(f"no results under {root}: run `dvc repro` first")
        return
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()
    rows = []
    print(f"{'view':44s} {'cold cpu':>9s} {'cold wall':>9s} {'warm cpu':>9s} {'warm wall':>9s}")
    for name, page, query in views(root):
        cold_cpu, cold_wall, errors = run_view(page, query)
        warm_cpu, warm_wall, _ = run_view(page, query)
        rows.append({"view": name, "cold_cpu_s": round(cold_cpu, 2), "cold_wall_s": round(cold_wall, 2),
                     "warm_cpu_s": round(warm_cpu, 2), "warm_wall_s": round(warm_wall, 2), "exceptions": errors})
        print(f"{name:44s} {cold_cpu:9.2f} {cold_wall:9.2f} {warm_cpu:9.2f} {warm_wall:9.2f}" + (f"  EXCEPTION {errors}" if errors else ""))
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(json.dumps({"root": str(root), "cpu_count": os.cpu_count(), "views": rows}, indent=1))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
