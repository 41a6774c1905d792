"""The REDEREF study (stage `redref`): its inputs, every experiment — RQ1 efficiency, RQ2
specialization, RQ3 impairment, the judge-noise sweep (Theorem 3.1), the protocol run and
Thompson-sampling delegation on the cached solver answers — the MLflow runs, and what the stage
writes, as a `pipeline.study.StudyResult` (`RedrefStudy`, the study behind the one study contract).

Every simulation is a job with its own generator (`redref.workers` processes; 1 = this one): RQ1's
first, then the independent judge-noise sweep and the cached routing queue behind it while this
process runs the protocol; the shared `rng` is drawn in the old order (RQ1, RQ2, RQ3, noise). The
MLflow child runs are written by the child-run writer's worker (`redref.workers` > 1) while the
stage writes trajectories and plots.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from delegation_lab.params.root import Params
from delegation_lab.embeddings import adopt_embed_table
from delegation_lab.evaluation.verifier import Verifier, build_verifier
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.study import StudyContext, StudyResult, Written
from delegation_lab.redref import experiments as ex
from delegation_lab.redref import plots
from delegation_lab.redref.jobs import Jobs
from delegation_lab.redref.memory import BeliefState, Embedder, EmbeddingCache, HashingEmbedder, load_embedder, similarity
from delegation_lab.redref.mlflow_children import cached_children, rq_children
from delegation_lab.redref.params import RedrefParams
from delegation_lab.redref.trajectories import cached_steps, split_steps
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA, SUMMARY_SCHEMA
from delegation_lab.pipeline.stage import StageContext
from delegation_lab.pipeline.tables import read_items, read_labeled_answers, read_table, write_json_atomic

STUDY = "redref"


@dataclass
class CachedSetup:
    """The cached-answers experiment's inputs and judge."""

    inputs: ex.CachedInputs
    verifier: Verifier
    labeled: pl.DataFrame
    labels: pl.DataFrame
    items: pl.DataFrame  # item_id, question of the train and test splits


