"""Stage `solve`: answer every item once with every solver of params.yaml, each through its own
resumable cache, in one process.

One stage and one process for all solvers (issue 43): a process start and DVC's bookkeeping cost
seconds per stage, more than replaying a cached solver's answers; a stage per solver made a
40-model experiment mostly start-up. Each solver keeps its own cache, lock and journal, so a solver
whose settings did not change sends nothing when the stage reruns, and `--solver NAME` runs one
solver alone (a driver per endpoint, several at once: docs/scaling.md).
"""

if __name__ == "__main__":  # before the imports below: the process re-executed under the pins loads them once
    from delegation_lab.pipeline.numerics import pin_numerics

    pin_numerics()

import argparse

from delegation_lab.data.items import Item, items_from_frame
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
    parser.add_argument(
        "--solver", action="append", metavar="NAME",
        help="solve only this solver (a key of params.yaml `solvers`; repeatable; default: every solver)",
    )
    parser.add_argument("--retry-errors", action="store_true", help="send cached error rows to the backend again")
    parser.add_argument(
        "--lock-wait", type=float, default=None, metavar="SECONDS",
        help="when another process fills a solver's cache, wait at most this long (default: until it is done)",
    )


def solve(ctx: StageContext) -> None:
    """Fill the answer cache of every solver (or the `--solver` ones) for every item of every split."""
    names = ctx.args.solver or list(ctx.params.solvers)
    unknown = [n for n in names if n not in ctx.params.solvers]
    if unknown:
        raise InputError(f"--solver {', '.join(map(repr, unknown))} not in params.yaml solvers "
                         f"(have: {', '.join(ctx.params.solvers)})")
    items = items_from_frame(read_items(ctx.layout))
    failed: list[InputError] = []
    for name in names:
        with ctx.phase(name):
            try:
                solve_one(ctx, name, items)
            except InputError as e:  # the other solvers still fill their caches; the stage fails below
                print(f"solve@{name}: error: {e}")
                failed.append(e)
    if len(failed) == 1:
        raise failed[0]
    if failed:
        raise InputError(f"{len(failed)} of {len(names)} solvers failed: " + "; ".join(map(str, failed)))


def solve_one(ctx: StageContext, name: str, items: list[Item]) -> None:
    """One solver's cache filled; its run written to metrics/solve_runs/<name>.json."""
    params = ctx.params.solvers[name]
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
