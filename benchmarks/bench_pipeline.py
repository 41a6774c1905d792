"""`dvc repro` through ability_map on the default params in a scratch copy: cold vs no-op rerun.

Prints the per-stage share of the cold run and the cold / no-op ratio.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.conftest import BIN, make_project, run  # noqa: E402  (reuses the test project builder)


def main(target: str = "ability_map") -> None:
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