class RedrefStudy:
    name = stage = STUDY

    def params(self, ctx: StageContext) -> Any:
        return ctx.params.redref

    def background_children(self, ctx: StageContext) -> bool:
        return ctx.params.redref.workers > 1

    def run(self, ctx: StudyContext) -> StudyResult:
        """Run every REDEREF experiment; the child runs go to `ctx.children` as soon as they are known."""
        params, layout, phase = ctx.params, ctx.layout, ctx.phase
        p = params.redref
        with phase("embed the task pool"):
            cached = cached_setup(params, layout)  # inputs first: a bad cache or solver name fails before any work
            embedder, embedding = study_embedder(p, layout, cached)
            world = ex.build_world(p, embedder)
        rng = np.random.default_rng([p.seed, 1])
        metrics: dict[str, Any] = {"embedding": embedding}
        with Jobs(p.workers) as jobs:
            with phase("simulate"):  # RQ1-RQ3, judge noise, protocol run
                rq1_started = ex.start_rq1(world, p, rng, jobs)
                noise_started = ex.start_judge_noise(p, jobs)
            cached_started: dict[str, Future] = {}
            if cached is not None:
                with phase("embed the cached items"):
                    emb = embedder.encode(cached.inputs.questions)
                cached_started = ex.start_cached(cached.inputs, similarity(emb, emb), p, cached.verifier, jobs)
            with phase("simulate"):
                metrics["judge"] = {"calibration": ex.calibrate_split_judge(world, p)}
                protocol, _, beliefs = ex.run_protocol(world, p)
                rq1, rq1_out, rq1_seq = ex.finish_rq1(rq1_started, p, rng)
                rq2, rq2_out, rq2_seq = ex.run_rq2(world, p, rng, jobs)
                rq3, rq3_out, rq3_seq = ex.run_rq3(world, p, rng, jobs)
                noise, sweep = ex.run_judge_noise(p, rng, noise_started)
            metrics.update({"rq1": rq1, "rq2": rq2, "rq3": rq3, "judge_noise": noise, "protocol": protocol})
            report_rq1(rq1)
            rows: list[dict[str, Any]] = []
            outcomes, singles, cached_out = pl.DataFrame(schema=OUTCOME_SCHEMA), {}, {}
            if cached is not None:
                with phase("route the cached items"):
                    cached_out = {m: f.result() for m, f in cached_started.items()}
                    rows, metrics["cached"], outcomes = cached_block(cached, cached_out, params)
                    singles = cached_singles(cached.inputs)
        metrics["provenance"] = ex.provenance(metrics)
        ctx.parent.set_tags({"embedding": embedder.name})
        ctx.parent.log_metrics({name: {k: v for k, v in metrics[name].items() if isinstance(v, float)}
                                for name in ("rq1", "rq2", "rq3")})
        ctx.children.submit(rq_children(rq1_out, rq2_out, rq3_out, noise, p) + cached_children(rows))
        expert, impaired = world.zoo.names.index(p.rq2.expert), world.zoo.names.index(p.rq3.impaired)
        frames = {
            "rq1_efficiency": plots.rq1_frame(rq1),
            "rq2_belief": plots.belief_frame(rq2_out["redref"], expert),
            "rq3_belief": plots.belief_frame(rq3_out["redref"], impaired, rq3_out["control"]),
            "judge_noise": plots.judge_noise_frame(sweep),
            "cached_frontier": plots.cached_frame(rows),
        }
        simulated = {"rq1": (rq1_out, rq1_seq), "rq2": (rq2_out, rq2_seq), "rq3": (rq3_out, rq3_seq)}
        summary_rows = [] if cached is None else [
            {**r, "study": STUDY, "split": "test", "return": None, "dataset": params.data.dataset,
             "solver_set": ",".join(cached.inputs.arms.solvers), "verifier": cached.verifier.name} for r in rows]

        def summaries(ids: dict) -> pl.DataFrame | list[dict[str, Any]]:
            """The summary rows with their child runs' ids; with redref.cached.enabled false, no
            frontier points but the declared output exists."""
            if not summary_rows:
                return pl.DataFrame(schema=SUMMARY_SCHEMA)
            return [{**r, "run_id": ids.get((r["method"], r["seed"]))} for r in summary_rows]

        def finish(written: Written) -> None:
            """The written plots, and the protocol run's beliefs (loadable by BeliefState.load)."""
            ctx.parent.log_artifacts(layout.plots(STUDY), "plots")
            with tempfile.TemporaryDirectory() as tmp:
                for s, state in enumerate(beliefs):
                    ctx.parent.log_artifact(state.save(Path(tmp) / f"beliefs_protocol_seed{s}.json"), "beliefs")

        return StudyResult(
            metrics=metrics, trajectories=trajectories(world, simulated, cached, cached_out, p),
            figures=lambda: plots.write_figures(layout.plots(STUDY), frames, singles, p) and None,
            summaries=summaries, outcomes=outcomes, finish=finish,
            report=lambda m: f"redref: done ({embedder.name} embeddings; seconds per phase in {layout.timings(STUDY)})",
            phase_names={"trajectories": "write trajectories", "mlflow_wait": "MLflow runs and summaries",
                         "summaries": "MLflow runs and summaries"},
        )


def cached_setup(params: Params, layout: Layout) -> CachedSetup | None:
    """The labeled cached answers and the shared verifier (None when redref.cached.enabled is false)."""
    if not params.redref.cached.enabled:
        return None
    labeled = read_labeled_answers(layout)
    labels = read_table(layout.labels, "labels")
    items = read_items(layout, ("train", "test")).select("item_id", "question")
    inputs = ex.cached_inputs(labeled, items, params.redref, list(params.solvers))
    return CachedSetup(inputs, build_verifier(params.evaluation.verifier, layout.root, labels), labeled, labels, items)


