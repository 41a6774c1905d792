"""Our labels of ZeroEval's GSM8K and MATH level-5 results against the leaderboards ZeroEval publishes
for them (`result_dirs/gsm.summary.json`, `result_dirs/math-l5.summary.json`), with ZeroEval's own
grader re-implemented item by item so that each difference can be traced to the items where the two
graders disagree. docs/zeroeval_grading.md (GSM8K) and docs/zeroeval_grading_math.md (math-l5) are
this module's output (`python -m delegation_lab.labeling.zeroeval_leaderboard RESULTS_DIR SUMMARY`).
Ours is `dlab import`'s: the task's matcher (`numeric` for GSM8K, `math`, math-verify, for math-l5) on
the answer the `zeroeval` reader parsed, an empty reply wrong.

ZeroEval grades both tasks with one script (github.com/yuchenlin/ZeroEval, src/evaluation/math_eval.py
and eval_utils.py, Apache-2.0): the answer is the `answer` of the reply's first complete JSON object (brace-matched,
newlines removed, parsed strictly), else a regex over `"answer": "..."` (or an unquoted value up to
a comma or space), else, for Llama-3.1 models whose last 30 characters say "boxed", the first
`\\boxed{word}`; `$` and commas are removed, a fraction evaluated, and the answer is right when the
*first* number in it equals the first number of the gold. A reply with no answer is wrong.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.parsing import normalise_number, numbers_match
from delegation_lab.solvers.replay.json_reply import evaluate_arithmetic

NAME_REPLACEMENTS = (  # ZeroEval's model_name_replacement: file stem -> leaderboard name (applied in order)
    ("gemma-2-9b-it@nvidia", "gemma-2-9b-it"), ("gemma-2-9b-it@together", "gemma-2-9b-it"),
    ("gemma-2-27b-it@together", "gemma-2-27b-it"), ("gemma-2-27b-it@nvidia", "gemma-2-27b-it"),
    ("deepseek-chat", "deepseek-v2-chat-0628"), ("deepseek-coder", "deepseek-v2-coder-0614"),
    ("DeepSeek-Coder-V2-0724", "deepseek-v2-coder-0724"),
    ("Llama-3.1-405B-Inst-fp8", "Llama-3.1-405B-Inst-fp8@together"),
    ("Llama-3.1-405B-Instruct-Turbo", "Llama-3.1-405B-Inst-fp8@together"),
    ("Meta-Llama-3.1-405B-Instruct@hyperbolic", "Llama-3.1-405B-Inst@hyperbolic"),
)
FIRST_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def leaderboard_name(stem: str) -> str:
    for old, new in NAME_REPLACEMENTS:
        stem = stem.replace(old, new)
    return stem


def _first_complete_json(text: str) -> dict[str, Any] | None:
    depth, start = 0, None
    for i, ch in enumerate(text):
        if ch == "{":
            start = i if depth == 0 else start
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                try:
                    return json.loads(text[start: i + 1].replace("\n", ""))
                except json.JSONDecodeError:
                    return None
    return None


def _answer_by_regex(text: str) -> str | None:
    for pattern, flags in ((r'"answer"\s*:\s*"([^"]*?)"', 0), (r'"answer"\s*:\s*"(.*?)"', re.S),
                           (r'"answer"\s*:\s*([^,\s]*)', 0), (r"answer\s*:\s*([^,\s]*)", 0)):
        m = re.search(pattern, text, flags)
        if m:
            return m.group(1)
    return None


def their_answer(model: str, reply: str) -> str | None:
    """The answer ZeroEval's grader reads in a reply; None = its "No answer"."""
    obj = _first_complete_json(reply)
    if obj is not None and "answer" in obj:
        return str(obj["answer"])
    found = _answer_by_regex(reply)
    if found is not None:
        return found
    if "Llama-3.1" in model and "boxed" in reply[-30:]:
        m = re.search(r"\\boxed{([\w\d]+)}", reply)
        return m.group(1) if m else None
    return None


def _sanitize(answer: str) -> str:
    """`$` and commas dropped; with a `/`, plain arithmetic evaluated (ZeroEval calls `eval`; we never do)."""
    answer = answer.replace("$", "").strip().replace(",", "")
    if "/" in answer:
        value = evaluate_arithmetic(answer)
        answer = answer if value is None else value
    return answer


def their_verdict(answer: str | None, gold: str) -> bool:
    """ZeroEval's verdict: the first number of the answer equals the first number of the gold."""
    if answer is None:
        return False
    a, g = FIRST_NUMBER.search(_sanitize(answer)), FIRST_NUMBER.search(_sanitize(gold.replace("#", "").strip()))
    return bool(a and g and float(a.group()) == float(g.group()))


LIST_FIRST = re.compile(r"\s*\(?\s*(-?\d+(?:\.\d+)?)\s*(?:,|\band\b|;)")
EXPRESSION = re.compile(r"\^|\\|sqrt|[a-z]\(")


