"""A stage that does not apply to the configured dataset still ends cleanly: it writes every output
DVC expects (empty tables with their schemas, a placeholder figure, header-only plot CSVs) and
metrics that say `{"skipped": reason}`, so `dvc repro` runs on any dataset and the frontier shows
what ran.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.layout import Layout
from delegation_lab.tables import write_csv_atomic, write_json_atomic, write_parquet_atomic

SKIPPED = "skipped"


def skip_reason(metrics_path: Path) -> str | None:
    """The reason a stage skipped, from its metrics (or a results JSON) file; None when it ran."""
    if not metrics_path.exists():
        return None
    try:
        data = json.loads(metrics_path.read_text())
    except json.JSONDecodeError:
        return None
    return data.get(SKIPPED) if isinstance(data, dict) else None


def placeholder_figure(out: Path, text: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from delegation_lab.figures import save_figure

    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9)
    save_figure(fig, out)


def write_skipped(
    layout: Layout,
    metrics_name: str,
    reason: str,
    *,
    extra_metrics: dict[str, Any] | None = None,
    tables: dict[Path, dict[str, pl.DataType]] | None = None,
    csvs: dict[Path, list[str]] | None = None,
    dirs: list[Path] = (),
    figures: list[Path] = (),
    files: list[Path] = (),
) -> None:
    """Write the skipped stage's outputs (paths from `layout`) and its metrics."""
    for path, schema in (tables or {}).items():
        write_parquet_atomic(pl.DataFrame(schema=schema), path)
    for path, header in (csvs or {}).items():
        write_csv_atomic(pl.DataFrame(schema={c: pl.String for c in header}), path)
    for path in dirs:
        path.mkdir(parents=True, exist_ok=True)
        (path / "SKIPPED.txt").write_text(reason + "\n")  # DVC tracks a folder with a file in it
    for path in figures:
        placeholder_figure(path, f"{metrics_name}: skipped\n{reason}")
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    write_json_atomic({SKIPPED: reason, **(extra_metrics or {})}, layout.metrics(metrics_name))
    print(f"{metrics_name}: skipped: {reason}")
