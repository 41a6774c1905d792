"""The child process that runs math-verify for `math_verifier.MathVerifier`: one JSON request a line
on stdin, one JSON verdict a line on stdout.

A process of its own because math-verify bounds its work with `signal.alarm`, which works only in a
process's main thread (the labeler may run in a worker thread), and because sympy can get stuck in
native code no alarm interrupts: the parent kills this process when a request outlives its deadline.
Run as a script (`python math_worker.py TIMEOUT_S`), so it imports math-verify and nothing of ours.
"""

from __future__ import annotations

import json
import logging
import sys
import time

# math-verify logs every timeout with the whole input (kilobytes of a pathological reply); the parent
# counts timeouts itself.
logging.disable(logging.CRITICAL)

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

# A reply: its last \boxed{} first (priority 0), then "final answer is ..." anchors, then the last
# LaTeX or plain expression. An expression (a gold, a parsed answer): the same, wrapped in $...$.
REPLY_CONFIG = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())


def as_latex(expression: str) -> str:
    """A bare gold or parsed answer (`\\frac34`, `[0,1)`) in the math delimiters extraction looks for."""
    return expression if "$" in expression or "\\boxed" in expression else f"${expression}$"


def main(timeout_s: int) -> None:
    golds: dict[str, list] = {}
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        start = time.monotonic()
        request = json.loads(line)
        gold_text = request["gold"]
        if gold_text not in golds:
            golds[gold_text] = parse(as_latex(gold_text), parsing_timeout=timeout_s)
        gold = golds[gold_text]
        answer = request["answer"]
        if not gold:
            verdict = None  # math-verify reads nothing in the gold: the parent matches it as before
        else:
            target = parse(answer, REPLY_CONFIG, parsing_timeout=timeout_s) if request["is_reply"] \
                else parse(as_latex(answer), parsing_timeout=timeout_s)
            verdict = bool(target) and verify(gold, target, timeout_seconds=timeout_s)
        # A parse or comparison math-verify's alarm cut short reads as nothing / False: flag it.
        timed_out = time.monotonic() - start >= timeout_s
        out.write(json.dumps({"verdict": verdict, "timed_out": timed_out}) + "\n")
        out.flush()


if __name__ == "__main__":
    main(int(sys.argv[1]))
