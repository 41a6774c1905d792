"""The credit study's longer run (`credit.long_run`), outside the default DAG: a few methods trained
`iterations_factor` times longer, written with the provenance of the run to metrics/credit_long_run.json.

    python -m delegation_lab.credit.long_run [--params params.yaml] [--out metrics/credit_long_run.json]

It is not a DVC stage (it would double the credit stage's CPU budget); the committed file records
the git commit, command, params and CPU seconds it came from, and `dvc repro credit` never touches it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from delegation_lab.params.root import load_params
from delegation_lab.credit.report import long_run_metrics
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.tables import write_json_atomic
from delegation_lab.pipeline.torch_runtime import make_deterministic


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "stages"], capture_output=True, text=True)
        return out.stdout.strip() + ("+uncommitted" if dirty.stdout.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m delegation_lab.credit.long_run", description=__doc__)
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--out", default=str(Layout().metrics("credit_long_run")))
    parser.add_argument("--iterations-factor", type=int, default=None, help="override credit.long_run.iterations_factor")
    args = parser.parse_args(argv)
    params = load_params(args.params)
    credit = params.credit
    factor = args.iterations_factor or credit.long_run.iterations_factor or 3
    credit = credit.model_copy(update={"long_run": credit.long_run.model_copy(update={"iterations_factor": factor})})
    make_deterministic()
    t0 = time.perf_counter()
    metrics = {"long_run": long_run_metrics(credit, params.evaluation.intervals)}
    usage = resource.getrusage(resource.RUSAGE_SELF)
    section = credit.model_dump(mode="json")
    metrics["run"] = {
        "command": " ".join(["python -m delegation_lab.credit.long_run", *(argv if argv is not None else sys.argv[1:])]),
        "git_commit": _commit(), "params_file": args.params,
        "credit_params_sha256": hashlib.sha256(json.dumps(section, sort_keys=True).encode()).hexdigest()[:16],
        "long_run": section["long_run"], "base_iterations": credit.iterations,
        "seconds": round(time.perf_counter() - t0, 1), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
    }
    write_json_atomic(metrics, Path(args.out))
    print(f"credit long run: wrote {args.out}")


if __name__ == "__main__":
    main()
