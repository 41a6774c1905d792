"""`dlab runs compare`: a methods x metrics table (mean ± std over seeds) from MLflow child runs."""

from __future__ import annotations

import polars as pl

from delegation_lab.errors import InputError
import delegation_lab.tracking.tracker  # noqa: F401  (importing it turns MLflow's telemetry off before mlflow loads)


def compare_runs(tracking_uri: str, study: str, metrics: list[str] | None = None) -> pl.DataFrame:
    """One row per method: n_seeds and, per metric, mean and std over the latest finished stage
    run's children. Only FINISHED runs count: a failed, killed or still running stage is partial."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    if mlflow.get_experiment_by_name(study) is None:
        raise InputError(f"no MLflow experiment named {study!r} at {tracking_uri}; run its stage first")
    runs = mlflow.search_runs(experiment_names=[study], filter_string="attributes.status = 'FINISHED'",
                              output_format="list", max_results=50_000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    finished = {r.info.run_id for r in parents}
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") in finished and "method" in r.data.tags]
    if not children:
        raise InputError(f"experiment {study!r} has no finished method x seed runs yet")
    latest = max(parents, key=lambda r: r.info.start_time).info.run_id if parents else None
    if latest and any(r.data.tags["mlflow.parentRunId"] == latest for r in children):
        children = [r for r in children if r.data.tags["mlflow.parentRunId"] == latest]
    rows = [{"method": r.data.tags["method"], "seed": r.data.tags.get("seed"), **r.data.metrics} for r in children]
    frame = pl.DataFrame(rows, infer_schema_length=None)
    available = [c for c in frame.columns if c not in ("method", "seed")]
    wanted = metrics or available
    missing = [m for m in wanted if m not in available]
    if missing:
        raise InputError(f"unknown metric(s) {missing}; available: {sorted(available)}")
    aggs = [pl.col("seed").n_unique().alias("n_seeds")]
    for m in wanted:
        aggs += [pl.col(m).mean().alias(f"{m} mean"), pl.col(m).std().alias(f"{m} std")]
    return frame.group_by("method", maintain_order=True).agg(aggs).sort("method")


def format_table(frame: pl.DataFrame, fmt: str) -> str:
    if fmt == "csv":
        return frame.write_csv()
    if fmt == "json":
        return frame.write_json()
    if fmt == "markdown":
        return markdown_table(frame.to_dicts(), frame.columns)
    raise InputError(f"--format {fmt!r}: use markdown, csv or json")


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    """A Markdown table of rows whose columns may mix numbers and text."""
    header = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    body = "\n".join("| " + " | ".join(_cell(row.get(c)) for c in columns) + " |" for row in rows)
    return header + body + "\n"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)
