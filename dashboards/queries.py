"""The dashboard's DuckDB queries, kept apart from Streamlit so tests run the very same SQL.

Every function takes a connection from `delegation_lab.pipeline.store.connect` (views items, answers,
labels, trajectories, summaries, frontier) and returns a small, already aggregated polars frame or
a list of values; nothing here reads a whole table into memory.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from delegation_lab.frontier.build import method_key, pareto_mask
from delegation_lab.frontier import verifiers
from delegation_lab.frontier.verifiers import RESTS_ON_VERIFIER, deployable_note
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.store import read_trajectory_points
from delegation_lab.reporting.paper import read_all

NONE_LABEL = "(none)"  # how a NULL dataset / solver set / split shows in a filter
ALL = "(all)"  # the "no filter" choice of a selectbox


def fingerprint(root: Path) -> str:
    """Names, sizes and modification times of every file the views read: a cache key that changes
    whenever a stage writes new results (atomic replaces and partition swaps change it too)."""
    parts: list[str] = []

    def add(path: Path) -> None:
        try:
            st = path.stat()
        except OSError:
            return
        parts.append(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}")

    for folder, pattern in (
        ("data/items", "*.parquet"),
        ("data/answers", "*.parquet"),
        ("results/summaries", "*.parquet"),
        ("results/credit", "*.parquet"),
        ("results/outcomes", "*.parquet"),
        ("metrics", "*.json"),
        ("results/trajectories", "study=*"),
    ):
        base = root / folder
        add(base)
        if base.is_dir():
            for path in sorted(base.glob(pattern)):
                add(path)
    for single in ("data/labels.parquet", "results/frontier.parquet"):
        add(root / single)
    return "|".join(parts)


def _values(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> list[Any]:
    return [row[0] for row in con.sql(sql, params=params or {}).fetchall()]


def _frame(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> pl.DataFrame:
    return con.sql(sql, params=params or {}).pl()


# ---------------------------------------------------------------------------------------------
# Frontier


SOLVER_SET = "array_to_string(list_sort(string_split(solver_set, ',')), ',')"  # `B,A` and `A,B` are one set


def frontier_options(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Distinct datasets, verifiers (without the oracle's), solver sets (order-free) and studies of
    the frontier table (NULL shown as (none))."""
    return {
        "dataset": _values(con, f"SELECT DISTINCT coalesce(dataset, '{NONE_LABEL}') AS v FROM frontier ORDER BY v"),
        "verifier": _values(con, f"SELECT DISTINCT coalesce(verifier, '{NONE_LABEL}') AS v FROM frontier "
                                 "WHERE coalesce(verifier, '') <> 'oracle' ORDER BY v"),
        "solver_set": _values(con, f"SELECT DISTINCT coalesce({SOLVER_SET}, '{NONE_LABEL}') AS v FROM frontier ORDER BY v"),
        "study": _values(con, f"SELECT DISTINCT coalesce(study, '{NONE_LABEL}') AS v FROM frontier ORDER BY v"),
    }


def frontier_dataset_options(con: duckdb.DuckDBPyConnection, dataset: str) -> dict[str, list[str]]:
    """Verifiers, solver sets and studies present on one dataset."""
    where = f"coalesce(dataset, '{NONE_LABEL}') = $d"
    return {
        "verifier": _values(con, f"SELECT DISTINCT coalesce(verifier, '{NONE_LABEL}') AS v FROM frontier "
                                 f"WHERE {where} AND coalesce(verifier, '') <> 'oracle' ORDER BY v", {"d": dataset}),
        "solver_set": _values(con, f"SELECT DISTINCT coalesce({SOLVER_SET}, '{NONE_LABEL}') AS v FROM frontier WHERE {where} ORDER BY v", {"d": dataset}),
        "study": _values(con, f"SELECT DISTINCT coalesce(study, '{NONE_LABEL}') AS v FROM frontier WHERE {where} ORDER BY v", {"d": dataset}),
    }


# The MLflow runs behind each (study, method, operating point), from the run index (`runs` view):
# the stages' tables carry no run ids, so an unchanged rerun leaves them byte-identical.
POINT_RUNS = """SELECT study, method, operating_point, string_agg(DISTINCT run_id, ',' ORDER BY run_id) AS run_ids
                FROM runs GROUP BY study, method, operating_point"""


