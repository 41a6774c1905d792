"""The numerics pin (numerics.py): a stage started on any x86-64 machine computes under the same
library code paths, whatever the environment says; a small torch stage gives identical outputs
under another CPU's settings."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from delegation_lab.reporting.repro_check import is_timing  # the one definition of a timing key
from delegation_lab.pipeline.numerics import CLEARED_ENV, PINNED_ENV, applies, pinned, pinned_environ

from tests.conftest import BIN, REPO, copy_project, env_with_venv

# What another CPU (or a user's shell) would set: AVX-512 kernels for torch, MKL and numpy, an
# OpenBLAS kernel for another core, other thread counts. numpy refuses ENABLE beside DISABLE, so
# the pin must remove NPY_ENABLE_CPU_FEATURES, not only set its own variable.
OTHER_CPU = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX512", "OPENBLAS_CORETYPE": "SkylakeX",
             "NPY_ENABLE_CPU_FEATURES": "X86_V3", "OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3",
             "OPENBLAS_NUM_THREADS": "2"}
needs_x86 = pytest.mark.skipif(not applies(), reason="the pins name x86-64 code paths")

def unpinned_env() -> dict[str, str]:
    """The tests' child environment without the pins it carries (conftest.env_with_venv): a stage
    started in it must pin itself."""
    return {k: v for k, v in env_with_venv().items() if k not in PINNED_ENV and k != "DLAB_NUMERICS_PINNED"}


PROBE = """
import os, sys
from delegation_lab.pipeline.stage import run_stage

def probe(ctx):
    import numpy, torch
    from numpy._core._multiarray_umath import __cpu_features__ as f
    print(torch.backends.cpu.get_cpu_capability(), os.environ.get("MKL_CBWR"), os.environ.get("OMP_NUM_THREADS"),
          "v4" if f.get("X86_V4") else "v3", "MKL_ENABLE_INSTRUCTIONS" in os.environ)

run_stage("probe", probe)
"""


def test_pinned_environ_sets_every_pin_and_clears_what_contradicts_it():
    env = pinned_environ({"PATH": "/bin", **OTHER_CPU})
    assert pinned(env) and env["PATH"] == "/bin"
    assert all(env[k] == v for k, v in PINNED_ENV.items())
    assert not any(k in env for k in CLEARED_ENV)
    assert not pinned(OTHER_CPU) and not pinned({**env, "MKL_ENABLE_INSTRUCTIONS": "AVX2"})


def test_an_in_process_stage_run_is_never_reexecuted():
    """pytest runs stages in-process (conftest.stage_here): re-executing would replace pytest."""
    from delegation_lab.pipeline.numerics import _started_as_this_script

    assert not _started_as_this_script()


@needs_x86
def test_a_stage_started_from_the_command_line_runs_pinned_whatever_the_environment(tmp_path):
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {**unpinned_env(), **OTHER_CPU, "PYTHONPATH": str(REPO / "src")}
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["AVX2", "COMPATIBLE", "1", "v3", "False"]


def _digest(project: Path) -> str:
    """The routers stage's content outputs (no timings): summaries, outcomes, and its metrics less
    the keys that measure speed."""
    h = hashlib.sha256()
    for name in ("results/summaries/routers.parquet", "results/outcomes/routers.parquet"):
        h.update((project / name).read_bytes())
    metrics = json.loads((project / "metrics" / "routers.json").read_text())

    def content(obj):
        if isinstance(obj, dict):
            return {k: content(v) for k, v in obj.items() if not is_timing(k)}
        return [content(v) for v in obj] if isinstance(obj, list) else obj

    h.update(json.dumps(content(metrics), sort_keys=True).encode())
    return h.hexdigest()


@needs_x86
@pytest.mark.slow
def test_a_torch_stage_gives_identical_outputs_under_another_cpus_settings(smoke_dag, tmp_path):
    """The routers stage (kNN, MLP and matrix-factorisation routers trained with torch) run twice
    from the command line, once under OTHER_CPU: every content output is identical."""
    digests = []
    for name, extra in (("here", {}), ("other", OTHER_CPU)):
        project = copy_project(smoke_dag[0], tmp_path / name)
        env = {**unpinned_env(), **extra}
        out = subprocess.run([str(BIN / "python"), "stages/routers.py"], cwd=project, env=env,
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stderr[-3000:]
        digests.append(_digest(project))
    assert digests[0] == digests[1]
