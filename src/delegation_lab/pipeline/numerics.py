"""The same figures on every x86-64 machine, Intel or AMD: the math libraries' CPU-dependent code
paths, pinned.

A stage's numbers depend on more than its seeds. Each library picks kernels for the CPU it finds,
and kernels for wider vectors sum and round in another order:

- torch (ATen) dispatches its vectorised CPU kernels on the CPU's widest ISA (AVX-512, AVX2, none);
- MKL, torch's BLAS, picks its GEMM code path per CPU *and per vendor*: on a non-Intel CPU it
  ignores the instruction-set branches (`MKL_CBWR=AVX2` is honoured only on Intel) and runs a code
  path of its own, so an AMD EPYC and an Intel Xeon under `MKL_CBWR=AVX2` compute different bits
  (measured: docs/reproducibility.md). Only `MKL_CBWR=COMPATIBLE` is the same branch on both: Intel
  documents it as the one that gives the same results on Intel and compatible processors;
- oneDNN, which torch may call for some ops, JIT-compiles for the widest ISA it finds
  (`ONEDNN_MAX_CPU_ISA` caps it);
- numpy's own SIMD loops (exp, log, tanh, sums...) dispatch on X86_V2 / V3 / V4;
- OpenBLAS, numpy's and scipy's BLAS, picks a kernel per CPU model (`OPENBLAS_CORETYPE`);
- every threaded library splits reductions by its thread count (a machine's core count by default).

`PINNED_ENV` fixes every one of them: torch's and numpy's own loops on the x86-64-v3 paths (AVX2 +
FMA: every Intel CPU since Haswell, every AMD since Excavator / Zen), MKL on its COMPATIBLE branch,
OpenBLAS on its Haswell kernels, one thread for the libraries' own pools (studies set torch's
intra-op threads from their params). `dlab numerics fingerprint` prints the bits of every kind of
operation the studies run under these pins; tests/test_numerics_fingerprint.py checks them against
the values recorded in `numerics_fingerprints.json`, and two of its cases against what an AMD EPYC
computes. The cost: MKL's COMPATIBLE branch is SSE-class code, about 2x the CPU of its AVX2 branch
on a GEMM-bound training loop (`python -m benchmarks numerics_pin`). On a CPU without AVX2 the
libraries fall back to narrower code and the figures are not guaranteed to match. The libraries
read these variables when they load, so `pin_numerics` re-executes the stage's process with them
set when they are not already: first thing in every stage script, before its imports (a re-executed
process would otherwise load its libraries twice: half a CPU second a stage), and again in
`stage.run_stage` for a stage started any other way.
Elsewhere than x86-64 the variables do not apply and nothing is pinned.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

PINNED_ENV: dict[str, str] = {
    "ATEN_CPU_CAPABILITY": "avx2",  # torch: AVX2 kernels, never the AVX-512 ones
    # MKL's conditional numerical reproducibility: the one branch Intel and AMD CPUs both run (AVX2,
    # AVX512, SSE4_2 and AUTO are Intel-only: an AMD CPU runs MKL's own path under each of them)
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "AVX2",  # oneDNN (torch's mkldnn ops): its AVX2 JIT kernels at most
    "OPENBLAS_CORETYPE": "Haswell",  # OpenBLAS's AVX2 kernels
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",  # numpy: its X86_V3 (AVX2) loops at most
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
# Variables that would override or contradict the pins (numpy refuses ENABLE beside DISABLE).
CLEARED_ENV = ("MKL_ENABLE_INSTRUCTIONS", "NPY_ENABLE_CPU_FEATURES", "MKL_DYNAMIC", "DNNL_MAX_CPU_ISA")
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
    thing in a stage's process (every stage script does, before its imports; `run_stage` again),
    before the stage's work: the libraries it imported so far read their variables at load, so only
    a fresh process takes the pins."""
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


# The libraries whose kernels decide a figure's bits (a new release may change them).
NUMERIC_LIBRARIES = ("torch", "numpy", "scipy", "polars", "duckdb")


def cpu_model() -> dict[str, str]:
    """The CPU's vendor, model name and widest vector extension, from /proc/cpuinfo (Linux) or
    `platform` elsewhere."""
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("vendor_id", "model name", "flags") and key not in info:
                    info[key] = value.strip()
                if len(info) == 3:
                    break
    except OSError:
        pass
    flags = set(info.get("flags", "").split())
    widest = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "other" if flags else "unknown"
    return {"vendor": info.get("vendor_id", platform.machine()), "model": info.get("model name", platform.processor()),
            "widest_isa": widest}


def describe() -> dict[str, object]:
    """What a figure was computed under: the pins in force in this process, the numeric libraries'
    versions and the CPU. Every stage records it beside its timings (metrics/timings/<stage>.json),
    so `dlab repro check` can tell a rerun on another CPU family or library release apart."""
    versions = {}
    for name in NUMERIC_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {"pinned": applies() and pinned(), "pins": {k: os.environ.get(k) for k in PINNED_ENV},
            "libraries": versions, "cpu": cpu_model(), "machine": platform.machine()}
