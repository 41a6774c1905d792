"""The `dlab` command: params docs and profiles, calibration, cache import, queries, run comparison."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml

from delegation_lab.params.root import deep_merge, load_params, parse_params, read_yaml
from delegation_lab.errors import ConfigError, InputError, short_repr
from delegation_lab.pipeline.layout import Layout
from delegation_lab.routers import ROUTERS
from delegation_lab.solvers.params import SCORE_THRESHOLD
from delegation_lab.solvers.replay import FORMATS

app = typer.Typer(help="delegation-lab: cost-aware delegation experiments.", no_args_is_help=True)
params_app = typer.Typer(help="Inspect and apply params.yaml profiles and docs.", no_args_is_help=True)
app.add_typer(params_app, name="params")

PROFILES_DIR = Path("profiles")
TABLE_MAX_ROWS = 10_000
UVICORN_LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
"""`dlab query --format table` holds what it prints in memory: at most this many rows."""


def fail(message: str, code: int = 1) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(code)


def emit(text: str, out: Path | None) -> None:
    """Print `text`, or write it to `out` and say so."""
    if out:
        out.write_text(text)
        typer.echo(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


@params_app.command("check")
def params_check(path: Path = Path("params.yaml")) -> None:
    """Validate a params file; exit 2 naming every bad key, every key a stage of the dvc.yaml beside it
    names and the file lacks, every replayed answer the label stage could not label, and a replayed
    cache that cannot keep the published split `data.split: as_published` asks for."""
    import contextlib

    from delegation_lab.data.replay import published_split_problems
    from delegation_lab.labeling.preflight import unlabelled_problems
    from delegation_lab.params.dag_keys import missing_key_problems

    try:
        params = load_params(path)
        problems = missing_key_problems(path)
        if not problems:
            with contextlib.chdir(path.parent):  # the stages run there: the caches' paths are relative to it
                problems = published_split_problems(params.data) or unlabelled_problems(params)
        if problems:
            raise ConfigError(str(path), problems)
    except ConfigError as e:
        fail(str(e), 2)
    typer.echo(f"{path}: ok")


@params_app.command("docs")
def params_docs(
    out: Annotated[Path, typer.Option(help="write the table here")] = Path("docs/params.md"),
    check: Annotated[bool, typer.Option(help="only check that `out` is current")] = False,
) -> None:
    """Render every params key with its type, default and description (docs/params.md)."""
    from delegation_lab.params.docs import render_params_docs

    text = render_params_docs()
    if check:
        if not out.exists() or out.read_text() != text:
            fail(f"{out} is stale; run `dlab params docs`", 1)
        typer.echo(f"{out}: current")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    typer.echo(f"wrote {out}")


@params_app.command("profile")
def params_profile(
    name: Annotated[str, typer.Argument(help="profile name: a file profiles/<name>.yaml")],
    path: Path = Path("params.yaml"),
) -> None:
    """Overlay profiles/<name>.yaml onto params.yaml (validated first, then written atomically)."""
    overlay_path = PROFILES_DIR / f"{name}.yaml"
    try:
        base = read_yaml(path)
        overlay = read_yaml(overlay_path)
        if not isinstance(overlay, dict):
            raise ConfigError(str(overlay_path), ["(top level): expected a mapping of sections"])
        merged = deep_merge(base, overlay)
        parse_params(merged, f"{path} + {overlay_path}")
    except ConfigError as e:
        fail(str(e), 2)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"# profile `{name}` applied from {overlay_path}\n" + yaml.safe_dump(merged, sort_keys=False))
    tmp.replace(path)
    typer.echo(f"applied profile {name} to {path}")


@app.command("calibrate")
def calibrate(
    targets: Annotated[list[str], typer.Argument(help="SOLVER=ACCURACY pairs, e.g. A=0.967 B=0.845")],
    items: Annotated[Path, typer.Option(help="items whose difficulties define the mix")] = Layout().items("ability"),
    params_path: Annotated[Path, typer.Option("--params")] = Path("params.yaml"),
) -> None:
    """Print the simulated `skill` that gives each solver its target accuracy on these difficulties."""
    import polars as pl

    from delegation_lab.solvers.simulated import calibrate_skill

    import math

    wanted: list[tuple[str, float]] = []
    for pair in targets:  # every target checked before anything is read or printed
        name, _, value = pair.partition("=")
        try:
            accuracy = float(value)
        except ValueError:
            accuracy = math.nan
        if not 0 < accuracy < 1:
            fail(f"error: {pair!r}: give SOLVER=ACCURACY with an accuracy strictly between 0 and 1, e.g. A=0.967", 2)
        wanted.append((name, accuracy))
    try:
        params = load_params(params_path)
    except ConfigError as e:
        fail(str(e), 2)
    if not items.exists():
        fail(f"{items}: not found; run `dvc repro prepare` first")
    difficulties = pl.read_parquet(items)["difficulty"].to_numpy()
    for name, accuracy in wanted:
        solver = params.solvers.get(name)
        if solver is None or solver.simulated is None:
            fail(f"{name}: not a simulated solver in {params_path}")
        skill = calibrate_skill(accuracy, difficulties, solver.simulated.difficulty_slope)
        typer.echo(f"solvers.{name}.simulated.skill: {skill:.4f}   # target {accuracy:.3f}")


@app.command("import")
def import_cache(
    path: Annotated[str, typer.Argument(help="cache to inspect: a file, a folder, or a glob (quote it)")],
    format: Annotated[str, typer.Option(help=" | ".join(FORMATS.names()))] = "routellm_csv",
    items_dir: Annotated[Path, typer.Option(help="folder of {split}.parquet items to match against")] = Layout().items_dir,
    field: Annotated[list[str] | None, typer.Option(
        help="which column (long_table) or record field (zeroeval) holds a key, e.g. --field question=prompt "
             "--field gold=target; a key the format does not read is refused"
    )] = None,
    trust_pickle: Annotated[bool, typer.Option(help="allow unpickling a routerbench_pickle: unpickling runs arbitrary code")] = False,
    score_threshold: Annotated[float, typer.Option(
        min=0, max=1, help="a score at or above this counts as correct (caches that grade with a score)")] = SCORE_THRESHOLD,
    json_out: Annotated[Path | None, typer.Option(
        "--json", help="also write the report as JSON to this file (per model: n_items, accuracy, no_answer, agreement)")] = None,
    max_memory_gb: Annotated[float | None, typer.Option(
        min=0.001, help="refuse a cache whose estimated memory is over this many GB "
        "(default: $DLAB_IMPORT_MAX_MEMORY_GB, else 2; see docs/scaling.md)")] = None,
) -> None:
    """Inspect another benchmark's answer cache: its files and domains, its models, how many rows
    match our items by question text (unmatched counted, with examples), each model's imported
    accuracy over distinct questions and our labeler's where a gold is known (the cache's own, else
    the matching item's), and the params.yaml `solvers` entries that replay it, with a TODO where
    each price belongs (then `dvc repro` imports it through the `solve` stage). A RouterBench pickle is
    loaded only with --trust-pickle: unpickling runs arbitrary code. A cache whose estimated memory
    is over --max-memory-gb is refused before it is read; bad numbers, duplicated columns and
    non-UTF-8 bytes are refused naming the file, row and column."""
    from pydantic import ValidationError

    from delegation_lab.solvers.params import LongTableFields
    from delegation_lab.solvers.replay.import_report import build_import
    from delegation_lab.solvers.replay.routerbench_pickle import PICKLE_WARNING

    if format == "routerbench_pickle" or Path(str(path)).suffix.lower() in (".pkl", ".pickle"):
        typer.echo(f"WARNING: {path}: {PICKLE_WARNING}", err=True)

    mapping = {}
    for pair in field or []:
        key, sep, column = pair.partition("=")
        if not sep:
            fail(f"--field {pair!r}: expected KEY=COLUMN (keys: {', '.join(LongTableFields.model_fields)})", 2)
        mapping[key] = column or None
    try:
        fields = LongTableFields.model_validate(mapping)
    except ValidationError as e:
        fail(f"--field: {e.errors()[0]['loc'][0]}: {e.errors()[0]['msg']} (keys: {', '.join(LongTableFields.model_fields)})", 2)
    try:
        report = build_import(path, format, items_dir, fields, trust_pickle, score_threshold, max_memory_gb)
    except (InputError, FileNotFoundError) as e:
        fail(f"error: {e}", getattr(e, "exit_code", 1))
    typer.echo(report.text)
    if json_out is not None:
        try:
            json_out.write_text(json.dumps(report.summary, indent=2) + "\n", encoding="utf-8")
        except OSError as e:
            fail(f"error: --json {json_out}: {e.strerror or e}")


@app.command("query")
def query(
    sql: Annotated[str, typer.Argument(help="one read-only SQL statement over the views")],
    format: Annotated[str, typer.Option(help="table | csv | json")] = "table",
    root: Annotated[Path, typer.Option(help="project root holding data/ and results/")] = Path("."),
    limit: Annotated[int, typer.Option(min=1, help="rows to print in table format")] = 50,
    timeout: Annotated[float, typer.Option(help="stop the statement after this many seconds; 0 = no limit")] = 30.0,
    max_rows: Annotated[int, typer.Option(min=0, help="csv / json: write at most this many result rows; 0 = no limit")] = 10_000,
    memory_limit: Annotated[str | None, typer.Option(
        help="DuckDB's memory for the query (e.g. 512MiB, 2GB); past it, it spills to a private temporary folder. "
             "Default: the smaller of 1 GiB and a quarter of the machine's memory")] = None,
    out: Annotated[Path | None, typer.Option(
        help="csv / json: write the rows to this file, replaced only when the query succeeds")] = None,
) -> None:
    """Query items, answers, labels, ability_map, trajectories, summaries, frontier and credit with
    DuckDB. Read-only: one SELECT (or EXPLAIN [ANALYZE] of one) is run, anything else is refused,
    and the connection cannot open any file; lists and structs print as JSON in csv. csv and json
    rows are written as they arrive (memory stays bounded whatever the result's size); a query
    stopped part-way (timeout, memory) exits 2 after the rows already written to stdout, while
    --out FILE is left as it was. The statement runs in a child process whose memory is capped at
    --memory-limit plus headroom."""
    import os
    from contextlib import nullcontext

    from delegation_lab.pipeline.layout import Layout
    from delegation_lab.pipeline.tables import replaced_on_success
    from delegation_lab.query.output import write_rows
    from delegation_lab.query.sealed import query_rows, stream_query

    if format not in ("table", "csv", "json"):
        fail(f"--format must be table, csv or json (got {format[:40]!r})", 2)
    if out is not None and format == "table":
        fail("error: --out writes csv or json: add --format csv or --format json", 2)
    if format == "table" and limit > TABLE_MAX_ROWS:  # the table is built in memory: bounded like a screen
        fail(f"error: --limit {limit}: the table format shows at most {TABLE_MAX_ROWS} rows; use --format csv or json "
             "(written as the rows arrive) for more", 2)
    try:
        if format == "table":
            result = query_rows(Layout(root), sql, timeout_s=timeout, max_rows=limit, memory_limit=memory_limit)
            _print_table(result.frame, limit, result.truncated)
            return
        with (stream_query(Layout(root), sql, timeout_s=timeout, memory_limit=memory_limit) as stream,
              replaced_on_success(out) if out else nullcontext(sys.stdout) as sink):
            written = write_rows(format, stream.schema, stream, sink, max_rows or None)
            sink.flush()
    except InputError as e:
        sys.stdout.flush()
        fail(f"error: {e}", 2)
    except BrokenPipeError:  # `dlab query ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's recipe: no error at exit's flush
        raise typer.Exit(0) from None
    except OSError as e:
        if out is None:
            raise
        fail(f"error: --out {out}: {e.strerror or e}", 2)  # a folder that is missing or not writable
    if out:
        typer.echo(f"wrote {written.rows} rows to {out}")
    if written.truncated:
        typer.echo(f"note: output stopped at --max-rows {max_rows} rows; the query has more (add a LIMIT or raise --max-rows)", err=True)


def _print_table(frame, limit: int, truncated: bool) -> None:
    import polars as pl

    with pl.Config(tbl_rows=limit, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200):
        typer.echo(frame)
    if truncated:
        typer.echo(f"note: showing the first {limit} rows; the query has more (raise --limit, or --format csv)", err=True)


runs_app = typer.Typer(help="Compare and prune MLflow runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")

from delegation_lab.games.cli import game_app  # noqa: E402 - the `history_game` study's sub-command

app.add_typer(game_app, name="game")

from delegation_lab.credit.cli import credit_command  # noqa: E402 - the `credit` study's command

app.command("credit")(credit_command)


@runs_app.command("compare")
def runs_compare(
    study: Annotated[str, typer.Option(help="MLflow experiment (one per study)")],
    metric: Annotated[list[str] | None, typer.Option(help="metric(s) to show; default all")] = None,
    format: Annotated[str, typer.Option(help="markdown | csv | json")] = "markdown",
    out: Annotated[Path | None, typer.Option(help="write here instead of printing")] = None,
    params_path: Annotated[Path, typer.Option("--params")] = Path("params.yaml"),
) -> None:
    """Methods x metrics, mean and std over seeds, from the study's latest stage run."""
    from delegation_lab.tracking.compare import compare_runs, format_table
    from delegation_lab.tracking.tracker import resolve_uri

    try:
        uri = resolve_uri(load_params(params_path).tracking.uri, params_path.resolve().parent)
        table = format_table(compare_runs(uri, study, metric), format)
    except ConfigError as e:
        fail(str(e), 2)
    except InputError as e:
        fail(f"error: {e}", 1)
    emit(table, out)


@runs_app.command("prune")
def runs_prune(
    keep: Annotated[int, typer.Option(min=1, help="newest runs kept per stage")] = 1,
    study: Annotated[str | None, typer.Option(help="only this experiment; default every one")] = None,
    params_path: Annotated[Path, typer.Option("--params")] = Path("params.yaml"),
) -> None:
    """Hard-delete all but the KEEP newest runs of every stage (children included) and vacuum the store."""
    from delegation_lab.tracking.tracker import Tracker

    try:
        params = load_params(params_path)
    except ConfigError as e:
        fail(str(e), 2)
    tracker = Tracker(params.tracking, params_path.resolve().parent)
    if not params.tracking.enabled:
        fail("error: tracking.enabled is false: there is no store to prune", 1)
    names = [study] if study else [e.name for e in tracker.client.search_experiments()]
    for name in names:
        deleted = tracker.prune(name, None, keep)
        print(f"{name}: {len(deleted)} stage run(s) deleted, the newest {keep} per stage kept")


@app.command("report")
def report(
    metrics_dir: Annotated[Path, typer.Option(help="folder of <study>.json metrics")] = Layout().metrics_dir,
    out: Annotated[Path | None, typer.Option(help="write the output here instead of printing")] = None,
    format: Annotated[str, typer.Option(help="markdown | json (rows: study, key, paper, ours, difference, provenance, why)")] = "markdown",
    headline: Annotated[bool, typer.Option(help="the README's table: computed rows only, then the calibrated inputs and settings")] = False,
    timings: Annotated[bool, typer.Option(help="print metrics/timings/*.json instead: each stage's seconds, CPU seconds, share, phases")] = False,
) -> None:
    """Paper figures beside ours for every study (metrics/*.json, keys with a `paper` segment), each
    row with its provenance: computed, calibrated (an input chosen to match the paper) or setting (a
    configured value read back), from the file's `provenance` block."""
    import json

    from delegation_lab.reporting.paper import headline_markdown, read_all, report_rows
    from delegation_lab.tracking.compare import markdown_table

    if format not in ("markdown", "json"):
        fail(f"--format must be markdown or json (got {format!r})", 2)
    if timings:
        from delegation_lab.pipeline.timings import read_timings, timings_markdown

        try:
            rows = read_timings(metrics_dir / "timings")
        except InputError as e:
            fail(f"error: {e}")
        if not rows:
            fail(f"no timings in {metrics_dir / 'timings'}/*.json yet; run `dvc repro` first")
        emit(json.dumps(rows, indent=2) + "\n" if format == "json" else timings_markdown(rows), out)
        return
    try:
        studies = read_all(metrics_dir)
    except InputError as e:
        fail(f"error: {e}")
    if not studies:
        fail(f"no paper figures in {metrics_dir}/*.json yet; run `dvc repro` first")
    if format == "json":
        text = json.dumps(report_rows(studies), indent=2, default=str) + "\n"
    elif headline:
        text = headline_markdown(studies)
    else:
        text = "".join(
            f"## {study}\n\n" + markdown_table(rows, ["metric", "paper", "ours", "difference", "provenance", "why"]) + "\n"
            for study, rows in studies.items()
        )
    emit(text, out)


@app.command("dashboard")
def dashboard(
    port: int = 8501,
    root: Annotated[Path, typer.Option(help="project root to show (sets DLAB_ROOT)")] = Path("."),
    headless: Annotated[bool, typer.Option(help="do not open a browser (servers without a display)")] = False,
) -> None:
    """Start the Streamlit dashboard (dashboards/app.py) on localhost."""
    import os
    import subprocess

    env = {**os.environ, "DLAB_ROOT": str(root.resolve())}
    app_path = Path(__file__).resolve().parents[2] / "dashboards" / "app.py"
    raise typer.Exit(subprocess.call(
        [sys.executable, "-m", "streamlit", "run", str(app_path), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", str(headless).lower(), "--browser.gatherUsageStats", "false"],
        env=env,
    ))


@app.command("route")
def route(
    questions: Annotated[list[str], typer.Argument(help="questions to route")],
    router: Annotated[str, typer.Option(help=f"saved router: {', '.join(ROUTERS.names())}")] = ROUTERS.names()[0],
    op: Annotated[str | None, typer.Option(help="operating point label, e.g. lambda=0.2 (default: the router's first)")] = None,
    models: Annotated[Path, typer.Option(help="folder of saved routers")] = Layout().router("x").parent,
) -> None:
    """Route new questions with a router the `routers` stage saved: chosen solver, predicted scores, expected cost."""
    from delegation_lab.routers.serve import route_questions

    if router not in ROUTERS:
        fail(f"route: --router: unknown router {router!r}; known: {', '.join(ROUTERS.names())}", 2)
    try:
        typer.echo(route_questions(models / Layout().router(router).name, op, questions), nl=False)
    except InputError as e:
        fail(f"route: {e}", e.exit_code)


@app.command("serve")
def serve(
    model: Annotated[list[str] | None, typer.Option(
        "--model", help="a policy to serve (repeat): solver:A, router:knn@lambda=0.5, cascade:B>A; "
                        "default: every solver and every saved router at each operating point")] = None,
    root: Annotated[Path, typer.Option(help="project folder holding params.yaml, models/ and data/")] = Path("."),
    host: Annotated[str, typer.Option(help="address to bind; anything but loopback needs --api-key-env")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="0 = any free port (printed on start)")] = 8000,
    api_key_env: Annotated[str | None, typer.Option(help="environment variable holding the key clients must send")] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="requests answered at once")] = 64,
    queue_size: Annotated[int, typer.Option(min=0, help="requests waiting beyond those; one more gets 429")] = 256,
    max_body_bytes: Annotated[int, typer.Option(min=1024, help="largest request body; larger gets 413")] = 1 << 20,
    log_level: Annotated[str, typer.Option(help="uvicorn's log level")] = "info",
    max_body_bytes_in_flight: Annotated[int, typer.Option(
        min=1024, help="request-body bytes all clients together may have in memory; past it 429")] = 64 << 20,
    header_timeout: Annotated[float, typer.Option(
        min=0.1, max=3600, help="seconds a connection has to send a complete request head")] = 30.0,
) -> None:
    """Serve saved policies as an OpenAI-compatible endpoint (POST /v1/chat/completions, GET /v1/models,
    /health, /metrics), journalling every answer into data/served/ (docs/serving.md)."""
    from delegation_lab.serve.app import ServeOptions
    from delegation_lab.serve.app import serve as run_server

    if log_level.lower() not in UVICORN_LOG_LEVELS:
        fail(f"error: --log-level {log_level[:40]!r}: one of {', '.join(UVICORN_LOG_LEVELS)}", 2)

    options = ServeOptions(root, host, port, list(model or []), api_key_env, concurrency, queue_size, max_body_bytes,
                           log_level.lower(), header_timeout, max_body_bytes_in_flight)
    try:
        raise typer.Exit(run_server(options))
    except ConfigError as e:
        fail(str(e), 2)
    except InputError as e:
        fail(f"serve: {e}")


