"""Peak resident memory of a command, for tests that claim a memory bound: the command runs as the
only child of a fresh wrapper process, whose RUSAGE_CHILDREN ru_maxrss (KiB on Linux) is then that
command's peak alone (in the test process it would be the largest of every child run so far)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import env_with_venv

_WRAPPER = ("import resource, subprocess, sys\n"
            "proc = subprocess.run(sys.argv[2:], stdout=open(sys.argv[1], 'wb'), stderr=subprocess.PIPE)\n"
            "sys.stderr.buffer.write(proc.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(proc.returncode)\n")


def run_with_peak(cmd: list[str | bytes], out: Path, cwd: Path | None = None, timeout: float = 300) -> tuple[int, str, int]:
    """(exit code, stderr, peak MiB) of `cmd > out`."""
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, str(out), *cmd], env=env_with_venv(), cwd=cwd,
                          capture_output=True, timeout=timeout)
    return proc.returncode, proc.stderr.decode("utf-8", "replace"), int(proc.stdout.decode().split()[-1]) // 1024
