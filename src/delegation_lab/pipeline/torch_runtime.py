"""Where and how torch runs: the `device` every study's params accept, and thread limits.

Small batched matmuls run fastest on one thread on a 2-core machine, and torch's default thread
count makes concurrent jobs oversubscribe the cores; studies pin it for their training loops.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from delegation_lab.errors import InputError


def resolve_device(name: str, key: str = "device") -> torch.device:
    """`auto` = CUDA when available, else CPU; a CUDA device on a machine without one is an error
    naming the params key."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise InputError(f"params.yaml {key}: {e}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"params.yaml {key} is {name!r} but no CUDA device is available; use cpu or auto")
    return device


def make_deterministic(threads: int = 1) -> None:
    """Same inputs, same numbers on a given machine: deterministic kernels only and a fixed intra-op
    thread count (a reduction split over a varying number of threads sums in a varying order).
    Every stage calls this when it uses torch; a study's `torch_threads` may change the count inside
    its training loop, which is fixed by its params, never by the machine's core count."""
    _deterministic_kernels()
    torch.set_num_threads(threads)


@contextmanager
def flushed_denormals() -> Iterator[bool]:
    """Flush denormal floats to zero on the CPU while the block runs (x86 SSE3; yields False where
    unsupported), then restore the thread's setting. It is the calling thread's CPU (MXCSR) setting:
    numpy in that thread flushes too, and torch's other intra-op threads do not (the coordinator
    trains on one, `torch_threads: 1`).

    Adam's moments of a weight whose gradient is exactly zero (a no-map lane's padded first-layer
    rows, the output rows of joint actions a batch never samples) decay geometrically; the second
    moment (x 0.999 per update) spends ~16k updates in the denormal range, where x86 arithmetic takes
    a slow path, and the coordinator's fused Adam went from 12 % to 40 % of an update as training
    went on. Such a value is far below Adam's eps (1e-8), so flushing it leaves every update as it
    was: the 40-lane delegation batch trains to bit-identical weights, 35 % faster, and every figure
    of the default DAG is unchanged (docs/studies/coordinator.md, Speed)."""
    before = _flushing()
    supported = torch.set_flush_denormal(True)
    try:
        yield supported
    finally:
        torch.set_flush_denormal(before)


def _flushing() -> bool:
    """Does this thread flush denormals now? (float32 1e-39 is a denormal: flushed, it reads 0.)"""
    return torch.tensor([1e-39], dtype=torch.float32).mul(1.0).item() == 0.0


def _deterministic_kernels() -> None:
    """On the CPU every kernel the studies use has a deterministic version; on CUDA a kernel without
    one warns instead of failing, and cuBLAS gets the workspace setting its determinism needs."""
    import os

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read at cuBLAS's first use
    torch.use_deterministic_algorithms(True, warn_only=True)


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block with `n` intra-op threads (None: leave torch's setting), then restore it."""
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def deterministic_torch(threads: int | None) -> Iterator[None]:
    """`torch_threads(threads)` plus torch's deterministic algorithms (on the CPU every kernel the
    studies use has one; on CUDA a kernel without one warns instead of failing), both restored
    afterwards, and denormals flushed inside (`flushed_denormals`): for a given machine and thread
    count a run is bit-for-bit repeatable."""
    before = torch.are_deterministic_algorithms_enabled()
    _deterministic_kernels()
    try:
        with torch_threads(threads), flushed_denormals():
            yield
    finally:
        torch.use_deterministic_algorithms(before)