def frontier_points(
    con: duckdb.DuckDBPyConnection, dataset: str, verifier: str, solver_sets: list[str], studies: list[str]
) -> pl.DataFrame:
    """The frontier rows of one dataset and verifier (plus the baseline oracle, whose verifier is
    `oracle`) passing the filters, cheapest first, with `on_pareto` recomputed on these points."""
    # a frontier written before rows recorded whether their verifier is deployable: unknown
    deployable = ("verifier_deployable" if "verifier_deployable" in _values(con, "SELECT column_name FROM (DESCRIBE frontier)")
                  else "CAST(NULL AS BOOLEAN) AS verifier_deployable")
    points = _frame(
        con,
        f"""
        SELECT method, operating_point, coalesce(study, '{NONE_LABEL}') AS study, kind,
               accuracy, coalesce(accuracy_std, 0) AS accuracy_std,
               cost_per_item_usd, coalesce(cost_std, 0) AS cost_std, calls_per_item, n_seeds,
               accuracy_ci_low, accuracy_ci_high, cost_ci_low, cost_ci_high,
               coalesce(verifier, '{NONE_LABEL}') AS verifier, {deployable},
               coalesce(dataset, '{NONE_LABEL}') AS dataset,
               coalesce({SOLVER_SET}, '{NONE_LABEL}') AS solver_set,
               coalesce(r.run_ids, '') AS run_ids, on_pareto AS on_pareto_all, file_row
        FROM (SELECT *, row_number() OVER () AS file_row FROM frontier) AS f
        LEFT JOIN ({POINT_RUNS}) AS r USING (study, method, operating_point)
        WHERE coalesce(dataset, '{NONE_LABEL}') = $dataset
          AND (coalesce(verifier, '{NONE_LABEL}') = $verifier OR (verifier = 'oracle' AND study = 'baselines'))
          AND list_contains($solver_sets, coalesce({SOLVER_SET}, '{NONE_LABEL}'))
          AND list_contains($studies, coalesce(study, '{NONE_LABEL}'))
        ORDER BY cost_per_item_usd, accuracy DESC, study, method, operating_point
        """,
        {"dataset": dataset, "verifier": verifier, "solver_sets": list(solver_sets), "studies": list(studies)},
    )
    return with_pareto(points)


def with_pareto(points: pl.DataFrame) -> pl.DataFrame:
    """`on_pareto` recomputed on exactly these points (oracles excluded), with the frontier's own
    `pareto_mask`: a filter that removes points can put others on the front."""
    order = points.sort("file_row") if "file_row" in points.columns else points  # ties: the first in file order wins, as in the stage
    contender = (order["kind"] != "oracle").to_numpy()
    mask = np.zeros(order.height, dtype=bool)
    if contender.any():
        mask[contender] = pareto_mask(order["cost_per_item_usd"].to_numpy()[contender], order["accuracy"].to_numpy()[contender])
    marked = order.with_columns(pl.Series("on_pareto", mask))
    if "file_row" not in points.columns:
        return marked
    return points.join(marked.select("file_row", "on_pareto"), on="file_row", how="left").drop("file_row")


def with_verifier_notes(points: pl.DataFrame, summary: dict[str, Any]) -> pl.DataFrame:
    """`points` with `verifier_note`: what the frontier table says of each point's verifier (`—` for a
    point that takes no accept decision, `deployable`, or why not, e.g. `simulated verifier: not
    deployable`, from metrics/frontier.json `verifiers`)."""
    reasons = {name: d.get("not_deployable") for name, d in (summary.get("verifiers") or {}).items()}
    notes = [deployable_note(kind, ok, reasons.get(verifier))
             for kind, ok, verifier in points.select("kind", "verifier_deployable", "verifier").iter_rows()]
    return points.with_columns(pl.Series("verifier_note", notes, dtype=pl.String))


def verifier_notes(points: dict[str, dict[str, Any]], summary: dict[str, Any]) -> list[str]:
    """One line per verifier that metrics/frontier.json `verifiers` marks not deployable and some of
    `points` (a name, e.g. `A`, to a row with study, method and verifier) rest on — a cascade's or a
    study's accept decisions; a single or an oracle rests on none: `A rests on the verifier
    `judge(…)`: simulated verifier: not deployable …`, the note the Frontier's table gives."""
    described, methods, main = summary.get("verifiers") or {}, summary.get("methods") or {}, main_verifier(summary)
    resting: dict[str, list[str]] = {}
    for name, row in points.items():
        kind = (methods.get(frontier_key(row["study"], row["method"], row.get("verifier"), main)) or {}).get("kind")
        d = described.get(row.get("verifier")) or {}
        if d.get("deployable") is False and kind in RESTS_ON_VERIFIER:
            resting.setdefault(row["verifier"], []).append(name)
    return [f"{' and '.join(names)} rest{'s' if len(names) == 1 else ''} on the verifier `{verifier}`: "
            f"{why_not_deployable(described[verifier])} — no deployment could run it."
            for verifier, names in resting.items()]