@app.command("frontier-table")
def frontier_table(
    metrics: Annotated[Path, typer.Argument(help="a frontier metrics file")] = Layout().metrics("frontier"),
    kinds: Annotated[str, typer.Option(help="comma-separated kinds to list")] = "single,cascade,study,oracle",
    out: Annotated[Path | None, typer.Option(help="write the Markdown here instead of printing")] = None,
) -> None:
    """Every method of a frontier metrics file as Markdown: its most accurate point with the 95 %
    item-level bootstrap intervals, AIQ, the baseline that dominates it, the paired test against
    the best single solver at no more cost, and whether the verifier its decisions rest on is
    deployable (what the README's tables are made from)."""
    import json

    from delegation_lab.tracking.compare import markdown_table

    try:
        summary = json.loads(metrics.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as e:
        fail(f"{metrics}: {e}")
    try:
        text = _frontier_markdown(summary, set(kinds.split(",")), markdown_table)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        fail(f"error: {metrics}: not a frontier metrics file (`dvc repro frontier` writes one): "
             f"{type(e).__name__} {str(e)[:80]}", 2)
    emit(text, out)


def _frontier_markdown(summary: dict, wanted: set[str], markdown_table) -> str:
    """The frontier table's Markdown (frontier-table); KeyError / TypeError on a file of another shape.
    A compared verifier's rows end `[<its compare name>]`; its singles and mixtures, the main set's
    again (they take no accept decision), are left out."""
    from delegation_lab.frontier.verifiers import ORACLE, deployable_note, main_verifier, verifier_summary

    def interval(ci: list[float] | None, fmt: str) -> str:
        return "—" if not ci else f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]"

    main = main_verifier(summary) or {"name": "?"}
    sets = summary.get("verifiers") or {main["name"]: main}
    short = {name: d["compare_name"] for name, d in sets.items() if d.get("compare_name")}
    rows = []
    for name, m in sorted(summary["methods"].items(), key=lambda kv: (-kv[1]["best_accuracy"], kv[1]["best_accuracy_cost_per_item_usd"])):
        again = m["kind"] in ("single", "mixture") and m.get("verifier") not in (main["name"], ORACLE, None)
        if m["kind"] not in wanted or again:
            continue
        if m.get("verifier") in short:
            name = name.removesuffix(f" [{m['verifier']}]") + f" [{short[m['verifier']]}]"
        test = m.get("vs_best_single") or {}
        versus = "—"
        if "p_value" in test:  # a difference within evaluation.ties reads "tie"
            versus = f"{test['against']}: tie" if test.get("tie") else f"{test['against']}: {test['difference']:+.3f}, p={test['p_value']:.2g}"
        dominated = m.get("dominated_by") or (f"ties {m['ties_with']}" if m.get("ties_with") else "—")
        estimated = m.get("cost_rests_on_estimated_tokens")
        rows.append({
            "method": f"{name} †" if estimated else name, "kind": m["kind"], "accuracy": f"{m['best_accuracy']:.3f} {interval(m.get('accuracy_ci'), '.3f')}",
            "cost / item (US$)": f"{m['best_accuracy_cost_per_item_usd']:.3g} {interval(m.get('cost_ci'), '.3g')}",
            "AIQ": f"{m['aiq']:.3f}", "dominated by": dominated, "vs best single (Δ acc, p)": versus,
            "verifier": deployable_note(m["kind"], m.get("verifier_deployable"), m.get("not_deployable")),
        })
    compared = [f"`{d['compare_name']}` = {verifier_summary(d, summary['split'])}" for d in sets.values() if d.get("compare_name")]
    header = (f"{summary['dataset']}, {summary['split']} split ({summary['n_items']} items), verifier "
              f"{verifier_summary(sets.get(main['name'], main), summary['split'])}"
              + (f"; baselines also under {'; '.join(compared)} (rows `[<name>]`, its own Pareto set)" if compared else "")
              + "; accuracy and cost at each method's most accurate point, 95 % item-level bootstrap intervals; "
              "verifier: whether the one a cascade's or study's accept decisions rest on could be deployed.\n\n")
    footer = ""
    if summary.get("ties"):  # metrics written with evaluation.ties
        t = summary["ties"]
        footer += (f"\nTies (`evaluation.ties`): costs within ${t['cost_usd']:g} per item and accuracies within "
                   f"{t['accuracy_items']:g} item(s) ({t['accuracy']:.2g}) are equal. \"dominated by\": the cheapest baseline "
                   "costing no more and at least as accurate, better beyond a tolerance on one of the two; \"ties X\": "
                   "equal to baseline X; \"vs best single\": the most accurate single solver costing no more (within "
                   "the tolerance), \"tie\" when the difference is within it.\n")
    if summary.get("train_choice"):  # metrics written with frontier/choice.py
        footer += "\n" + train_choice_markdown(summary["train_choice"], sets, summary["split"])
    if summary.get("estimated_reasoning_tokens"):
        footer += "\n† cost rests on estimated hidden reasoning tokens: " + "; ".join(
            f"{solver} {e['reasoning_tokens_per_item']} per answer ({e['source']})"
            for solver, e in summary["estimated_reasoning_tokens"].items()) + "\n"
    return header + markdown_table(rows, ["method", "kind", "accuracy", "cost / item (US$)", "AIQ", "dominated by",
                                          "vs best single (Δ acc, p)", "verifier"]) + "\n" + footer


