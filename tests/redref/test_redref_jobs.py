"""redref.workers: the simulations in spawned processes give the figures of the single-process path."""

from __future__ import annotations

import numpy as np

from delegation_lab.redref import experiments as ex
from delegation_lab.redref.jobs import Jobs
from delegation_lab.redref.memory import HashingEmbedder
from delegation_lab.redref.params import RedrefParams


def small() -> RedrefParams:
    return RedrefParams.model_validate({
        "embedding": "hashing", "bootstrap_resamples": 100, "tasks": {"pool_size": 60},
        "rq1": {"n_tasks": 8, "seeds": 3}, "rq2": {"n_tasks": 6, "seeds": 2},
        "rq3": {"n_tasks": 8, "impair_after": 4, "seeds": 2},
        "judge_noise": {"deltas": [1.0, 0.5], "horizon": 50, "seeds": 20},
    })


def study(params: RedrefParams, workers: int):
    world = ex.build_world(params, HashingEmbedder(params.hashing_dim))
    rng = np.random.default_rng([params.seed, 1])
    with Jobs(workers) as jobs:
        started = ex.start_rq1(world, params, rng, jobs)
        noise_started = ex.start_judge_noise(params, jobs)
        rq1, rq1_out, _ = ex.finish_rq1(started, params, rng)
        rq2, rq2_out, _ = ex.run_rq2(world, params, rng, jobs)
        rq3, rq3_out, _ = ex.run_rq3(world, params, rng, jobs)
        noise, sweep = ex.run_judge_noise(params, rng, noise_started)
    return {"rq1": rq1, "rq2": rq2, "rq3": rq3, "noise": noise}, (rq1_out, rq2_out, rq3_out), sweep


def test_two_workers_give_the_single_process_figures():
    params = small()
    one, one_out, one_sweep = study(params, 1)
    two, two_out, two_sweep = study(params, 2)
    assert one == two
    for a, b in zip(one_out, two_out, strict=True):
        assert a.keys() == b.keys()
        for m in a:
            np.testing.assert_array_equal(a[m].success, b[m].success)
            np.testing.assert_array_equal(a[m].tokens, b[m].tokens)
            np.testing.assert_array_equal(a[m].belief_start, b[m].belief_start)
            assert a[m].steps.keys() == b[m].steps.keys()
            for k in a[m].steps:
                np.testing.assert_array_equal(a[m].steps[k], b[m].steps[k])
    np.testing.assert_array_equal(one_sweep.regret, two_sweep.regret)


def test_one_worker_is_the_old_sequential_run():
    params = small()
    world = ex.build_world(params, HashingEmbedder(params.hashing_dim))
    rng_a, rng_b = np.random.default_rng([params.seed, 1]), np.random.default_rng([params.seed, 1])
    assert ex.run_rq1(world, params, rng_a)[0] == ex.finish_rq1(ex.start_rq1(world, params, rng_b, Jobs(1)), params, rng_b)[0]
    assert rng_a.random() == rng_b.random()  # the shared stream advanced alike


def test_a_failing_job_raises_from_result():
    with Jobs(1) as jobs:
        f = jobs.submit(int, "not a number")
    try:
        f.result()
    except ValueError:
        return
    raise AssertionError("the job's error was not raised")
