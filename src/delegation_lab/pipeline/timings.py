"""The stage timings every stage writes (metrics/timings/<stage>.json: seconds, cpu_seconds, phases),
read back as one table with the total and each stage's share of it (`dlab report --timings`,
benchmarks/bench_pipeline.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from delegation_lab.errors import InputError


def read_timings(timings_dir: Path) -> list[dict[str, Any]]:
    """One row per stage, slowest CPU first: stage, seconds, cpu_seconds, cpu_share, phases."""
    rows = []
    for path in sorted(timings_dir.glob("*.json")):
        try:
            data = json.loads(path.read_text())
            rows.append({"stage": path.stem, "seconds": float(data["seconds"]), "cpu_seconds": float(data["cpu_seconds"]),
                         "phases": dict(data.get("phases") or {})})
        except (json.JSONDecodeError, OSError, KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}: not a stage timings file (seconds, cpu_seconds, phases): {e!r}") from e
    total = sum(r["cpu_seconds"] for r in rows)
    for r in rows:
        r["cpu_share"] = r["cpu_seconds"] / total if total else 0.0
    return sorted(rows, key=lambda r: -r["cpu_seconds"])


def timings_markdown(rows: list[dict[str, Any]]) -> str:
    """Per stage: wall and CPU seconds, its share of the total CPU, its phases; then the total."""
    from delegation_lab.tracking.compare import markdown_table

    table = [{"stage": r["stage"], "seconds": f"{r['seconds']:.1f}", "cpu_seconds": f"{r['cpu_seconds']:.1f}",
              "CPU share": f"{100 * r['cpu_share']:.1f} %",
              "phases (s)": ", ".join(f"{k} {v:.1f}" for k, v in r["phases"].items()) or "—"} for r in rows]
    wall, cpu = sum(r["seconds"] for r in rows), sum(r["cpu_seconds"] for r in rows)
    table.append({"stage": "**total**", "seconds": f"{wall:.1f}", "cpu_seconds": f"{cpu:.1f}", "CPU share": "100 %",
                  "phases (s)": ""})
    return markdown_table(table, ["stage", "seconds", "cpu_seconds", "CPU share", "phases (s)"])
