"""`zeroeval`: ZeroEval's `result_dirs/<task>/<model>.json` (github.com/yuchenlin/ZeroEval), every
task as published: the stem names the model; the file is a JSON list of records with `id` /
`session_id`, `output` (a list whose first element is the raw reply, asked for a JSON block),
`generator`, `configs`, `dataset` (the task) and the task's own fields, read as ZeroEval's graders
read them (src/evaluation/*_eval.py, data_prep/*.py):

| task (`dataset`) | question | gold | matcher (`answer_format`) | domain |
|---|---|---|---|---|
| gsm, numersense-v2 | `question` | `answer` (`# 18`): the number | auto (`numeric`) | the task |
| math-l5 | `problem` | `answer` as written (`-15`, `1112112_3`) | `math` | the task |
| mmlu-redux | `question` (+ `choices`) | `correct_answer`, the right choice's text: its letter | `choice` | `config` (subject) |
| zebra-grid | `puzzle` | `solution` (header, rows) as a house grid | `grid` | the task |
| crux | `question` | `answer`, a Python literal | `literal` | the task |

The task is the record's `dataset`, else what its fields say (`choices` and `correct_answer`,
`puzzle`, `problem`, else `question` and `answer`), never the file name. ZeroEval removed the
zebra-grid solutions from its published files (commit bcbefba; it grades against the gated
allenai/ZebraLogicBench-private), so those rows import with no gold: `dlab import` says so.

Fields named in the cache's `fields` (`dlab import --field question=prompt --field gold=target`)
stand in for the task's own; a record without a field its task needs fails naming the field and
that option. There is no correctness and no token count: each row carries the gold, the choices
and the matcher (`records.ITEM_COLUMNS`) and the answer parsed from the reply (`parsed_answer`, by
`json_reply`; `answer_source` says how it was found), and our labeler decides. An empty reply is an
answer with nothing in it: wrong, never left out. Tokens are estimated by the replay backend and
flagged.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.parsing import normalise_number, parse_choice
from delegation_lab.solvers.replay.json_reply import SOURCES as ANSWER_SOURCES
from delegation_lab.solvers.replay.json_reply import grid_reply_answer, json_reply_answer
from delegation_lab.solvers.replay.records import (
    CACHE_COLUMNS,
    ITEM_COLUMNS,
    CacheFormat,
    ReadOptions,
    ReplayError,
    cache_frame,
    cell_text,
    columns_hint,
    file_model,
    json_list,
)

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NUMBER_AND_UNIT = re.compile(r"\s*(-?\d[\d,]*(?:\.\d+)?)\s+[A-Za-z][A-Za-z ]*\.?\s*")
"""A MATH answer that is a number and its unit (`1152 cups of flour`): the number is the answer."""
FIELDS = ("question", "gold", "id", "domain", "response")
"""The `fields` keys this layout reads: each names the record field that stands in for the task's own."""


@dataclass(frozen=True)
class Task:
    """Where one ZeroEval task keeps its question and gold, and how its answers are graded."""

    question: str
    gold: str
    answer_format: str | None
    """The matcher (`labeling.MATCHERS`); None = `label.matcher` (auto: numeric for GSM8K)."""
    gold_required: bool = True
    domain: str | None = None
    """The field naming a record's domain; None = the task (`dataset`)."""


GSM = Task("question", "answer", None)
TASKS = {
    "gsm": GSM,
    "numersense-v2": GSM,
    "math-l5": Task("problem", "answer", "math"),
    "mmlu-redux": Task("question", "correct_answer", "choice", domain="config"),
    "zebra-grid": Task("puzzle", "solution", "grid", gold_required=False),
    "crux": Task("question", "answer", "literal"),
}


def task_of(record: dict[str, Any]) -> tuple[str, Task]:
    """The record's task: its `dataset`, else what its fields say."""
    name = record.get("dataset")
    if isinstance(name, str) and name in TASKS:
        return name, TASKS[name]
    if "choices" in record and "correct_answer" in record:
        name = "mmlu-redux"
    elif "puzzle" in record:
        name = "zebra-grid"
    elif "problem" in record:
        name = "math-l5"
    elif "cruxeval" in str(record.get("source", "")):
        name = "crux"
    else:
        return str(name or "gsm"), GSM
    return name, TASKS[name]