def why_not_deployable(described: dict[str, Any]) -> str:
    """Why a metrics/frontier.json `verifiers` entry marked not deployable is so: the frontier's own
    note (`simulated verifier: not deployable`), else `not deployable` (as `deployable_note` says it)."""
    return described.get("not_deployable") or "not deployable"


def study_verifier_notes(study: str, verifiers: list[str], summary: dict[str, Any], consulted: bool = True) -> list[str]:
    """One line per verifier the study's summary rows name that metrics/frontier.json `verifiers`
    marks not deployable (e.g. a simulated judge on real answers): its accept decisions rest on it.
    `consulted` False (the study's metrics say no method of it consults the verifier): none."""
    described = summary.get("verifiers") or {}
    return [f"`{study}`'s accept decisions rest on the verifier `{v}`: "
            f"{why_not_deployable(described[v])} — its curves and rows are what a deployment with that "
            "verifier would see, and no deployment could run it."
            for v in verifiers if consulted and (described.get(v) or {}).get("deployable") is False]


def consults_verifier(study_metrics: Path) -> bool:
    """False when the study's metrics file says its methods take no accept decision on the verifier
    (`verifier.used_for_acceptance`, MARGENT's), else True (also when the file is absent)."""
    described = (metrics_json(study_metrics) or {}).get("verifier")
    return not (isinstance(described, dict) and described.get("used_for_acceptance") is False)


def study_verifiers(con: duckdb.DuckDBPyConnection, study: str) -> list[str]:
    """The verifiers the study's summary rows name."""
    return _values(con, "SELECT DISTINCT verifier FROM summaries WHERE study = $s AND verifier IS NOT NULL ORDER BY 1", {"s": study})


def chart_points(points: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(points drawn, study oracles left out): one oracle on the chart, the baselines' (the cheapest
    correct solver per item); a study's own oracle is the same upper bound under another name."""
    study_oracle = (pl.col("kind") == "oracle") & (pl.col("study") != "baselines")
    return points.filter(~study_oracle), points.filter(study_oracle)


def best_under_budget(points: pl.DataFrame, budget: float) -> dict[str, Any] | None:
    """The most accurate point (oracles excluded) costing at most `budget` per item; ties go to the
    cheaper one. None when nothing is that cheap."""
    fits = points.filter((pl.col("kind") != "oracle") & (pl.col("cost_per_item_usd") <= budget))
    if fits.is_empty():
        return None
    return fits.sort(["accuracy", "cost_per_item_usd", "study", "method"], descending=[True, False, False, False]).row(0, named=True)


def budget_label(cost: float) -> str:
    return f"${cost:.3g}"


def budget_steps(points: pl.DataFrame) -> list[float]:
    """The budget slider's stops: the costs of the contenders shown, cheapest first; costs that read
    the same (`budget_label`) are one stop, the largest of them, so the stop admits them all."""
    stops: dict[str, float] = {}
    for cost in sorted(points.filter(pl.col("kind") != "oracle")["cost_per_item_usd"].to_list()):
        stops[budget_label(cost)] = cost
    return list(stops.values())


