"""`credit.workers`: the team methods split into ensembles trained in spawned processes give exactly
the numbers of one ensemble in one process (curves, checkpoints, held-out evaluation, the batches
kept for trajectories), in the same method order."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from delegation_lab.credit.grpo import method_spec
from delegation_lab.credit.params import CreditParams, TrajectoryParams
from delegation_lab.credit.study import run_study, training_jobs

# timings, and `loss`: the ensemble's mean loss over all its members (one value for every method in
# it), so it depends on which methods share the ensemble; no output reads it
NOT_PER_MEMBER = {"batch_seconds", "credit_seconds", "loss"}


def small(workers: int) -> CreditParams:
    return CreditParams(seeds=2, iterations=4, tasks_per_batch=4, train_tasks=100, test_tasks=40, eval_replicates=2,
                        eval_every=2, methods=["single", "broadcast", "no_shapley", "sharp", "sharp_loo"], p_sweep=[0.5],
                        trajectories=TrajectoryParams(train_every=2, train_tasks=2), workers=workers)


def _equal(a, b, where: str) -> None:
    if a is None or b is None:
        assert a is None and b is None, where
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            if f.name not in NOT_PER_MEMBER | {"decisions"}:  # decisions: emptied for the kept batches
                _equal(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _equal(a[k], b[k], f"{where}.{k}")
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=where)


def test_two_workers_give_the_one_process_results():
    torch.set_num_threads(1)
    one, two = run_study(small(1), log=lambda _: None), run_study(small(2), log=lambda _: None)
    assert [m.spec.name for m in one.methods] == [m.spec.name for m in two.methods] == small(1).method_names()
    for a, b in zip(one.methods, two.methods, strict=True):
        name = a.spec.name
        _equal({k: v for k, v in a.train.curves.items() if k not in NOT_PER_MEMBER},
               {k: v for k, v in b.train.curves.items() if k not in NOT_PER_MEMBER}, f"{name}.curves")
        assert a.train.eval_iterations == b.train.eval_iterations
        _equal(a.train.eval_accuracy, b.train.eval_accuracy, f"{name}.eval_accuracy")
        _equal(a.eval, b.eval, f"{name}.eval")
        assert [it for it, _ in a.train.train_samples] == [it for it, _ in b.train.train_samples]
        for (it, x), (_, y) in zip(a.train.train_samples, b.train.train_samples, strict=True):
            _equal(x, y, f"{name}.train_samples[{it}]")
    assert all(m.train.trainer is None for m in two.methods)  # the networks stayed in the workers


def test_training_jobs_deal_the_team_methods_and_keep_single_apart():
    p = small(2)
    specs = [method_spec(n, p) for n in p.method_names()]
    names = lambda jobs: [[[s.name for s in g] for g in job] for job in jobs]  # noqa: E731
    assert names(training_jobs(specs, 1)) == [[["single"], ["broadcast", "no_shapley", "sharp", "sharp_loo", "sharp_p0.5"]]]
    assert names(training_jobs(specs, 2)) == [[["broadcast", "sharp", "sharp_p0.5"]],
                                              [["no_shapley", "sharp_loo"], ["single"]]]
    assert names(training_jobs(specs[:2], 2)) == [[["single"], ["broadcast"]]]  # one team method: nothing to split
