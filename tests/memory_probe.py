"""Peak memory of a command, measured the way the hardening probes claim their bounds: the command
runs as the only child of a fresh wrapper interpreter, which reports
`resource.getrusage(RUSAGE_CHILDREN).ru_maxrss` (so earlier children of the test run don't count).
With `data_limit` the command also runs under a hard RLIMIT_DATA of that many bytes, a safety net
so a probe that fails its bound cannot take the test machine's memory."""

from __future__ import annotations

import subprocess
import sys

_WRAPPER = (
    "import resource, subprocess, sys\n"
    "limit = int(sys.argv[1])\n"
    "cap = (lambda: resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))) if limit else None\n"
    "rc = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=cap)\n"
    "sys.stderr.buffer.write(rc.stderr[-4000:])\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, rc.returncode)\n"
)


def peak_rss_mib(argv: list[str], env: dict[str, str] | None = None, timeout: float = 120,
                 data_limit: int = 0) -> tuple[float, int, str]:
    """(peak resident MiB of `argv`, its exit code, the tail of its stderr); `data_limit` > 0: bytes
    of private memory the command may map at most (RLIMIT_DATA), a safety net."""
    done = subprocess.run([sys.executable, "-c", _WRAPPER, str(data_limit), *argv], capture_output=True, text=True,
                          env=env, timeout=timeout, check=True)
    kib, rc = done.stdout.split()
    return int(kib) / 1024, int(rc), done.stderr
