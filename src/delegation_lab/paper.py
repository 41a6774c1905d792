"""Paper figures beside ours, by one convention every study's metrics/<study>.json follows:

a paper's figure sits at the same key path as our measurement with one extra segment `paper`, e.g.
`management.paper.dqn_map.late_return_mean` (Table 1) beside `management.dqn_map.late_return_mean`
(ours). The dashboard's "Paper vs reproduction" page and the study notes read this pairing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PAPER = "paper"


def flatten_metrics(obj: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if isinstance(obj, dict):
        out: dict[tuple[str, ...], Any] = {}
        for key, value in obj.items():
            out.update(flatten_metrics(value, (*prefix, str(key))))
        return out
    return {prefix: obj}


def paper_vs_ours(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows (metric, paper, ours, difference) for every paper figure in a metrics dict."""
    flat = flatten_metrics(metrics)
    rows = []
    for path, paper_value in flat.items():
        if PAPER not in path:
            continue
        ours_path = tuple(p for p in path if p != PAPER)
        ours = flat.get(ours_path)
        diff = ours - paper_value if isinstance(ours, int | float) and isinstance(paper_value, int | float) and not isinstance(ours, bool) else None
        rows.append({"metric": ".".join(ours_path), "paper": paper_value, "ours": ours, "difference": diff})
    return rows


def read_all(metrics_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Per study (metrics file stem): its paper-vs-ours rows; studies without paper figures are left out."""
    out = {}
    for path in sorted(metrics_dir.glob("*.json")):
        try:
            rows = paper_vs_ours(json.loads(path.read_text()))
        except (json.JSONDecodeError, OSError):
            continue
        if rows:
            out[path.stem] = rows
    return out