def train_choice_markdown(choices: dict, sets: dict, split: str) -> str:
    """One line per verifier set: the cascade chosen on the search split (frontier/choice.py) and its
    figures on `split` against the strongest single solver."""
    lines = []
    for name, c in choices.items():
        label = sets.get(name, {}).get("compare_name") or name
        if c.get("chosen") is None:
            lines.append(f"- under `{label}`: {c.get('note', 'no choice')}")
            continue
        t, test = c["test"], c["test"]["vs_strongest_single"] or {}
        versus = ("tie" if test.get("tie") else f"{test['difference']:+.3f} [{test['ci_low']:+.3f}, {test['ci_high']:+.3f}], "
                  f"p={test['p_value']:.2g}") if "difference" in test else "—"
        lines.append(f"- under `{label}`: {c['chosen']}: {t['accuracy']:.3f} [{t['accuracy_ci'][0]:.3f}, {t['accuracy_ci'][1]:.3f}] "
                     f"against {c['against']}'s {t['strongest_single_accuracy']:.3f} (paired Δ {versus}) at "
                     f"{100 * t['cost_share']:.0f} % of its cost; goal (within its interval at ≤ "
                     f"{100 * c['goal_cost_share']:.0f} % of its cost): {'met' if c['meets_goal'] else 'not met'}")
    first = next(iter(choices.values()))
    return (f"Chosen on the search split ({first['search_split_items']} items), reported on {split} (frontier/choice.py): "
            f"{first['rule']}.\n\n" + "\n".join(lines) + "\n")