def zeroeval_gold(answer: Any) -> str | None:
    """ZeroEval's GSM8K gold (`# 18`) as our labeler reads gold: the number, else the text without `#`."""
    text = cell_text(answer)
    if text is None:
        return None
    text = text.replace("#", "").strip()
    return normalise_number(text) or text or None


def grid_gold(solution: Any, where: str) -> str | None:
    """ZebraLogic's solution table (`header` "House", attributes...; one row per house) as the house
    grid the `grid` matcher compares, as zebra_grid_eval.py builds it; None when absent."""
    if solution is None:
        return None
    header, rows = (solution.get("header"), solution.get("rows")) if isinstance(solution, dict) else (None, None)
    if not (isinstance(header, list) and isinstance(rows, list) and header[:1] == ["House"]
            and all(isinstance(r, list) and len(r) == len(header) for r in rows)):
        raise ReplayError(f"{where}: 'solution' must hold a 'header' starting with \"House\" and 'rows' as long "
                          "as the header")
    grid = {f"House {i + 1}": {header[j]: row[j] for j in range(1, len(header))} for i, row in enumerate(rows)}
    return json.dumps(grid, ensure_ascii=False)


def choice_letter(text: str, choices: list[str]) -> str | None:
    """The letter an answer names: a choice's whole text, else the letter it states (`D`, `(B)`, `B) ...`)."""
    wanted = text.strip().casefold()
    for letter, choice in zip(LETTERS, choices, strict=False):
        if choice.strip().casefold() == wanted:
            return letter
    return parse_choice(text, min(len(choices), 5))


def _gold(task: Task, value: Any, choices: list[str] | None, where: str) -> str | None:
    if task.answer_format == "grid":
        return grid_gold(value, where)
    if task.answer_format == "choice":
        text = cell_text(value)
        if choices is None or text not in choices:
            raise ReplayError(f"{where}: the gold {text!r} is not one of the record's choices {columns_hint(choices or [])}")
        return LETTERS[choices.index(text)]
    if task.answer_format in ("math", "literal"):
        text = cell_text(value)
        return text.strip() if text is not None and text.strip() else None
    return zeroeval_gold(value)


def _answer(task: Task, reply: str, choices: list[str] | None, where: str) -> tuple[str | None, str]:
    """The answer a reply commits to, as the task's matcher reads it, and where it was found."""
    if task.answer_format == "grid":
        return grid_reply_answer(reply, where, ReplayError)
    if task.answer_format == "choice" and choices:
        text, source = json_reply_answer(reply, where, ReplayError, as_number=False)
        if text is None:
            letter = parse_choice(reply, min(len(choices), 5))
            return (letter, "stated_choice") if letter else (None, "none")
        return choice_letter(text, choices) or text, source  # a text naming no choice: kept, graded wrong
    answer, source = json_reply_answer(reply, where, ReplayError, as_number=task.answer_format is None)
    unit = _NUMBER_AND_UNIT.fullmatch(answer or "") if task.answer_format == "math" else None
    return (unit.group(1) if unit else answer), source


def _field(record: dict[str, Any], key: str, default: str, named: dict[str, str | None], task_name: str,
           where: str, required: bool = True) -> Any:
    """The value of the field holding `key` (`fields.<key>` where named, else the task's `default`)."""
    name = named.get(key, default)
    if name is None:
        return None
    if name not in record:
        if not required and key not in named:
            return None
        raise ReplayError(f"{where}: missing field {name!r} (the {key} of a {task_name} record; fields: "
                          f"{columns_hint(sorted(record))}): name the field that holds it with "
                          f"`dlab import --field {key}=FIELD` (a replay section's `fields.{key}`)")
    return record[name]


def _reply(value: Any, where: str, field: str) -> str | None:
    """The raw reply: `output[0]` (or a named field's text); an empty list or a null reply is a missing
    answer (an error row), an empty text an answer with nothing in it."""
    if field == "output":
        if not isinstance(value, list):
            raise ReplayError(f"{where}: field 'output' must be a list holding the reply, got {type(value).__name__}")
        value = value[0] if value else None
    if value is not None and not isinstance(value, str):
        raise ReplayError(f"{where}: {field}{'[0]' if field == 'output' else ''} must be the reply text, "
                          f"got {type(value).__name__}")
    return value