def why(ours_correct: bool, theirs: str | None, gold: str, ours: str | None = None, reply: str = "",
        model: str = "") -> str:
    """Why the graders differ on one item, in the words docs/zeroeval_grading.md uses."""
    if not ours_correct:
        if ours is not None and ours.strip() == gold.strip():
            return "our matcher read the reasoning's last \\boxed{}, not the JSON answer"
        if theirs and LIST_FIRST.match(theirs):
            return "a list whose first value is the gold"
        return "their first number happens to be the gold"
    if not theirs or not theirs.strip():
        if "Llama-3.1" in model and re.search(r"\\boxed\{-", reply[-30:]):
            return "their \\boxed{} pattern drops a minus sign"
        return "they read no answer"
    if re.fullmatch(r"\$?\d{1,3}( \d{3})+", theirs.strip()):
        return "digits grouped by a space"
    if numbers_match(normalise_number(theirs), gold):
        return "a number within our tolerance"
    if "\u2212" in theirs:
        return "a Unicode minus sign"
    if reply.count('"answer"') > 1 and normalise_number(theirs) is not None:
        return "they read another JSON block's answer"
    if len(FIRST_NUMBER.findall(theirs)) > 1:
        return "first number of a worked answer"
    if FIRST_NUMBER.search(theirs) and EXPRESSION.search(theirs):
        return "first number of an expression (a power, a root)"
    return "their regex cut the answer"


@dataclass(frozen=True)
class Comparison:
    table: pl.DataFrame
    """Per model: n, ours, theirs_rerun, published (percent), difference (ours - published)."""
    disagreements: pl.DataFrame
    """Per item where the graders differ: model, id, gold, our answer and verdict, theirs, the reply."""


def compare(results_dir: Path, summary: Path) -> Comparison:
    """Our labels (`dlab import`'s, `replay.import_report`) beside ZeroEval's grader and leaderboard."""
    from delegation_lab.solvers.replay.cache import load_cache
    from delegation_lab.solvers.replay.import_report import summary_of
    from delegation_lab.solvers.replay.relabel import ITEM_KEYS, relabel

    cache = load_cache(results_dir, "zeroeval")
    labels = relabel(cache, pl.DataFrame(schema=ITEM_KEYS))
    ours = summary_of(cache, labels, 0.5, [])["models"]
    published = {r["Model"]: float(r["Acc"]) for r in json.loads(summary.read_text(encoding="utf-8"))}
    first = cache.frame.unique(subset=["model", "key"], keep="first", maintain_order=True).join(
        labels.select("model", "key", "programmatic"), on=["model", "key"])
    rows, disagree = [], []
    for (model,), g in first.partition_by("model", as_dict=True, maintain_order=True).items():
        theirs = [their_verdict(their_answer(model, r or ""), gold) for r, gold in g.select("response", "gold").iter_rows()]
        for record, verdict in zip(g.iter_rows(named=True), theirs, strict=True):
            if verdict != record["programmatic"]:
                theirs_answer = their_answer(model, record["response"] or "")
                disagree.append({"model": model, "id": record["source_index"].split("#", 1)[1], "gold": record["gold"],
                                 "ours": record["parsed_answer"], "ours_correct": record["programmatic"],
                                 "theirs": theirs_answer, "why": why(record["programmatic"], theirs_answer, record["gold"],
                                                                       record["parsed_answer"], record["response"] or "", model),
                                 "reply": record["response"]})
        pub = published.get(leaderboard_name(model))
        acc = round(100 * ours[model]["accuracy"], 2)
        rows.append({"model": model, "leaderboard_name": leaderboard_name(model), "n": g.height, "ours": acc,
                     "theirs_rerun": 100 * sum(theirs) / len(theirs), "published": pub,
                     "difference": None if pub is None else round(acc - pub, 2) + 0.0})
    return Comparison(pl.DataFrame(rows).sort("ours", descending=True), pl.DataFrame(disagree))


def markdown_table(table: pl.DataFrame) -> str:
    lines = ["| model | items | ours | ZeroEval (published) | difference | ZeroEval's grader re-run |", "|---|---:|---:|---:|---:|---:|"]
    for r in table.iter_rows(named=True):
        name = r["model"] if r["model"] == r["leaderboard_name"] else f"{r['model']} ({r['leaderboard_name']})"
        lines.append(f"| {name} | {r['n']} | {r['ours']:.2f} | {r['published']:.2f} | {r['difference']:+.2f} | "
                     f"{r['theirs_rerun']:.2f} |")
    return "\n".join(lines)


def kinds(disagreements: pl.DataFrame) -> str:
    """The kinds of disagreement, most common first, with who is right on them."""
    counts = disagreements.group_by("why", "ours_correct").len().sort(["len", "why"], descending=[True, False])
    return "\n".join(f"- {n} {w} ({'right to us' if right else 'right to them'})" for w, right, n in counts.iter_rows())


def main(argv: list[str]) -> None:
    results_dir, summary = Path(argv[0]), Path(argv[1])
    result = compare(results_dir, summary)
    print(markdown_table(result.table))
    t, d = result.table, result.disagreements
    print(f"\n{int((t['difference'].abs() <= 3).sum())} of {t.height} models within 3 points, "
          f"{int((t['difference'].abs() <= 1).sum())} within 1, {int((t['difference'].abs() <= 0.5).sum())} within 0.5; "
          f"{d.height} items disagree, {int(d['ours_correct'].sum())} right to us only:\n{kinds(d)}")
    for model in result.table.filter(pl.col("difference").abs() > 0.5)["model"]:
        d = result.disagreements.filter(pl.col("model") == model)
        reasons = ", ".join(f"{n} {w}" for w, n in
                            d.group_by("why").len().sort(["len", "why"], descending=[True, False]).iter_rows())
        print(f"\n## {model}: {d.height} items disagree ({int(d['ours_correct'].sum())} right to us only): {reasons}")
        for r in d.head(4).iter_rows(named=True):
            print(f"- {r['id']} gold {r['gold']}: ours {r['ours']!r} ({'right' if r['ours_correct'] else 'wrong'}), "
                  f"theirs {(r['theirs'] or '')[:150]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
