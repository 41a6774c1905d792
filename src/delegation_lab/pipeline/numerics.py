"""The same figures on every x86-64 machine: the math libraries' CPU-dependent code paths, pinned.

A stage's numbers depend on more than its seeds. Each library picks kernels for the CPU it finds,
and kernels for wider vectors sum and round in another order:

- torch (ATen) dispatches its vectorised CPU kernels on the CPU's widest ISA (AVX-512, AVX2, none);
- MKL, torch's BLAS, picks its GEMM code path per CPU (`MKL_ENABLE_INSTRUCTIONS` can change it);
- numpy's own SIMD loops (exp, log, tanh, sums...) dispatch on X86_V2 / V3 / V4;
- OpenBLAS, numpy's BLAS, picks a kernel per CPU model (`OPENBLAS_CORETYPE`);
- every threaded library splits reductions by its thread count (a machine's core count by default).

Measured on one machine (docs/reproducibility.md): each of these settings alone changes a torch or
numpy result's bits. `PINNED_ENV` fixes every one of them to the x86-64-v3 code paths (AVX2 + FMA:
every Intel CPU since Haswell, 2013, every AMD since Excavator / Zen) and one thread for the
libraries' own pools (studies set torch's intra-op threads from their params). The older baseline
paths (no AVX) would cover every x86-64 CPU but cost 3.7x the CPU time of a training loop, the
x86-64-v3 pin 1.3x (`python -m benchmarks numerics_pin`); on a CPU without AVX2 the libraries fall
back to narrower code and the figures are not guaranteed to match. The libraries read
these variables when they load, so `pin_numerics` re-executes the stage's process with them set
when they are not already: one place, at the start of every stage (`stage.run_stage`).
Elsewhere than x86-64 the variables do not apply and nothing is pinned.
"""

from __future__ import annotations

import os
import platform
import sys

PINNED_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch: AVX2 kernels, never the AVX-512 ones
    "MKL_CBWR": "AVX2",  # MKL's conditional numerical reproducibility: its AVX2 code path on any CPU
    "OPENBLAS_CORETYPE": "Haswell",  # OpenBLAS's AVX2 kernels
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy: its X86_V3 (AVX2) loops at most
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
# Variables that would override or contradict the pins (numpy refuses ENABLE beside DISABLE).
CLEARED_ENV = ("MKL_ENABLE_INSTRUCTIONS", "NPY_ENABLE_CPU_FEATURES", "MKL_DYNAMIC")
_MARK = "DLAB_NUMERICS_PINNED"  # set once the process runs pinned: never re-execute twice


def applies() -> bool:
    """The pins name x86-64 code paths; on other CPUs (arm64...) the variables mean nothing."""
    return platform.machine().lower() in ("x86_64", "amd64")


def pinned(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Does `environ` already hold every pin (and none of the variables that contradict them)?"""
    return all(environ.get(k) == v for k, v in PINNED_ENV.items()) and not any(k in environ for k in CLEARED_ENV)


def pinned_environ(environ: dict[str, str]) -> dict[str, str]:
    """`environ` with the pins set and the contradicting variables removed (for a child process)."""
    env = {k: v for k, v in environ.items() if k not in CLEARED_ENV}
    env.update(PINNED_ENV)
    env[_MARK] = "1"
    return env


def pin_numerics() -> None:
    """Re-execute this process under `PINNED_ENV` unless it already runs under it. Call it first
    thing in a stage's process (`run_stage` does), before the stage's work: the libraries it
    imported so far read their variables at load, so only a fresh process takes the pins."""
    if not applies() or pinned() or os.environ.get(_MARK) or not _started_as_this_script():
        return
    env = pinned_environ(dict(os.environ))
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


def _started_as_this_script() -> bool:
    """Re-executing is only right when the process *is* the stage script (`python stages/x.py`),
    not a stage run inside another program (a test's in-process run, a notebook)."""
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else None
    return script is not None and any(os.path.abspath(a) == script for a in sys.orig_argv[1:] if not a.startswith("-"))
