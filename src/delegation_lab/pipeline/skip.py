"""A stage that does not apply still ends cleanly: it writes every output the DAG declares for it
(empty tables with their contract's schema, placeholder figures, plot CSVs with their axes' columns,
JSON files and metrics that say `{"skipped": reason}`), so `dvc repro` runs on any project and the
frontier shows what ran. The outputs are read from the one DAG (`dvc.yaml`), so a stage's outputs
are listed in one place only.

A stage skips when its study's section says `enabled: false` (`stage.run_stage` checks it) or when
its study cannot run on the project's data (the study's own check, e.g. MARGENT's simulated team on
items without a step structure).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.tables import write_csv_atomic, write_json_atomic, write_parquet_atomic

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

    from delegation_lab.pipeline.figures import save_figure

    fig, ax = plt.subplots(figsize=(6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9)
    save_figure(fig, out)


def declared_outputs(layout: Layout, stage: str) -> list[tuple[str, dict[str, Any]]]:
    """Every `outs`, `metrics` and `plots` entry of `stage` in the project's dvc.yaml: (path, options)."""
    try:
        stages = yaml.safe_load(layout.dvc_yaml.read_text())["stages"]
        body = stages[stage]
    except (OSError, KeyError, TypeError, yaml.YAMLError) as e:
        raise InputError(f"{layout.dvc_yaml}: cannot read the outputs of stage {stage!r} ({e})") from None
    entries = []
    for kind in ("outs", "metrics", "plots"):
        for entry in body.get(kind) or []:
            path, options = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
            entries.append((path, options or {}))
    return entries


def _table_schema(layout: Layout, path: Path) -> dict[str, pl.DataType]:
    """The contract of a study's summaries, run index, outcomes or credit table (every table a query view
    reads); other tables are empty with no columns."""
    from delegation_lab.pipeline.schemas import CREDIT_SCHEMA, OUTCOME_SCHEMA, RUN_INDEX_SCHEMA, SUMMARY_SCHEMA

    if path.parent == layout.summaries_dir:
        return SUMMARY_SCHEMA
    if path.parent == layout.runs_dir:
        return RUN_INDEX_SCHEMA
    if path.parent == layout.outcomes_dir:
        return OUTCOME_SCHEMA
    if path.parent == layout.credit_dir:
        return CREDIT_SCHEMA
    return {}


def skip_stage(layout: Layout, stage: str, reason: str, extra: dict[str, Any] | None = None) -> None:
    """Write every output `stage` declares as skipped; JSON outputs and metrics get `extra` too.
    Persisted outputs (caches kept across runs) are left as they are."""
    note = {SKIPPED: reason, **(extra or {})}
    for rel, options in declared_outputs(layout, stage):
        path = layout.root / rel
        if path.parent.name == "timings":  # the stage's own timing file: run_stage writes it
            continue
        suffix = path.suffix
        header = [c for c in (options.get("x"), options.get("y")) if isinstance(c, str)]
        if options.get("persist"):
            if not suffix:
                path.mkdir(parents=True, exist_ok=True)
            continue
        if not suffix:  # a folder: DVC tracks it once it holds a file; a folder of plots gets an empty one
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir(parents=True)
            if header:
                write_csv_atomic(pl.DataFrame(schema={c: pl.String for c in header}), path / "skipped.csv")
            else:
                (path / "SKIPPED.txt").write_text(reason + "\n")
        elif suffix == ".parquet":
            write_parquet_atomic(pl.DataFrame(schema=_table_schema(layout, path)), path)
        elif suffix == ".json":
            write_json_atomic(note, path)
        elif suffix == ".csv":  # a plot's table: the axes' columns, no rows
            write_csv_atomic(pl.DataFrame(schema={c: pl.String for c in header}), path)
        elif suffix in (".png", ".svg"):
            placeholder_figure(path, f"{stage}: skipped\n{reason}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
    print(f"{stage}: skipped: {reason}")