@app.command("gap-table")
def gap_table(
    metrics: Annotated[Path, typer.Argument(help="a frontier metrics file")] = Layout().metrics("frontier"),
    kinds: Annotated[str, typer.Option(help="comma-separated kinds to list")] = "single,cascade,study",
    top: Annotated[int | None, typer.Option(min=1, help="only the N methods closest to the oracle")] = None,
    out: Annotated[Path | None, typer.Option(help="write the Markdown here instead of printing")] = None,
) -> None:
    """Where the oracle gap goes (the frontier metrics' `oracle_gap`, frontier/gap.py) as Markdown: per
    method its accuracy gap split into routing and verifier, its extra dollars into checks, escalations
    and the answering call's premium, with 95 % item-level bootstrap intervals (for a README)."""
    from delegation_lab.frontier.gap import gap_markdown
    from delegation_lab.tracking.compare import markdown_table

    try:
        summary = json.loads(metrics.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as e:
        fail(f"{metrics}: {e}")
    if not isinstance(summary, dict) or "oracle_gap" not in summary:
        fail(f"error: {metrics}: no `oracle_gap` (a frontier metrics file from before the decomposition: `dvc repro frontier`)", 2)
    try:
        text = gap_markdown(summary["oracle_gap"], summary["dataset"], summary["split"], set(kinds.split(",")), top, markdown_table)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        fail(f"error: {metrics}: not a frontier metrics file with an `oracle_gap` (`dvc repro frontier` writes one): "
             f"{type(e).__name__} {str(e)[:80]}", 2)
    emit(text, out)


@app.command("portfolio")
def portfolio(
    project: Annotated[Path, typer.Argument(help="project folder holding params.yaml and data/")] = Path("."),
) -> None:
    """For k = 1 .. portfolio.max_k: the k models and arrangement (single, cost-ordered cascade under
    the shared verifier, or kNN router) chosen on portfolio.select_split, measured on frontier.split with intervals;
    prints the table and writes metrics/portfolio.json and plots/portfolio/portfolio.png there."""
    from delegation_lab.portfolio.selection import write_portfolio
    from delegation_lab.portfolio.report import portfolio_table

    layout = Layout(project)
    try:
        metrics = write_portfolio(layout, load_params(layout.params_file))
    except ConfigError as e:
        fail(str(e), 2)
    except (InputError, FileNotFoundError) as e:
        fail(f"error: {e}")
    typer.echo(portfolio_table(metrics), nl=False)


@app.command("transfer")
def transfer(
    source: Annotated[Path, typer.Argument(help="project folder whose train split the routers are fitted on")],
    target: Annotated[Path, typer.Argument(help="project folder whose test split they are scored on (and fitted on, in domain)")],
    out: Annotated[Path | None, typer.Option(
        help="metrics file to add this direction to (default: TARGET/metrics/transfer.json)")] = None,
) -> None:
    """Cross-benchmark routers: every router of TARGET's `routers` params fitted on SOURCE's train
    split and on TARGET's, on the solvers both name, scored on TARGET's test split with paired
    item-level bootstrap intervals; adds the `SOURCE -> TARGET` entry to --out and prints its table."""
    from delegation_lab.routers.transfer import direction_key, open_project, run_transfer, transfer_markdown, write_transfer

    try:
        src, tgt = open_project(source), open_project(target)
        direction = run_transfer(src, tgt, progress=True)
        out = out or tgt.layout.metrics("transfer")
        write_transfer(direction, direction_key(src, tgt), out)
    except ConfigError as e:
        fail(str(e), 2)
    except (InputError, FileNotFoundError) as e:
        fail(f"error: {e}", 2)
    typer.echo(transfer_markdown({"directions": {direction_key(src, tgt): direction}}), nl=False)
    typer.echo(f"wrote {out} ({direction['runtime_s']} s)")


@app.command("new-model")
def new_model(
    project: Annotated[Path, typer.Argument(help="project folder holding params.yaml and data/ (labels, items, embeddings)")] = Path("."),
    answers: Annotated[list[int] | None, typer.Option(help="labelled answers n given to the new model (repeat; default 0 5 10 20 50 100)")] = None,
    lam: Annotated[list[float] | None, typer.Option("--lambda", help="cost weights lambda to route at (repeat; default 0 0.4)")] = None,
    out: Annotated[Path | None, typer.Option(help="write the Markdown here instead of printing")] = None,
) -> None:
    """A new model with n labelled answers: the `irt` router fitted without each of 10 held-out models
    (the 5 most accurate, 5 drawn), then given n of its answers (`add_model`), against a retrain on
    every model; routed accuracy on test with intervals (docs/new_model.md). Reads the project's data, runs no DVC."""
    from delegation_lab.routers.new_model import ANSWERS, LAMBDAS, new_model_markdown, run_new_model
    from delegation_lab.routers.transfer import open_project

    try:
        result = run_new_model(open_project(project), tuple(answers or ANSWERS), tuple(lam or LAMBDAS), progress=True)
    except ConfigError as e:
        fail(str(e), 2)
    except (InputError, FileNotFoundError) as e:
        fail(f"error: {e}", 2)
    emit(new_model_markdown(result), out)


@app.command("transfer-table")
def transfer_table(
    metrics: Annotated[Path, typer.Argument(help="a transfer metrics file")] = Layout().metrics("transfer"),
    out: Annotated[Path | None, typer.Option(help="write the Markdown here instead of printing")] = None,
) -> None:
    """Every direction of a transfer metrics file (`dlab transfer`) as Markdown tables."""
    from delegation_lab.routers.transfer import transfer_markdown

    try:
        summary = json.loads(metrics.read_text())
    except (OSError, UnicodeDecodeError, RecursionError, json.JSONDecodeError) as e:
        fail(f"{metrics}: {e}")
    try:
        text = transfer_markdown(summary)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        fail(f"error: {metrics}: not a transfer metrics file (`dlab transfer SOURCE TARGET` writes one): "
             f"{type(e).__name__} {str(e)[:80]}", 2)
    emit(text, out)


repro_app = typer.Typer(help="Check a rerun against the committed metrics.", no_args_is_help=True)
app.add_typer(repro_app, name="repro")


@repro_app.command("check")
def repro_check(
    rev: Annotated[str, typer.Option(help="git revision holding the committed metrics")] = "HEAD",
    root: Annotated[Path, typer.Option(help="project root")] = Path("."),
    show: Annotated[str, typer.Option(help="rows to list: outside | all")] = "outside",
) -> None:
    """After `make repro`: is every figure of metrics/*.json the committed one (bit-identical), and if
    not, is every headline inside the interval committed at REV, which figures moved, and under which
    numerics (CPU, libraries, pins) the rerun was computed? Exit 1 when a headline is outside (or missing)."""
    from delegation_lab.reporting.repro_check import check_tree, provenance
    from delegation_lab.tracking.compare import markdown_table

    if show not in ("outside", "all"):
        fail(f"--show must be outside or all, not {show!r}", 2)
    checks = check_tree(root, rev)
    if not checks:
        fail(f"no metric with an interval in {root / 'metrics'} at {rev}")
    listed = [c for c in checks if show == "all" or not c.inside]
    rows = [{"file": c.file, "metric": c.key, "committed": f"{c.committed:.6g}", "interval": f"[{c.low:.6g}, {c.high:.6g}]",
             "rerun": "missing" if c.rerun is None else f"{c.rerun:.6g}", "inside": "yes" if c.inside else "NO"} for c in listed]
    if rows:
        typer.echo(markdown_table(rows, ["file", "metric", "committed", "interval", "rerun", "inside"]))
    inside = sum(c.inside for c in checks)
    typer.echo(f"{inside} of {len(checks)} headline metrics inside their committed {rev} interval")
    origin = provenance(root, rev)
    typer.echo(origin.verdict())
    for file, figures in origin.moved.items():
        for key, old, new in figures[: 20 if show == "all" else 5]:
            typer.echo(f"  moved: {file} {key}: {short_repr(old, 60)} -> {short_repr(new, 60)}")
        if len(figures) > (20 if show == "all" else 5):
            typer.echo(f"  ... {file}: {len(figures)} figures moved in all")
    raise typer.Exit(0 if inside == len(checks) else 1)


tracking_app = typer.Typer(help="The MLflow store parallel runs share.", no_args_is_help=True)
app.add_typer(tracking_app, name="tracking")


@tracking_app.command("serve")
def tracking_serve(
    port: Annotated[int | None, typer.Option(help="default: the port of an http://127.0.0.1:PORT tracking.uri, else 5000")] = None,
    store: Annotated[str | None, typer.Option(help="sqlite store to serve; default: tracking.uri if sqlite, else sqlite:///mlflow.db")] = None,
    experiment: Annotated[list[str] | None, typer.Option(help="more experiments to create before workers start")] = None,
    params_path: Annotated[Path, typer.Option("--params")] = Path("params.yaml"),
    token_env: Annotated[str | None, typer.Option(
        help="name of an environment variable holding a token: only requests with `Authorization: Bearer <token>` "
             "are served (clients: MLFLOW_TRACKING_TOKEN=<token>); without it the server is unauthenticated")] = None,
) -> None:
    """An MLflow server over the project's sqlite store on 127.0.0.1, for parallel writers (`dvc queue start -j N`).
    Unauthenticated unless --token-env names a variable holding a token."""
    import os

    from delegation_lab.tracking.server import serve

    token = None
    if token_env is not None:
        token = os.environ.get(token_env, "")
        if not token:
            fail(f"error: --token-env {token_env[:60]}: the variable is not set or empty", 2)
    try:
        params = load_params(params_path)
        raise typer.Exit(serve(params_path.resolve().parent, params.tracking.uri, port, store, experiment or [], token))
    except ConfigError as e:
        fail(str(e), 2)
    except InputError as e:
        fail(f"error: {e}", 1)


numerics_app = typer.Typer(help="The bits the pinned math libraries compute on this machine.", no_args_is_help=True)
app.add_typer(numerics_app, name="numerics")


@numerics_app.command("fingerprint")
def numerics_fingerprint(
    record: Annotated[bool, typer.Option(help="rewrite the committed record with this machine's values")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the fingerprints as JSON")] = False,
) -> None:
    """Run one small case per kind of operation the studies run (torch matmul, bmm, elementwise,
    reductions, an MLP + Adam step; numpy BLAS and SIMD loops; scipy; polars; DuckDB) under the
    project's numerics pins and print each result's fingerprint beside the committed record and what
    an AMD EPYC computed. Exit 1 when any case differs from the record."""
    import json

    from delegation_lab.pipeline.fingerprint import fingerprints, recorded, report_lines
    from delegation_lab.pipeline.fingerprint import record as write_record

    if record:
        data = write_record()
        typer.echo(f"recorded {len(data['fingerprints'])} fingerprints")
        return
    current = fingerprints()
    if as_json:
        typer.echo(json.dumps(current, indent=2))
    else:
        typer.echo("\n".join(report_lines(current, recorded())))
    differs = [k for k, v in current.items() if recorded()["fingerprints"].get(k) != v]
    raise typer.Exit(1 if differs else 0)


docs_app = typer.Typer(help="Keep the docs' numbers current.", no_args_is_help=True)
app.add_typer(docs_app, name="docs")


@docs_app.command("numbers")
def docs_numbers(
    write: Annotated[bool, typer.Option(help="rewrite every stale number (each file atomically)")] = False,
    root: Annotated[Path, typer.Option(help="project root holding README.md, docs/ and metrics/")] = Path("."),
) -> None:
    """Check every `<!-- m:STUDY:KEY[:FMT] -->VALUE<!-- /m -->` span in README.md and docs/**/*.md
    against metrics/STUDY.json; exit 1 listing file:line of each stale or unreadable span. --write
    refreshes the stale ones (and writes nothing while any span's file or key is missing)."""
    from delegation_lab.reporting.doc_numbers import problems, refresh, scan

    spans = scan(root)
    found = problems(spans)
    if write:
        try:
            written = refresh(root, spans)
        except ValueError as e:
            fail(f"nothing written:\n{e}")
        typer.echo(f"{len(spans)} numbers, {sum(s.stale for s in spans)} refreshed in {len(written)} files")
        return
    if found:
        fail("\n".join(found) + f"\n{len(found)} of {len(spans)} doc numbers stale or unreadable; run `dlab docs numbers --write`")
    typer.echo(f"{len(spans)} doc numbers match metrics/")


def main() -> None:  # pragma: no cover - console entry
    app(prog_name="dlab")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