def metrics_json(metrics_path: Path) -> dict[str, Any] | None:
    """A metrics file (metrics/frontier.json, metrics/<study>.json), or None when absent or unreadable."""
    try:
        return json.loads(metrics_path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def frontier_methods_table(summary: dict[str, Any], keys: set[str] | None = None) -> pl.DataFrame:
    """One row per method of metrics/frontier.json (AIQ, APGR, CPT levels, best accuracy, and where a
    solver's hidden reasoning tokens are estimated, the solvers a method's cost rests on; whether the
    verifier its best point rests on is deployable), best AIQ first; `keys` (`frontier_key`) limits the rows."""
    rows = []
    for key, m in (summary.get("methods") or {}).items():
        if keys is not None and key not in keys:
            continue
        row = {
            "method": key,
            "kind": m.get("kind"),
            "AIQ": m.get("aiq"),
            "APGR": m.get("apgr"),
            "best accuracy": m.get("best_accuracy"),
            "cost at best accuracy (USD/item)": m.get("best_accuracy_cost_per_item_usd"),
        }
        for name in sorted(k for k in m if k.startswith("cpt")):
            row[name.upper()] = m[name]
        row["operating points"] = m.get("operating_points")
        row["verifier"] = deployable_note(m.get("kind"), m.get("verifier_deployable"), m.get("not_deployable"))
        if summary.get("estimated_reasoning_tokens"):  # frontier/estimates.py: whose hidden tokens are estimated
            row["cost rests on estimated tokens of"] = ", ".join(m.get("cost_rests_on_estimated_tokens") or []) or None
        rows.append(row)
    if not rows:
        return pl.DataFrame()
    return pl.DataFrame(rows, infer_schema_length=None).sort("AIQ", descending=True, nulls_last=True)


def frontier_key(study: str, method: str, verifier: str | None = None, main_verifier: str | None = None) -> str:
    """The key metrics/frontier.json files a (study, method) under: under a verifier other than the
    main one (and the oracle's), with `[<verifier>]` after it."""
    # the frontier's own naming (`method_key`); no verifier, or no main one, names the plain key
    return method_key(study, method, verifier if verifier and main_verifier else main_verifier, main_verifier)


def main_verifier(summary: dict[str, Any]) -> str | None:
    """The name of the verifier the studies ran under (`frontier.verifiers.main_verifier`)."""
    return (verifiers.main_verifier(summary) or {}).get("name")


# ---------------------------------------------------------------------------------------------
# Studies


def study_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Studies with trajectories or summary rows."""
    return _values(
        con,
        """
        SELECT study FROM (SELECT DISTINCT study FROM trajectories
                           UNION SELECT DISTINCT study FROM summaries)
        WHERE study IS NOT NULL ORDER BY study
        """,
    )


def study_splits(con: duckdb.DuckDBPyConnection, study: str) -> list[str]:
    """Splits a study's trajectories cover, `train` first (learning curves are about training)."""
    splits = _values(
        con,
        f"SELECT DISTINCT coalesce(split, '{NONE_LABEL}') AS s FROM trajectories WHERE study = $study ORDER BY s",
        {"study": study},
    )
    return sorted(splits, key=lambda s: (s != "train", s))


def episode_span(con: duckdb.DuckDBPyConnection, study: str, split: str) -> int:
    """Number of distinct episodes (max episode + 1) of a study on a split; 0 when none."""
    value = _values(
        con,
        f"SELECT max(episode) FROM trajectories WHERE study = $study AND coalesce(split, '{NONE_LABEL}') = $split",
        {"study": study, "split": split},
    )[0]
    return 0 if value is None else int(value) + 1


def default_bucket(n_episodes: int, points: int = 100) -> int:
    """Episodes per point so a curve has about `points` points."""
    return max(1, math.ceil(n_episodes / points))


def study_methods(con: duckdb.DuckDBPyConnection, study: str, split: str) -> list[str]:
    """Methods with trajectories of a study on a split."""
    return _values(
        con,
        f"SELECT DISTINCT method FROM trajectories WHERE study = $study AND coalesce(split, '{NONE_LABEL}') = $split ORDER BY method",
        {"study": study, "split": split},
    )


def _methods_clause(methods: list[str] | None, params: dict[str, Any]) -> str:
    """`AND method IN ($m0, ...)`: a plain IN list, so DuckDB prunes the other methods' hive
    partitions (method=*/) instead of reading them."""
    if methods is None:
        return ""
    params.update({f"m{k}": m for k, m in enumerate(methods)})
    return "AND method IN (" + ", ".join(f"$m{k}" for k in range(len(methods))) + ")" if methods else "AND false"


def learning_curves(con: duckdb.DuckDBPyConnection, study: str, split: str, bucket: int,
                    methods: list[str] | None = None) -> pl.DataFrame:
    """Per method and episode bucket: mean and std over seeds of the per-episode return (sum of
    reward), accuracy (mean correct) and cost (sum of cost_usd); each seed first averages the
    episodes of a bucket. `episode` is the first episode of the bucket. `methods` limits the rows
    (None: every method)."""
    params: dict[str, Any] = {"study": study, "split": split, "bucket": int(bucket)}
    only = _methods_clause(methods, params)
    return _frame(
        con,
        f"""
        WITH per_episode AS (
            SELECT method, seed, episode,
                   sum(reward) AS episode_return,
                   avg(CAST(correct AS DOUBLE)) AS episode_accuracy,
                   sum(cost_usd) AS episode_cost
            FROM trajectories
            WHERE study = $study AND coalesce(split, '{NONE_LABEL}') = $split {only}
            GROUP BY method, seed, episode
        ), per_bucket AS (
            SELECT method, seed, (episode // $bucket) * $bucket AS episode,
                   avg(episode_return) AS r, avg(episode_accuracy) AS a, avg(episode_cost) AS c
            FROM per_episode
            GROUP BY method, seed, (episode // $bucket) * $bucket
        )
        SELECT method, episode,
               avg(r) AS return_mean, coalesce(stddev_samp(r), 0) AS return_std,
               avg(a) AS accuracy_mean, coalesce(stddev_samp(a), 0) AS accuracy_std,
               avg(c) AS cost_mean, coalesce(stddev_samp(c), 0) AS cost_std,
               count(*) AS n_seeds
        FROM per_bucket
        GROUP BY method, episode
        ORDER BY method, episode
        """,
        params,
    )


def executor_mix(con: duckdb.DuckDBPyConnection, study: str, split: str, bucket: int,
                 methods: list[str] | None = None) -> pl.DataFrame:
    """Per method, episode bucket and executor: the share of steps (all seeds pooled) in which the
    executor was asked. A step asking several executors counts for each, so shares may sum past 1.
    `methods` limits the rows (None: every method)."""
    params: dict[str, Any] = {"study": study, "split": split, "bucket": int(bucket)}
    only = _methods_clause(methods, params)
    return _frame(
        con,
        f"""
        WITH steps AS (
            SELECT method, (episode // $bucket) * $bucket AS episode, executors
            FROM trajectories
            WHERE study = $study AND coalesce(split, '{NONE_LABEL}') = $split {only}
        ), totals AS (
            SELECT method, episode, count(*) AS n_steps FROM steps GROUP BY method, episode
        ), asked AS (
            SELECT method, episode, unnest(list_distinct(executors)) AS executor FROM steps
        )
        SELECT a.method, a.episode, a.executor,
               count(*) / any_value(t.n_steps) AS share, any_value(t.n_steps) AS n_steps
        FROM asked a JOIN totals t USING (method, episode)
        GROUP BY a.method, a.episode, a.executor
        ORDER BY a.method, a.executor, a.episode
        """,
        params,
    )


def study_summary(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """A study's summary rows, mean and std over seeds per (method, split, operating point);
    n_items is per seed."""
    return _frame(
        con,
        """
        SELECT method, split, operating_point,
               avg(accuracy) AS accuracy, coalesce(stddev_samp(accuracy), 0) AS accuracy_std,
               avg(cost_per_item_usd) AS cost_per_item_usd,
               coalesce(stddev_samp(cost_per_item_usd), 0) AS cost_std,
               avg(calls_per_item) AS calls_per_item,
               avg("return") AS "return",
               count(DISTINCT seed) AS n_seeds,
               CAST(round(avg(n_items)) AS BIGINT) AS n_items,
               string_agg(DISTINCT run_id, ',' ORDER BY run_id) AS run_ids
        FROM summaries LEFT JOIN runs USING (study, method, seed, split, operating_point)
        WHERE study = $study
        GROUP BY method, split, operating_point
        ORDER BY split, method, operating_point
        """,
        {"study": study},
    )


def credit_summary(con: duckdb.DuckDBPyConnection, study: str) -> pl.DataFrame:
    """Per-agent Shapley credit of a study's replayed trajectories (`dlab credit`): per method, role
    and agent the mean credit over trajectories (each seed averaged first, then over seeds), its
    std over seeds, and how often it was positive / negative."""
    return _frame(
        con,
        """
        WITH s AS (SELECT method, role, agent, seed, avg(credit) AS c,
                          avg((credit > 1e-12)::DOUBLE) AS pos, avg((credit < -1e-12)::DOUBLE) AS neg,
                          count(*) AS n
                   FROM credit WHERE study = $study GROUP BY method, role, agent, seed)
        SELECT method, role, agent, avg(c) AS mean_credit, coalesce(stddev_samp(c), 0) AS credit_std,
               avg(pos) AS positive_share, avg(neg) AS negative_share, count(*) AS n_seeds,
               CAST(sum(n) AS BIGINT) AS n_trajectories
        FROM s GROUP BY method, role, agent
        ORDER BY method, role DESC, agent
        """,
        {"study": study},
    )


# ---------------------------------------------------------------------------------------------
# Trajectories


def _where(study: str, method: str | None = None, seed: int | None = None, item_id: str | None = None) -> tuple[str, dict[str, Any]]:
    clauses, params = ["study = $study"], {"study": study}
    if method is not None:
        clauses.append("method = $method")
        params["method"] = method
    if seed is not None:
        clauses.append("seed = $seed")
        params["seed"] = int(seed)
    if item_id is not None:
        clauses.append("item_id = $item_id")
        params["item_id"] = item_id
    return " AND ".join(clauses), params


def trajectory_studies(con: duckdb.DuckDBPyConnection) -> list[str]:
    return _values(con, "SELECT DISTINCT study FROM trajectories WHERE study IS NOT NULL ORDER BY study")


def trajectory_methods(con: duckdb.DuckDBPyConnection, study: str) -> list[str]:
    return _values(con, "SELECT DISTINCT method FROM trajectories WHERE study = $study ORDER BY method", {"study": study})


def trajectory_points(con: duckdb.DuckDBPyConnection, root: str) -> dict[tuple[str, str, str, int], str]:
    """(study, method, operating point, seed) -> the trajectory partition holding that point's steps,
    as each study wrote it in its partitions' files (`store.read_trajectory_points`), kept only where
    the trajectory files hold that partition at that seed: what links into Trajectories use."""
    on_disk = set(con.sql("SELECT DISTINCT study, method, seed FROM trajectories WHERE study IS NOT NULL").fetchall())
    return {key: partition for key, partition in read_trajectory_points(Layout(Path(root))).items()
            if (key[0], partition, key[3]) in on_disk}


def trajectory_seeds(con: duckdb.DuckDBPyConnection, study: str, method: str | None = None) -> list[int]:
    where, params = _where(study, method)
    return [int(s) for s in _values(con, f"SELECT DISTINCT seed FROM trajectories WHERE {where} ORDER BY seed", params)]


def trajectory_items(
    con: duckdb.DuckDBPyConnection, study: str, method: str | None = None, seed: int | None = None,
    search: str = "", limit: int = 200,
) -> tuple[list[str], int]:
    """(item ids containing `search` (case-insensitive), the first `limit` in order; how many match)."""
    where, params = _where(study, method, seed)
    params["pattern"] = f"%{search.strip()}%"
    found = _frame(
        con,
        f"""SELECT item_id, count(*) OVER () AS n FROM (
                SELECT DISTINCT item_id FROM trajectories
                WHERE {where} AND item_id IS NOT NULL AND item_id ILIKE $pattern)
            ORDER BY item_id LIMIT {int(limit)}""",
        params,
    )
    return found["item_id"].to_list(), int(found["n"][0]) if found.height else 0


def item_runs(con: duckdb.DuckDBPyConnection, study: str, item_id: str) -> pl.DataFrame:
    """(method, seed, steps) of every run of a study that visited the item."""
    where, params = _where(study, item_id=item_id)
    return _frame(con, f"SELECT method, seed, count(*) AS steps FROM trajectories WHERE {where} GROUP BY ALL ORDER BY method, seed", params)


def count_steps(
    con: duckdb.DuckDBPyConnection, study: str, method: str | None = None, seed: int | None = None, item_id: str | None = None
) -> int:
    where, params = _where(study, method, seed, item_id)
    return int(_values(con, f"SELECT count(*) FROM trajectories WHERE {where}", params)[0])


STEP_COLUMNS = """method, seed, episode, step, split, item_id, action,
                  array_to_string(executors, ', ') AS executors, correct, cost_usd, reward, calls, extra"""


def steps_page(
    con: duckdb.DuckDBPyConnection,
    study: str,
    method: str | None = None,
    seed: int | None = None,
    item_id: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> pl.DataFrame:
    """One page of steps in (method, seed, episode, step) order."""
    where, params = _where(study, method, seed, item_id)
    return _frame(
        con,
        f"""SELECT {STEP_COLUMNS} FROM trajectories WHERE {where}
            ORDER BY method, seed, episode, step LIMIT {int(limit)} OFFSET {int(offset)}""",
        params,
    )


def item_steps(con: duckdb.DuckDBPyConnection, study: str, method: str, seed: int, item_id: str, limit: int = 1000) -> pl.DataFrame:
    """Every step of one (study, method, seed, item) in the order it happened."""
    where, params = _where(study, method, seed, item_id)
    return _frame(
        con,
        f"SELECT {STEP_COLUMNS} FROM trajectories WHERE {where} ORDER BY episode, step LIMIT {int(limit)}",
        params,
    )


def item_card(con: duckdb.DuckDBPyConnection, item_id: str) -> dict[str, Any] | None:
    """The item's question, gold answer, split and difficulty (None when data/items lacks it)."""
    frame = _frame(
        con,
        "SELECT item_id, split, difficulty, domain, gold, question, choices FROM items WHERE item_id = $item_id LIMIT 1",
        {"item_id": item_id},
    )
    return frame.row(0, named=True) if frame.height else None


def item_answers(con: duckdb.DuckDBPyConnection, item_id: str) -> pl.DataFrame:
    """Every solver's cached answer to the item with its label; answers a label names (the current
    request) come first, stale cached answers after them."""
    return _frame(
        con,
        """
        SELECT a.solver, a.parsed_answer, l.correct, l.method AS label_method, a.cost_usd,
               a.tokens_in, a.tokens_out, a.error, l.request_hash IS NOT NULL AS labelled
        FROM answers a
        LEFT JOIN labels l ON l.solver = a.solver AND l.item_id = a.item_id AND l.request_hash = a.request_hash
        WHERE a.item_id = $item_id
        ORDER BY labelled DESC, a.solver
        """,
        {"item_id": item_id},
    )


def pretty_extra(extra: str | None) -> Any:
    """The `extra` JSON of a step as an object (the raw text when it is not JSON)."""
    if extra is None:
        return {}
    try:
        return json.loads(extra)
    except json.JSONDecodeError:
        return extra


# ---------------------------------------------------------------------------------------------
# Paper vs reproduction


PROVENANCE = ("computed", "calibrated", "setting")
# a last key segment naming a spread, a test statistic or a count: not a quantity whose relative
# difference from the paper means anything
NOT_COMPARABLE = re.compile(r"(^|_)(std|sd|stderr|se)$|(^|_)p(_|$)|p_?value|wilcoxon|^count$|^n$|^n_|^seeds_|_count$")
WITHIN = 5.0  # percent: "reproduced" in the per-study summary


def comparable(metric: str) -> bool:
    """Whether a paper-vs-ours row is a quantity worth a relative difference (not a std, p-value or count)."""
    return not NOT_COMPARABLE.search(metric.rsplit(".", 1)[-1])


def paper_tables(metrics_dir: Path) -> dict[str, pl.DataFrame]:
    """Per study: metric | provenance | paper | ours | difference | relative difference (ours vs paper,
    in % of |paper|) | charted, from every metrics/<study>.json carrying paper figures. Values that
    are not numbers (worded claims, lists) go to the "as given" text columns; `charted` is true for a
    comparable quantity (not a std, p-value or count) with a non-zero numeric paper value."""
    out = {}
    for study, rows in read_all(metrics_dir).items():
        table = []
        for row in rows:
            paper, ours, diff = _number(row["paper"]), _number(row["ours"]), row["difference"]
            provenance = row.get("provenance", "computed")
            provenance = provenance.get("kind", "computed") if isinstance(provenance, dict) else str(provenance)
            rel = 100.0 * diff / abs(paper) if diff is not None and paper else None
            table.append({
                "metric": row["metric"],
                "provenance": provenance,
                "why": row.get("why"),
                "paper": paper,
                "ours": ours,
                "difference": None if diff is None else float(diff),
                "relative difference %": rel,
                "charted": rel is not None and ours is not None and comparable(row["metric"]),
                "not charted because": ("the paper has no figure for it (a value of ours marked with its provenance)"
                                        if row["paper"] is None else _why_not_charted(row["metric"], paper, ours)),
                "paper (as given)": None if paper is not None else _text(row["paper"]),
                "ours (as given)": None if ours is not None else _text(row["ours"]),
            })
        out[study] = pl.DataFrame(table, schema={
            "metric": pl.String, "provenance": pl.String, "why": pl.String, "paper": pl.Float64, "ours": pl.Float64, "difference": pl.Float64,
            "relative difference %": pl.Float64, "charted": pl.Boolean, "not charted because": pl.String,
            "paper (as given)": pl.String, "ours (as given)": pl.String,
        })
    return out


def _why_not_charted(metric: str, paper: float | None, ours: float | None) -> str | None:
    if paper is None:
        return "the paper's value is worded or not a number"
    if ours is None:
        return "ours is not a number"
    if paper == 0:
        return "the paper's value is 0 (no relative difference)"
    if not comparable(metric):
        return "a spread, test statistic or count"
    return None


NOT_FITTED = "paper's value, not fitted"
NOT_FITTED_WHY = ("the paper's value, not fitted to these answers: this project replays real answers, no solver was "
                  "set to the paper's figures, so the difference is a measurement, not agreement by construction")


def answers_simulated(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the project's cached answers come from the simulated solvers (the embedded default),
    the only ones a `calibrated` row about solver accuracy and price can have been calibrated."""
    backends = _values(con, "SELECT DISTINCT backend FROM answers WHERE backend IS NOT NULL")
    return not backends or set(backends) == {"simulated"}


def mark_not_fitted(table: pl.DataFrame, simulated: bool) -> pl.DataFrame:
    """On real (replayed) answers, rows marked `calibrated` because the simulated solvers were set to
    the paper's figures (History Matters' always-A accuracy and price) were calibrated to nothing
    here: they become NOT_FITTED with the reason, never shown as agreement by construction."""
    if simulated or table.is_empty():
        return table
    hit = (pl.col("provenance") == "calibrated") & pl.col("why").fill_null("").str.contains("simulated")
    return table.with_columns(pl.when(hit).then(pl.lit(NOT_FITTED)).otherwise(pl.col("provenance")).alias("provenance"),
                              pl.when(hit).then(pl.lit(NOT_FITTED_WHY)).otherwise(pl.col("why")).alias("why"))


def within_summary(table: pl.DataFrame, within: float = WITHIN) -> tuple[int, int]:
    """(n, m): of the m charted rows computed by us (not calibrated to the paper, not a setting read
    back), n lie within `within` % of the paper."""
    mine = table.filter(pl.col("charted") & (pl.col("provenance") == "computed"))
    return int((mine["relative difference %"].abs() <= within).sum()), mine.height


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


# ---------------------------------------------------------------------------------------------
# Compare: two points' item-level outcomes (results/outcomes/<study>.parquet)


def outcome_points(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every point with item-level outcomes: study, method, operating point, split, dataset, verifier,
    seeds and items."""
    return _frame(
        con,
        """
        SELECT study, method, operating_point, split, dataset, verifier,
               count(DISTINCT seed) AS n_seeds, count(DISTINCT item_id) AS n_items
        FROM outcomes GROUP BY ALL ORDER BY dataset, split, study, method, operating_point
        """,
    )


def point_outcomes(con: duckdb.DuckDBPyConnection, study: str, method: str, operating_point: str, split: str) -> pl.DataFrame:
    """seed, item_id, correct, cost_usd of one point, in (seed, item) order."""
    return _frame(
        con,
        """SELECT seed, item_id, correct, cost_usd FROM outcomes
           WHERE study = $study AND method = $method AND operating_point = $op AND split = $split
           ORDER BY seed, item_id""",
        {"study": study, "method": method, "op": operating_point, "split": split},
    )


def item_slices(con: duckdb.DuckDBPyConnection, item_ids: list[str]) -> pl.DataFrame:
    """item_id, domain, difficulty of these items (from data/items): the slices of a breakdown."""
    return _frame(con, "SELECT DISTINCT item_id, domain, difficulty FROM items WHERE list_contains($ids, item_id) ORDER BY item_id",
                  {"ids": list(item_ids)})


def point_runs(con: duckdb.DuckDBPyConnection, study: str, method: str, operating_point: str, split: str) -> list[str]:
    """The MLflow runs behind a point (its summary rows' run ids)."""
    return _values(
        con,
        """SELECT DISTINCT run_id FROM runs
           WHERE study = $study AND method = $method AND operating_point = $op AND split = $split AND run_id IS NOT NULL
           ORDER BY run_id""",
        {"study": study, "method": method, "op": operating_point, "split": split},
    )


def mlflow_run_url(ui_url: str, run_id: str) -> str:
    """The MLflow UI's page of a run (its `#/runs/<id>` route redirects to the run's experiment)."""
    return f"{ui_url.rstrip('/')}/#/runs/{run_id}"
