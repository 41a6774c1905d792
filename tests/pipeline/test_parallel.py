"""`spawn_pool`: the studies' one worker pool (spawned; deterministic torch on request)."""

from __future__ import annotations

import pytest

from delegation_lab.pipeline.parallel import spawn_pool


def _torch_state() -> tuple[int, bool]:
    import torch

    return torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()


def _start_method() -> str:
    import multiprocessing as mp

    return mp.get_start_method()


def test_deterministic_workers_run_one_thread_with_deterministic_kernels():
    with spawn_pool(1) as pool:
        assert pool.submit(_torch_state).result(timeout=120) == (1, True)
        assert pool.submit(_start_method).result(timeout=60) == "spawn"


def test_plain_workers_leave_torch_alone():
    with spawn_pool(1, deterministic=False) as pool:
        assert pool.submit(_torch_state).result(timeout=120)[1] is False


def test_zero_workers_is_an_error_naming_the_count():
    with pytest.raises(ValueError, match="at least 1, got 0"):
        spawn_pool(0)
