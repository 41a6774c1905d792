"""Stage `solve@<solver>`: answer every item once with one solver, through the resumable cache."""

import argparse

from delegation_lab.data.items import items_from_frame
from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.solvers import build_solver
from delegation_lab.solvers.base import configured_secrets, mask_secrets
from delegation_lab.solvers.cache import AnswerCache
from delegation_lab.solvers.executor import build_executor
from delegation_lab.solvers.replay.backend import missing_answers_advice
from delegation_lab.pipeline.stage import StageContext, run_stage
from delegation_lab.pipeline.tables import read_items, write_json_atomic


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--solver", required=True, help="solver name (a key of params.yaml `solvers`)")
    parser.add_argument("--retry-errors", action="store_true", help="send cached error rows to the backend again")
    parser.add_argument(
        "--lock-wait", type=float, default=None, metavar="SECONDS",
        help="when another process fills this solver's cache, wait at most this long (default: until it is done)",
    )


def solve(ctx: StageContext) -> None:
    """Fill the answer cache of one solver for every item of every split."""
    name = ctx.args.solver
    if name not in ctx.params.solvers:
        raise InputError(f"--solver {name!r} is not in params.yaml solvers (have: {', '.join(ctx.params.solvers)})")
    params = ctx.params.solvers[name]
    items = items_from_frame(read_items(ctx.layout))
    solver = build_solver(name, params)
    cache = AnswerCache(ctx.layout.answers(name), ctx.layout.journal(name))
    requests = [solver.request(item) for item in items]
    if ctx.params.data.dataset == "served":  # what `dlab serve` already paid for, under the same request hash
        from delegation_lab.serve.journal import adopt_served_answers

        served = Layout(ctx.layout.root / ctx.params.data.served.project)
        with cache.locked(ctx.args.lock_wait):
            adopted = adopt_served_answers(cache, served, name, {(r.item.item_id, r.request_hash) for r in requests})
        print(f"solve@{name}: {adopted} answers adopted from {served.served_answers(name)}")
    executor = build_executor(name, params)  # a bad executor section fails here, before any request
    try:
        run = cache.fill(
            solver, requests, retry_errors=ctx.args.retry_errors, batch_size=params.batch_size, progress=ctx.progress,
            lock_wait_s=ctx.args.lock_wait, executor=executor,
        )
    finally:
        executor.close()
    stats = {
        "solver": name,
        "backend": params.backend,
        "model": params.model,
        "requested": run.requested,
        "cached": run.cached,
        "backend_calls": run.backend_calls,
        "errors": run.errors,
        "answered": run.answered,
        "error_rows": run.error_rows,
        "cost_usd_this_run": round(run.cost_usd, 6),
        "seconds": round(run.seconds, 3),
        "items_per_s": round(run.backend_calls / run.seconds, 1) if run.seconds else None,
        "executor": run.executor,
        "workers": run.workers,
        "batches": run.batches,
        "retries": run.retries,
        "answers_per_s": round(run.backend_calls / run.seconds, 2) if run.seconds else None,
    }
    write_json_atomic(stats, ctx.layout.solve_run(name))
    # rows are masked already; a printed line is masked again because it is the last place a key could reach
    secrets = configured_secrets(params.openai_compat)
    examples = [mask_secrets(e, secrets) for e in run.error_examples[:2]]
    share = run.answered / run.requested if run.requested else 1.0
    failed = run.requested > 0 and (run.answered == 0 or share < params.min_success_share)
    with ctx.tracker.stage_run("data", f"solve@{name}", params) as mlrun:
        mlrun.log_metrics({k: v for k, v in stats.items() if isinstance(v, (int, float))})
        print(
            f"solve@{name}: {run.backend_calls} sent to {params.backend}, {run.cached} already cached, "
            f"{run.errors} errors, ${run.cost_usd:.4f} spent"
            + (f"; {run.executor} executor: {run.workers} workers, {run.batches} batches, {run.retries} retries, "
               f"{stats['answers_per_s']} answers/s" if run.executor != "local" else "")
        )
        if run.errors and not failed:
            print(f"solve@{name}: {run.errors} error rows kept; " + (
                missing_answers_advice(name, params.replay, run.errors) if params.backend == "replay"
                else f"rerun with --retry-errors. e.g. {examples}"))
        if failed:  # inside the run, so MLflow marks it FAILED
            why = ("no item was answered" if run.answered == 0 else
                   f"below solvers.{name}.min_success_share={params.min_success_share:g}")
            fix = (missing_answers_advice(name, params.replay, run.error_rows) if params.backend == "replay"
                   else f"Every row stays cached; fix the endpoint and rerun with --retry-errors. e.g. {examples}")
            raise InputError(
                f"solver {name}: {run.answered} of {run.requested} items answered, {run.error_rows} error rows "
                f"({run.errors} errors in this run): {why}. {fix}"
            )


if __name__ == "__main__":
    run_stage("solve", solve, arguments)