def study_embedder(p: RedrefParams, layout: Layout, cached: CachedSetup | None) -> tuple[Embedder, dict[str, Any]]:
    """The sentence embedder (model embeddings cached across runs in `layout.redref_cache`, the cached
    items' questions adopted from the `embed` stage's table) and the metrics' `embedding` block."""
    embedder = load_embedder(p.embedding, p.hashing_dim)
    block: dict[str, Any] = {"backend": embedder.name, "requested": p.embedding}
    if not isinstance(embedder, HashingEmbedder):
        embedder = EmbeddingCache(embedder, layout.redref_cache)
        block["cache"] = str(embedder.path.relative_to(layout.root))
        if cached is not None:
            adopted = adopt_embed_table(embedder, layout.root, cached.items)
            if adopted:
                print(f"redref: {adopted} question embeddings taken from {layout.embeddings_dir} (the embed stage's)")
    write_json_atomic({"model": embedder.name, "cached": isinstance(embedder, EmbeddingCache)}, layout.redref_cache / "index.json")
    return embedder, block


def report_rq1(rq1: dict[str, Any]) -> None:
    print(f"redref: RQ1 tokens {rq1['tokens_ratio']:.3f}x calls {rq1['calls_ratio']:.3f}x time {rq1['time_ratio']:.3f}x; "
          f"success {rq1['success_redref']:.2f} % vs {rq1['success_random']:.2f} % (random)")
    for name in ("single_verdict", "task_conditional"):
        if name in rq1:
            print(f"redref: RQ1 {name}: calls {rq1[name]['calls_ratio']:.3f}x tokens {rq1[name]['tokens_ratio']:.3f}x random; "
                  f"success {rq1[name]['success_redref']:.2f} %")


def cached_block(cached: CachedSetup, outcomes: dict, params: Params) -> tuple[list[dict[str, Any]], dict[str, Any], pl.DataFrame]:
    """The cached routing's summary rows, its metrics block and its item-level outcome rows."""
    p, inputs, verifier = params.redref, cached.inputs, cached.verifier
    rows, block, frame = ex.cached_summary(outcomes, inputs, p, params.evaluation.intervals)
    frame = frame.with_columns(study=pl.lit(STUDY), dataset=pl.lit(params.data.dataset), verifier=pl.lit(verifier.name))
    metrics = {
        "solvers": inputs.arms.solvers, "n_test_items": inputs.n_test, "warm_start": inputs.n_warm,
        "mean_cost_usd": {k: round(v, 8) for k, v in inputs.mean_cost.items()},
        "verifier": verifier.describe(),
        "judge": ex.calibrate_cached_judge(cached.labeled, cached.labels, p, verifier), **block,
    }
    return rows, metrics, frame


def cached_singles(inputs: ex.CachedInputs) -> dict[str, tuple[float, float]]:
    """Each solver always asked alone on the test items: (mean cost, accuracy)."""
    arms, scored = inputs.arms, slice(inputs.n_warm, None)
    return {s: (float(arms.cost[scored, k].mean()), float(arms.correct[scored, k].mean())) for k, s in enumerate(arms.solvers)}


def trajectories(world: ex.World, simulated: dict[str, tuple[dict, np.ndarray]], cached: CachedSetup | None,
                 cached_out: dict, p: RedrefParams) -> Iterator[tuple]:
    """(partition, seed, steps[, point]) of every simulated and cached run that logs its steps; a
    cached run's steps name their summary rows' point, the simulated ones have none."""
    for tag, (outcomes, seq) in simulated.items():
        for method, out in outcomes.items():
            frame = split_steps(out, world.zoo, world.pool, seq, p.zoo.usd_per_mtok)
            for (seed,), part in frame.partition_by("seed", as_dict=True).items() if frame.height else []:
                yield f"{tag}.{method}", seed, part.drop("seed")
    if cached is None:
        return
    inputs = cached.inputs
    points = ex.operating_points(p, inputs)
    seq = ex.cached_sequences(p, inputs)
    budgets = np.tile(np.array([b for _, b in points]), p.cached.seeds)
    for method, out in cached_out.items():
        frame = cached_steps(out, inputs.arms.solvers, inputs.item_ids, inputs.splits, seq, len(points), budgets)
        for (seed, point), part in frame.partition_by(["seed", "point"], as_dict=True).items():
            op = points[point][0]  # as cached_summary names the point
            yield f"cached.{method}.{op.replace('B=', 'b')}", seed, part.drop("seed", "point"), (method, op)
