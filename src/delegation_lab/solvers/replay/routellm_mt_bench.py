"""`routellm_mt_bench`: RouteLLM's MT Bench judgements (github.com/lm-sys/RouteLLM,
`routellm/evals/mt_bench/judgements.jsonl`, `benchmarks/mt-bench/gpt-4_single.jsonl`): FastChat's
single-answer grading, one JSON line per (question, model, turn) with `question_id`, `model`,
`judge` (`[judge model, prompt name]`), `user_prompt` (the judge's prompt, which quotes the question
and the answer), `judgment`, `score` (a rating from 1 to 10; -1 where the judge gave none), `turn`
(1 or 2) and `tstamp`.

One row per (question, model), as RouteLLM scores MT Bench: the rating is the mean over the two turns
(`mt_bench_score`), and `score` is that mean / 10, correct at or above `score_threshold` (0.5 unless
the replay section says otherwise: raise it for a stricter bar). The question and the answer are the
first turn's, read from the judge's prompt. RouteLLM's answer files (`benchmarks/mt-bench/<router>.jsonl`:
`question_id`, `model_id`, `choices[].turns`) carry no score: their scores are the judgements'.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.solvers.replay.records import (
    CACHE_COLUMNS,
    CacheFormat,
    ReadOptions,
    ReplayError,
    cache_frame,
    columns_hint,
    numbered_records,
    threshold_of,
)

JUDGEMENT_FIELDS = ("question_id", "model", "user_prompt", "score", "turn")
MAX_RATING = 10.0
NO_RATING = -1
"""FastChat's score where the judge's reply held no `[[rating]]`."""

_SINGLE = re.compile(r"\[Question\]\n(?P<question>.*?)\n\n(?:\[The Start of Reference Answer\].*?\n\n)?"
                     r"\[The Start of Assistant's Answer\]\n(?P<answer>.*)\n\[The End of Assistant's Answer\]", re.S)
_MULTI = re.compile(r"<\|The Start of Assistant A's Conversation with User\|>\n\n### User:\n(?P<question>.*?)\n\n"
                    r"### Assistant A:\n(?P<answer>.*?)\n\n### User:", re.S)


def first_turn(user_prompt: str) -> tuple[str, str] | None:
    """The first turn's question and answer as the judge's prompt quotes them; None if it quotes neither."""
    match = _SINGLE.search(user_prompt) or _MULTI.search(user_prompt)
    return (match["question"], match["answer"]) if match else None


def _rating(value: Any, path: Path, where: str) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReplayError(f"{path}: {where}: score {value!r} is not a rating from 1 to {MAX_RATING:g}")
    if value == NO_RATING:
        return None
    if not 0 <= value <= MAX_RATING:
        raise ReplayError(f"{path}: {where}: score {value!r} is outside 1..{MAX_RATING:g} (and not -1, no rating)")
    return float(value)


def read_mt_bench(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """One row per (question, model): the first turn's question and answer, the turns' mean rating."""
    records = numbered_records(path)
    if not records:
        raise ReplayError(f"{path}: no records")
    pairs: dict[tuple[str, str], dict[str, Any]] = {}
    for lineno, r in records:
        missing = [k for k in JUDGEMENT_FIELDS if k not in r]
        if missing:
            hint = ("; an answer file (`model_id`, `choices`) carries no score: import its judgements "
                    "(gpt-4_single.jsonl)") if "choices" in r else ""
            raise ReplayError(f"{path}: line {lineno}: missing field {missing[0]!r} (fields: {columns_hint(sorted(r))}){hint}")
        pair = pairs.setdefault((str(r["question_id"]), str(r["model"])), {"ratings": [], "turn1": None, "line": lineno})
        rating = _rating(r["score"], path, f"line {lineno}, field 'score'")
        if rating is not None:
            pair["ratings"].append(rating)
        quoted = first_turn(str(r["user_prompt"]))
        if quoted is None:
            raise ReplayError(f"{path}: line {lineno}: field 'user_prompt' quotes no question and answer in FastChat's "
                              "judge templates (single-v1, single-math-v1 and their multi-turn forms)")
        if r["turn"] == 1 or pair["turn1"] is None:
            pair["turn1"] = quoted
    threshold = threshold_of(options)
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {"score": [], "mt_bench_score": [], "turns_rated": []}
    for (question_id, model), pair in pairs.items():
        mean = sum(pair["ratings"]) / len(pair["ratings"]) if pair["ratings"] else None
        score = None if mean is None else mean / MAX_RATING
        rows["source_index"].append(question_id)
        rows["prompt"].append(pair["turn1"][0])
        rows["model"].append(model)
        rows["response"].append(pair["turn1"][1])
        rows["correct"].append(None if score is None else score >= threshold)
        for k in ("tokens_in", "tokens_out", "cost_usd"):
            rows[k].append(None)
        extras["score"].append(score)
        extras["mt_bench_score"].append(mean)
        extras["turns_rated"].append(len(pair["ratings"]))
    return cache_frame(rows, extras)


ROUTELLM_MT_BENCH = CacheFormat(read=read_mt_bench, suffixes=(".jsonl",))
