"""Stage `redref`: REDEREF (seed 003) — RQ1 efficiency, RQ2 specialization, RQ3 impairment, the
judge-noise sweep (Theorem 3.1), and Thompson-sampling delegation on the cached solver answers
(summary rows for the frontier; the shared `evaluation.verifier` judges every cached answer). Writes
metrics/redref.json, plots/redref/, trajectories, results/summaries/redref.parquet and the item-level
results/outcomes/redref.parquet; logs MLflow experiment `redref`."""

from __future__ import annotations

import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.embeddings import adopt_embed_table
from delegation_lab.evaluation.outcomes import write_outcomes
from delegation_lab.evaluation.verifier import build_verifier
from delegation_lab.redref import experiments as ex
from delegation_lab.redref import plots
from delegation_lab.redref.jobs import Jobs
from delegation_lab.redref.memory import EmbeddingCache, HashingEmbedder, load_embedder, similarity
from delegation_lab.redref.mlflow_children import Child, write_children, write_children_to
from delegation_lab.redref.trajectories import cached_steps, split_steps
from delegation_lab.schemas import OUTCOME_SCHEMA, SUMMARY_SCHEMA
from delegation_lab.stage import StageContext, run_stage
from delegation_lab.store import TrajectoryWriter, write_summaries
from delegation_lab.tables import read_items, read_labeled_answers, read_table, write_json_atomic

STUDY = "redref"


