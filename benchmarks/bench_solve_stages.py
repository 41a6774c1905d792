"""A many-model experiment's solve stages: one DVC stage per solver (the layout before issue 43) vs
the one `solve` stage for every solver, on the shipped zeroeval_gsm8k data (42 replayed models):
CPU and wall seconds of `dvc repro -f -s solve` under each layout, their ratio, and how much of it
is the stage processes themselves (the same scripts run without DVC: N processes vs one).

    python -m benchmarks solve_stages      # ~5 CPU minutes, most of it the old layout

The old layout is rebuilt from today's `solve` stage (a `foreach` over `solvers`, `--solver ${key}`,
per-solver outs), so both run the same script and code deps; both must write the same answers.
"""

from __future__ import annotations

import copy
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import yaml

REPO = Path(__file__).resolve().parents[1]
EXPERIMENT = REPO / "experiments" / "zeroeval_gsm8k"
BIN = Path(sys.executable).parent


def per_solver_stage(solve: dict) -> dict:
    """Today's `solve` stage as it was before issue 43: one stage per solver."""
    old = copy.deepcopy(solve)
    old["cmd"] += " --solver ${key}"
    old["params"] = ["solvers.${key}", *(p for p in old["params"] if p != "solvers")]
    old["outs"] = [{"data/answers/${key}.parquet": {"persist": True}}]
    old["metrics"] = [{"metrics/solve_runs/${key}.json": {"cache": False}}]
    return {"foreach": "${solvers}", "do": old}


def scratch_repository(root: Path) -> Path:
    """A git + DVC repository holding this one's stages and code and a copy of the experiment; the
    experiment folder (items prepared)."""
    for name in ("stages", "src"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    shutil.copy2(REPO / ".dvcignore", root / ".dvcignore")
    exp = root / "experiments" / EXPERIMENT.name
    exp.mkdir(parents=True)
    (exp / "data_src").symlink_to(EXPERIMENT / "data_src")  # read by prepare and solve, not a DVC dep
    shutil.copy2(EXPERIMENT / "params.yaml", exp / "params.yaml")
    for cmd in (["git", "init", "-q"], [str(BIN / "dvc"), "init", "-q"], [str(BIN / "dvc"), "config", "core.analytics", "false"]):
        run(cmd, root)
    dag = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    write_dag(exp, {"prepare": dag["prepare"]})
    run([str(BIN / "dvc"), "repro", "-q", "prepare"], exp)
    return exp


def write_dag(exp: Path, stages: dict) -> None:
    (exp / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}, sort_keys=False))


def run(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Run `cmd` (failing loudly); its wall and CPU seconds, children included."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DLAB_NO_PROGRESS": "1"}
    before, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def fresh(exp: Path) -> None:
    """No answers, no solve runs, no solve lock entries: each layout starts from the same place."""
    for path in (exp / "data" / "answers", exp / "data" / ".journal", exp / "metrics" / "solve_runs"):
        shutil.rmtree(path, ignore_errors=True)
    lock = exp / "dvc.lock"
    if lock.exists():
        stages = yaml.safe_load(lock.read_text())["stages"]
        lock.write_text(yaml.safe_dump({"schema": "2.0", "stages": {"prepare": stages["prepare"]}}, sort_keys=False))


def answers(exp: Path, names: list[str]) -> dict[str, pl.DataFrame]:
    """Each solver's answer rows but the time each was written (`created_at`, every run's own)."""
    return {n: pl.read_parquet(exp / "data" / "answers" / f"{n}.parquet").drop("created_at") for n in names}


def main() -> None:
    dag = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    with tempfile.TemporaryDirectory(prefix="dlab-bench-solve-") as tmp:
        exp = scratch_repository(Path(tmp))
        names = list(yaml.safe_load((exp / "params.yaml").read_text())["solvers"])
        n = len(names)
        script = [str(BIN / "python"), str(Path(tmp) / "stages" / "solve.py")]
        measured, written = {}, {}
        for layout, stage in (("one stage per solver", per_solver_stage(dag["solve"])), ("one stage", dag["solve"])):
            fresh(exp)
            write_dag(exp, {"prepare": dag["prepare"], "solve": stage})
            measured[layout] = run([str(BIN / "dvc"), "repro", "-f", "-s", "solve"], exp)
            written[layout] = answers(exp, names)
        if not all(written["one stage"][s].equals(written["one stage per solver"][s]) for s in names):
            raise SystemExit("the two layouts wrote different answers")
        fresh(exp)
        alone = [run([*script, "--solver", s], exp) for s in names]
        fresh(exp)
        one = run(script, exp)
    (old_wall, old_cpu), (new_wall, new_cpu) = measured["one stage per solver"], measured["one stage"]
    procs_cpu = sum(c for _, c in alone)
    print(f"`dvc repro -f -s solve` of {n} replayed solvers (zeroeval_gsm8k), answers identical under both layouts:")
    print(f"  one stage per solver: {old_cpu:7.1f} CPU s {old_wall:7.1f} s wall ({old_cpu / n:.2f} CPU s a solver)")
    print(f"  one stage           : {new_cpu:7.1f} CPU s {new_wall:7.1f} s wall")
    print(f"  ratio (per solver / one stage): {old_cpu / new_cpu:.1f}x CPU, {old_wall / new_wall:.1f}x wall")
    print(f"of which the stage processes, without DVC: {n} x `solve.py --solver X` {procs_cpu:.1f} CPU s, "
          f"one `solve.py` {one[1]:.1f} CPU s ({procs_cpu / one[1]:.1f}x); DVC's own share per stage: "
          f"{(old_cpu - procs_cpu) / n:.2f} CPU s (it parses the whole dvc.lock around each stage: here the solve\n"
          f"stages' entries alone; in the experiment, whose lock holds every stage's, several times that)")


if __name__ == "__main__":
    main()
