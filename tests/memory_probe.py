"""Peak memory of a command, measured the way the hardening probes claim their bounds: the command
runs as the only child of a fresh wrapper interpreter, which reports
`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` (so earlier children of the test run don't count)."""

from __future__ import annotations

import subprocess
import sys

_WRAPPER = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)\n"
    "sys.stderr.buffer.write(rc.stderr[-4000:])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc.returncode)\n"
)


def peak_rss_mib(argv: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> tuple[float, int, str]:
    """(peak resident MiB of `argv`, its exit code, the tail of its stderr)."""
    done = subprocess.run([sys.executable, "-c", _WRAPPER, *argv], capture_output=True, text=True, env=env,
                          timeout=timeout, check=True)
    kib, rc = done.stdout.split()
    return int(kib) / 1024, int(rc), done.stderr
