"""The default DAG's CPU seconds per stage and each stage's share of the total (the committed
metrics/timings/*.json of the last `dvc repro`), then `dvc repro` through ability_map on the
default params in a scratch copy: cold vs no-op rerun.

    python -m benchmarks pipeline            # both
    python benchmarks/bench_pipeline.py --timings-only
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import BIN, make_project, run  # noqa: E402  (reuses the test project builder)


REPO = Path(__file__).resolve().parents[1]


def stage_shares(timings_dir: Path = REPO / "metrics" / "timings") -> None:
    """Where the default DAG's CPU goes: per stage, slowest first, with its share of the total."""
    from delegation_lab.pipeline.timings import read_timings, timings_markdown

    rows = read_timings(timings_dir)
    if not rows:
        print(f"no stage timings in {timings_dir}; run `dvc repro` first")
        return
    cpu = sum(r["cpu_seconds"] for r in rows)
    print(f"default DAG (metrics/timings/*.json): {len(rows)} stages, {cpu:.0f} CPU s "
          f"({sum(r['seconds'] for r in rows):.0f} s wall, stages run one after another)")
    print(timings_markdown(rows))


def main(target: str = "ability_map") -> None:
    stage_shares()
    if target == "--timings-only":
        return
    with tempfile.TemporaryDirectory() as tmp:
        project = make_project(Path(tmp) / "p", profile=None)
        t = time.perf_counter()
        out = run([str(BIN / "dvc"), "repro", target], project).stdout
        cold = time.perf_counter() - t
        t = time.perf_counter()
        again = run([str(BIN / "dvc"), "repro", target], project).stdout
        noop = time.perf_counter() - t
    stages = re.findall(r"Running stage '([^']+)'", out)
    print(f"cold `dvc repro {target}`: {len(stages)} stages ({', '.join(stages)}) in {cold:.1f} s")
    print(f"no-op rerun ran {len(re.findall('Running stage', again))} stages; cold/no-op ratio {cold / noop:.1f}x")


if __name__ == "__main__":
    main(*sys.argv[1:])