class Phases:
    """Wall time per phase, printed as the stage goes and kept in metrics (runtime_s)."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.seconds: dict[str, float] = {}

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self.last, 2)
        self.last = now
        print(f"redref: {name} {self.seconds[name]:.1f} s", flush=True)


def _seed_series(out, s: int) -> dict[str, list[float]]:
    return {"task/success": out.success[s].astype(float).tolist(), "task/calls": out.calls[s].tolist(),
            "task/tokens": out.tokens[s].tolist(), "task/quality": out.quality[s].tolist()}


def rq_children(rq1_out: dict, rq2_out: dict, rq3_out: dict, noise: dict, params) -> list[Child]:
    """The child runs of RQ1-RQ3 (REDEREF and random per seed; ablations are parent metrics) and the
    judge-noise sweep."""
    children = []
    logged = {"rq1": ("redref", "random"), "rq2": ("redref", "random"), "rq3": ("redref",)}
    for tag, outcomes in (("rq1", rq1_out), ("rq2", rq2_out), ("rq3", rq3_out)):
        for method in logged[tag]:
            out = outcomes[method]
            for s in range(out.success.shape[0]):
                # per-task curves (step = task) and the seed's means (step 0), in one batch
                children.append(Child(f"{tag}.{method}", s, params={"experiment": tag, "method": method}, series=[{
                    **_seed_series(out, s), "eval/success": [float(out.success[s].mean())],
                    "eval/calls": [float(out.calls[s].mean())], "eval/tokens": [float(out.tokens[s].mean())],
                    "eval/quality": [float(out.quality[s].mean())]}]))
    children.append(Child("judge_noise", None, params=params.judge_noise, metrics=[
        {f"regret/delta_{k}": v["regret"] for k, v in noise["by_delta"].items()}, {"regret/loglog_slope": noise["loglog_slope"]}]))
    return children


def cached_children(summary_rows: list[dict]) -> list[Child]:
    """One child run per cached method x seed, its operating points as metrics (run ids go into the summaries)."""
    children = []
    if not summary_rows:
        return children
    for (method, seed), part in pl.DataFrame(summary_rows).partition_by(["method", "seed"], as_dict=True).items():
        children.append(Child(f"cached.{method}", seed, params={"experiment": "cached", "method": method}, metrics=[{
            f"{r['operating_point'].replace('B=', 'b')}/{key}": r[col]
            for r in part.iter_rows(named=True)
            for key, col in (("eval/accuracy", "accuracy"), ("cost/per_item_usd", "cost_per_item_usd"),
                             ("eval/calls_per_item", "calls_per_item"))
        }], key=(method, seed)))
    return children


def log_children(ctx: StageContext, run, jobs: Jobs, children: list[Child]) -> Future:
    """The child runs written by a worker process (redref.workers > 1) or here; a Future of their run ids."""
    if run.active and jobs.workers > 1:
        return jobs.submit(write_children_to, ctx.tracker.uri, run.run_id, run.experiment_id, STUDY, run.series_points, children)
    done: Future = Future()
    done.set_result(write_children(run, children) if run.active else {})
    return done


def redref(ctx: StageContext) -> None:
    """Run every REDEREF experiment and write the study's outputs."""
    params = ctx.params.redref
    layout = ctx.layout
    phases = Phases()
    # -- inputs first: a bad cache or solver name fails before any work ---------------------------
    cached_inputs = verifier = items = None
    if params.cached.enabled:
        labeled = read_labeled_answers(layout)
        labels = read_table(layout.labels, "labels")
        items = read_items(layout, ("train", "test")).select("item_id", "question")
        cached_inputs = ex.cached_inputs(labeled, items, params, list(ctx.params.solvers))
        verifier = build_verifier(ctx.params.evaluation.verifier, layout.root, labels)
    embedder = load_embedder(params.embedding, params.hashing_dim)
    if not isinstance(embedder, HashingEmbedder):  # model embeddings are cached across runs (data/redref/)
        embedder = EmbeddingCache(embedder, layout.redref_cache)
        if items is not None:  # the `embed` stage encoded these questions with this model already
            adopted = adopt_embed_table(embedder, layout.root, items)
            if adopted:
                print(f"redref: {adopted} question embeddings taken from data/embeddings (the embed stage's)")
    world = ex.build_world(params, embedder)
    phases.done("embed the task pool")
    rng = np.random.default_rng([params.seed, 1])

    metrics: dict = {"embedding": {"backend": embedder.name, "requested": params.embedding}}
    if isinstance(embedder, EmbeddingCache):
        metrics["embedding"]["cache"] = str(embedder.path.relative_to(layout.root))
    cache_dir = layout.redref_cache
    write_json_atomic({"model": embedder.name, "cached": isinstance(embedder, EmbeddingCache)}, cache_dir / "index.json")
    usd = params.zoo.usd_per_mtok
    run_ids: dict[tuple[str, int], str | None] = {}
    # Every simulation is a job with its own generator (redref.workers processes; 1 = this one): RQ1's
    # first, then the independent judge-noise sweep and cached routing queue behind it while this
    # process runs the protocol; the shared `rng` is drawn in the old order (RQ1, RQ2, RQ3, noise).
    with Jobs(params.workers) as jobs, ctx.tracker.stage_run(STUDY, STUDY, params) as run:
        rq1_started = ex.start_rq1(world, params, rng, jobs)
        noise_started = ex.start_judge_noise(params, jobs)
        cached_started: dict = {}
        if cached_inputs is not None:
            emb = embedder.encode(cached_inputs.questions)
            phases.done("embed the cached items")
            cached_started = ex.start_cached(cached_inputs, similarity(emb, emb), params, verifier, jobs)
        metrics["judge"] = {"calibration": ex.calibrate_split_judge(world, params)}
        protocol, _, belief_states = ex.run_protocol(world, params)
        rq1, rq1_out, rq1_seq = ex.finish_rq1(rq1_started, params, rng)
        rq2, rq2_out, rq2_seq = ex.run_rq2(world, params, rng, jobs)
        rq3, rq3_out, rq3_seq = ex.run_rq3(world, params, rng, jobs)
        noise, sweep = ex.run_judge_noise(params, rng, noise_started)
        phases.done("RQ1-RQ3, judge noise, protocol run")
        metrics.update({"rq1": rq1, "rq2": rq2, "rq3": rq3, "judge_noise": noise, "protocol": protocol})
        print(f"redref: RQ1 tokens {rq1['tokens_ratio']:.3f}x calls {rq1['calls_ratio']:.3f}x time {rq1['time_ratio']:.3f}x; "
              f"success {rq1['success_redref']:.2f} % vs {rq1['success_random']:.2f} % (random)")
        for name in ("single_verdict", "task_conditional"):
            if name in rq1:
                print(f"redref: RQ1 {name}: calls {rq1[name]['calls_ratio']:.3f}x tokens {rq1[name]['tokens_ratio']:.3f}x random; "
                      f"success {rq1[name]['success_redref']:.2f} %")

        run.set_tags({"embedding": embedder.name})
        logging = log_children(ctx, run, jobs, rq_children(rq1_out, rq2_out, rq3_out, noise, params))

        cached_out, summary_rows, points = {}, [], []
        cached_outcomes = pl.DataFrame(schema=OUTCOME_SCHEMA)
        if cached_inputs is not None:
            cached_out = {m: f.result() for m, f in cached_started.items()}
            summary_rows, cached_metrics, cached_outcomes = ex.cached_summary(cached_out, cached_inputs, params, ctx.params.evaluation.intervals)
            cached_outcomes = cached_outcomes.with_columns(study=pl.lit(STUDY), dataset=pl.lit(ctx.params.data.dataset), verifier=pl.lit(verifier.name))
            points = ex.operating_points(params, cached_inputs)
            metrics["cached"] = {
                "solvers": cached_inputs.arms.solvers, "n_test_items": cached_inputs.n_test, "warm_start": cached_inputs.n_warm,
                "mean_cost_usd": {k: round(v, 8) for k, v in cached_inputs.mean_cost.items()},
                "verifier": verifier.describe(),
                "judge": ex.calibrate_cached_judge(labeled, labels, params, verifier), **cached_metrics,
            }
            phases.done("route the cached items")

        # -- trajectories (while a worker writes the MLflow child runs) -------------------------------
        with TrajectoryWriter(layout, STUDY) as writer:
            for tag, outcomes, seq in (("rq1", rq1_out, rq1_seq), ("rq2", rq2_out, rq2_seq), ("rq3", rq3_out, rq3_seq)):
                for method, out in outcomes.items():
                    frame = split_steps(out, world.zoo, world.pool, seq, usd)
                    for (seed,), part in frame.partition_by("seed", as_dict=True).items() if frame.height else []:
                        writer.add(f"{tag}.{method}", seed, part.drop("seed"))
            if cached_inputs is not None:
                seq = ex.cached_sequences(params, cached_inputs)
                budgets = np.tile(np.array([b for _, b in points]), params.cached.seeds)
                for method, out in cached_out.items():
                    frame = cached_steps(out, cached_inputs.arms.solvers, cached_inputs.item_ids, cached_inputs.splits, seq, len(points), budgets)
                    for (seed, point), part in frame.partition_by(["seed", "point"], as_dict=True).items():
                        slug = points[point][0].replace("B=", "b")
                        writer.add(f"cached.{method}.{slug}", seed, part.drop("seed", "point"))

        phases.done("write trajectories")
        run_ids.update(logging.result())  # one writer at a time on the store
        logging = log_children(ctx, run, jobs, cached_children(summary_rows))
        phases.done("MLflow child runs of RQ1-RQ3")

        # -- plots (before the summaries: they wait for the MLflow run ids) -----------------------
        folder = layout.plots(STUDY)
        expert, impaired = world.zoo.names.index(params.rq2.expert), world.zoo.names.index(params.rq3.impaired)
        frames = {
            "rq1_efficiency": plots.rq1_frame(rq1),
            "rq2_belief": plots.belief_frame(rq2_out["redref"], expert),
            "rq3_belief": plots.belief_frame(rq3_out["redref"], impaired, rq3_out["control"]),
            "judge_noise": plots.judge_noise_frame(sweep),
        }
        if summary_rows:
            frames["cached_frontier"] = plots.cached_frame(summary_rows)
        plots.write_all(folder, frames)
        plots.plot_rq1(frames["rq1_efficiency"], folder / "rq1_efficiency.png")
        plots.plot_belief(frames["rq2_belief"], folder / "rq2_belief.png", f"RQ2: belief in the {params.rq2.expert} expert over its tasks")
        plots.plot_belief(frames["rq3_belief"], folder / "rq3_belief.png", f"RQ3: belief in the {params.rq3.impaired} agent, impaired after task {params.rq3.impair_after}",
                          marker=params.rq3.impair_after)
        plots.plot_judge_noise(frames["judge_noise"], folder / "judge_noise.png", params.judge_noise.horizon)
        if summary_rows:
            arms = cached_inputs.arms
            scored = slice(cached_inputs.n_warm, None)
            singles = {s: (float(arms.cost[scored, k].mean()), float(arms.correct[scored, k].mean())) for k, s in enumerate(arms.solvers)}
            plots.plot_cached(frames["cached_frontier"], singles, folder / "cached_frontier.png")
        else:
            plots.write_all(folder, {"cached_frontier": plots.cached_frame([])})
            plots.plot_cached(plots.cached_frame([]), {}, folder / "cached_frontier.png")
        phases.done("plots")

        # -- MLflow parent metrics, summaries -------------------------------------------------------
        run_ids.update(logging.result())
        run.log_metrics({"rq1": {k: v for k, v in rq1.items() if isinstance(v, float)},
                         "rq2": {k: v for k, v in rq2.items() if isinstance(v, float)},
                         "rq3": {k: v for k, v in rq3.items() if isinstance(v, float)}})
        if cached_inputs is not None:
            write_summaries(layout, STUDY, [
                {**r, "study": STUDY, "split": "test", "return": None, "dataset": ctx.params.data.dataset,
                 "solver_set": ",".join(cached_inputs.arms.solvers), "run_id": run_ids.get((r["method"], r["seed"])),
                 "verifier": verifier.name}
                for r in summary_rows
            ])
        else:  # redref.cached.enabled is false: no frontier points, but the declared outputs exist
            write_summaries(layout, STUDY, pl.DataFrame(schema=SUMMARY_SCHEMA))
        write_outcomes(layout, STUDY, cached_outcomes)

        phases.done("MLflow runs and summaries")

        metrics["provenance"] = ex.provenance(metrics)
        metrics["runtime_s"] = {**phases.seconds, "total": round(time.perf_counter() - phases.start, 1)}
        write_json_atomic(metrics, layout.metrics(STUDY))
        run.log_artifacts(folder, "plots")
        with tempfile.TemporaryDirectory() as tmp:  # the protocol run's beliefs + memory, loadable by BeliefState.load
            for s, state in enumerate(belief_states):
                run.log_artifact(state.save(Path(tmp) / f"beliefs_protocol_seed{s}.json"), "beliefs")
        run.log_artifact(layout.metrics(STUDY))
    print(f"redref: done in {metrics['runtime_s']['total']} s ({embedder.name} embeddings)")


if __name__ == "__main__":
    run_stage(STUDY, redref)