def read_zeroeval(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """ZeroEval: <model>.json, a list of records of any task; answers parsed, gold and choices kept, no labels."""
    records = json_list(path, "ZeroEval result records")
    fields = options.fields if options is not None else None
    named = {k: getattr(fields, k) for k in fields.model_fields_set} if fields is not None else {}
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {"domain": [], **{k: [] for k in ITEM_COLUMNS}, "parsed_answer": [],
                                    "answer_source": [], "task": [], "generator": []}
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            raise ReplayError(f"{path}: record {i}: expected a JSON object, got {type(r).__name__}")
        task_name, task = task_of(r)
        index = _field(r, "id", "id", named, task_name, f"{path}: record {i}", required=False)
        index = r.get("session_id") if index is None and "id" not in named else index
        where = f"{path}: record {i}" + (f" ({index})" if index is not None else "")
        if index is None:
            raise ReplayError(f"{where}: missing field 'id' (and 'session_id'; fields: {columns_hint(sorted(r))}): "
                              "name the field that identifies a record with `dlab import --field id=FIELD`")
        question = _field(r, "question", task.question, named, task_name, where)
        gold_value = _field(r, "gold", task.gold, named, task_name, where, required=task.gold_required)
        response_field = named.get("response") or "output"
        reply = _reply(_field(r, "response", "output", named, task_name, where), where, response_field)
        choices = r.get("choices") if task.answer_format == "choice" else None
        if choices is not None and not (isinstance(choices, list) and all(isinstance(c, str) for c in choices)):
            raise ReplayError(f"{where}: field 'choices' must be a list of texts")
        gold = _gold(task, gold_value, choices, where)
        parsed, source = _answer(task, reply, choices, f"{where}: the reply") if reply else (None, "none")
        domain = _field(r, "domain", task.domain, named, task_name, where, required=False) if (
            task.domain or "domain" in named) else None
        rows["source_index"].append(str(index))
        rows["prompt"].append(cell_text(question))
        rows["model"].append(file_model(path))
        rows["response"].append(reply)
        rows["correct"].append(None)  # not imported: our labeler grades the parsed answer against the gold
        rows["tokens_in"].append(None)
        rows["tokens_out"].append(None)
        rows["cost_usd"].append(None)
        extras["domain"].append(cell_text(domain) or cell_text(r.get("dataset")) or path.parent.name or None)
        extras["gold"].append(gold)
        extras["choices"].append(choices)
        extras["answer_format"].append(task.answer_format)
        extras["parsed_answer"].append(parsed)
        extras["answer_source"].append(source)
        extras["task"].append(task_name)
        extras["generator"].append(cell_text(r.get("generator")))
    frame = cache_frame(rows, extras)
    return frame.with_columns([pl.col(c).cast(t) for c, t in ITEM_COLUMNS.items()])


def zeroeval_notes(frame: pl.DataFrame) -> list[str]:
    """What `dlab import` says about a loaded ZeroEval cache: how answers were found, empty replies,
    and rows that cannot be graded (zebra-grid files published without their solutions)."""
    sources = dict(frame.group_by("answer_source").len().iter_rows())
    found = ", ".join(f"{sources[s]} {s}" for s in ANSWER_SOURCES if s in sources)
    notes = ["no correctness in the files: each reply's parsed answer is graded by our labeler against the "
             f"record's gold (answers found by: {found})"]
    empty = int((frame["response"] == "").sum())
    if empty:
        notes.append(f"{empty} empty repl(y/ies): graded as wrong answers (counted, never left out)")
    ungraded = frame.filter(pl.col("gold").is_null())
    if ungraded.height:
        tasks = sorted(set(ungraded["task"].to_list()))
        why = (" (ZeroEval removed the zebra-grid solutions from its published files and grades against the gated "
               "allenai/ZebraLogicBench-private)" if "zebra-grid" in tasks else "")
        notes.append(f"{ungraded.height} row(s) of {', '.join(tasks)} have no gold{why}: they cannot be graded; "
                     "name the field that holds it with --field gold=FIELD")
    return notes


ZEROEVAL = CacheFormat(read=read_zeroeval, suffixes=(".json", ".json.gz"), notes=zeroeval_notes, expansion=4.0,
                       fields=FIELDS)
"""expansion 4: `dlab import` of the 42 files of shared/data/zeroeval_gsm (118 MB) peaks 291 MB over the
interpreter's own (2.5x): files are read one at a time and most of a record is not kept."""
