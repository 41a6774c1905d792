"""Math-expression equivalence by math-verify (Hugging Face), run in a child process we can kill.

math-verify parses LaTeX and plain expressions to sympy and compares them (`\\frac{1}{2}` = `0.5`,
`2\\sqrt{2}` = `\\sqrt{8}`, intervals, sets). Its own timeouts use `signal.alarm`, which fails outside a
process's main thread and cannot interrupt sympy stuck in native code, so it runs in `math_worker`'s
process (any thread of ours may call this): math-verify's alarm bounds each parse and comparison to
`timeout_s` there, and a request that outlives `deadline_s` kills the worker (a fresh one takes the next
request). An answer that runs out of time is wrong, and counted in `timeouts`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from delegation_lab.errors import InputError

WORKER = Path(__file__).with_name("math_worker.py")
STARTUP_S = 120.0  # importing sympy on a loaded two-core machine


@dataclass(frozen=True)
class MathAnswer:
    """What math-verify reads of one answer: a whole reply (its last `\\boxed{}` wins) or one expression."""

    text: str
    is_reply: bool


def math_answer(parsed: str | None, reply: str | None) -> MathAnswer | None:
    """The reply when it boxes an answer, else the solver's parsed answer, else the reply; None if empty."""
    if reply and "\\boxed" in reply:
        return MathAnswer(reply, True)
    if parsed is not None and parsed.strip():
        return MathAnswer(parsed, False)
    return MathAnswer(reply, True) if reply and reply.strip() else None


class MathVerifier:
    """Verdicts `verify(gold, answer)`: True / False, or None when math-verify reads nothing in the gold.

    Use as a context manager (the worker process is closed on exit). Equal (gold, answer) pairs are
    verified once.
    """

    def __init__(self, timeout_s: int = 2) -> None:
        if importlib.util.find_spec("math_verify") is None:
            raise InputError(
                "label.matcher math needs the math-verify package: pip install 'math-verify[antlr4_9_3]'"
            )
        self.timeout_s = timeout_s
        # Gold and answer are parsed, then up to four (sympy, string) pairs compared, each under timeout_s.
        self.deadline_s = 6 * timeout_s + 5.0
        self.timeouts = 0  # answers that ran out of time (or killed the worker): judged wrong
        self._seen: dict[tuple[str, MathAnswer], bool | None] = {}
        self._proc: subprocess.Popen | None = None
        self._buffer = b""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def verify(self, gold: str, answer: MathAnswer) -> bool | None:
        key = (gold, answer)
        if key not in self._seen:
            self._seen[key] = self._ask(gold, answer)
        return self._seen[key]

    def close(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            for pipe in (self._proc.stdin, self._proc.stdout):
                pipe.close()
            self._proc = None

    def _ask(self, gold: str, answer: MathAnswer) -> bool | None:
        if self._proc is None:
            self._start()
        request = json.dumps({"gold": gold, "answer": answer.text, "is_reply": answer.is_reply}) + "\n"
        try:
            self._proc.stdin.write(request.encode())
            self._proc.stdin.flush()
            reply = self._read_line(self.deadline_s)
        except BrokenPipeError:
            reply = None
        if reply is None:  # out of time, or the worker died on this input: the answer is wrong
            self.timeouts += 1
            self.close()
            return False
        verdict = json.loads(reply)
        self.timeouts += verdict["timed_out"]
        return verdict["verdict"]

    def _start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, str(WORKER), str(self.timeout_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
        )
        self._buffer = b""
        if self._read_line(STARTUP_S) is None:
            self.close()
            raise RuntimeError(f"the math-verify worker ({WORKER}) did not start; its error is above")

    def _read_line(self, within_s: float) -> bytes | None:
        """The worker's next line, or None when it closes its output or `within_s` passes first."""
        end = time.monotonic() + within_s
        with selectors.DefaultSelector() as sel:
            sel.register(self._proc.stdout, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = end - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(self._proc.stdout.fileno(), 65536)
                if not chunk:
                    return None
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line
