"""`dlab credit`: per-agent Shapley credit of stored trajectories whose study can replay a
coalition (coordinator, credit), written to results/credit/<study>.parquet (the `credit` DuckDB
view; the dashboard's Studies page shows it)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from delegation_lab.credit.shapley import EXACT_MAX_AGENTS
from delegation_lab.errors import ConfigError, InputError


def credit_command(
    study: Annotated[str, typer.Option(help="study whose trajectories to credit (coordinator, credit)")],
    method: Annotated[list[str] | None, typer.Option(help="only these methods (repeat the option); default all")] = None,
    seed: Annotated[list[int] | None, typer.Option(help="only these seeds (repeat the option); default all")] = None,
    split: Annotated[str, typer.Option(help="test | train | all")] = "test",
    estimator: Annotated[str, typer.Option(help="auto (exact up to the limit, Monte Carlo beyond) | exact | monte_carlo | leave_one_out")] = "auto",
    samples: Annotated[int | None, typer.Option(help="orderings per trajectory for Monte Carlo (needed beyond the exact limit)")] = None,
    confidence: Annotated[float, typer.Option(help="level of the Monte Carlo intervals")] = 0.95,
    exact_max_agents: Annotated[int, typer.Option(help="largest team credited exactly (2^n coalitions)")] = EXACT_MAX_AGENTS,
    mc_seed: Annotated[int, typer.Option(help="seed of the Monte Carlo orderings")] = 0,
    root: Annotated[Path, typer.Option(help="project root holding data/ and results/")] = Path("."),
    params: Annotated[Path, typer.Option("--params", help="params file the trajectories were written with")] = Path("params.yaml"),
    out: Annotated[Path | None, typer.Option(help="write here instead of results/credit/<study>.parquet")] = None,
) -> None:
    """Shapley credit of every agent of every stored trajectory: v(S) replays the trajectory with only
    the agents in S contributing (environment and others preserved); exact over all 2^n coalitions
    in one batched pass up to --exact-max-agents, permutation Monte Carlo with intervals beyond."""
    from delegation_lab.credit.replay import compute_credit, describe, summary_table
    from delegation_lab.pipeline.layout import Layout

    if estimator not in ("auto", "exact", "monte_carlo", "leave_one_out"):
        typer.echo(f"error: --estimator must be auto, exact, monte_carlo or leave_one_out (got {estimator!r})", err=True)
        raise typer.Exit(2)
    layout = Layout(root)
    params_path = params if params.is_absolute() else root / params
    try:
        run = compute_credit(layout, study, out=out, params_path=params_path, methods=method or None,
                             seeds=seed or None, split=split, estimator=estimator, samples=samples,
                             confidence=confidence, exact_max=exact_max_agents, mc_seed=mc_seed)
    except ConfigError as e:
        typer.echo(str(e), err=True)
        raise typer.Exit(2) from None
    except InputError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    import polars as pl

    with pl.Config(tbl_rows=60, tbl_cols=-1, tbl_width_chars=160):
        typer.echo(summary_table(run.frame))
    typer.echo(f"credit: {describe(run)}")
    typer.echo(f"wrote {out or layout.credit(study)}")
