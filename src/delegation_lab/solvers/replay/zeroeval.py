"""`zeroeval`: ZeroEval's `result_dirs/<dataset>/<model>.json` (github.com/yuchenlin/ZeroEval): the
stem names the model, the file is a JSON list of records with `id` / `session_id`
(`gsm8k-main-test-#N`), `question`, `answer` (the gold, e.g. `# 18`), `output` (a list whose first
element is the raw reply, asked for a JSON block with `reasoning` and `answer`), `generator`,
`configs`, `dataset`, `chat_history`.

There is no correctness and no token count. Correctness is not imported: each row carries the gold
(`gold`, the number after ZeroEval's `#`) and the answer parsed from the reply (`parsed_answer`, by
`json_reply.json_reply_answer`; `answer_source` says how it was found), and our labeler decides
(the replay backend hands the parsed answer to the label stage). Tokens are estimated from the text
by the replay backend and flagged. The domain is the record's `dataset`, else the file's folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.parsing import normalise_number
from delegation_lab.solvers.replay.json_reply import SOURCES as ANSWER_SOURCES
from delegation_lab.solvers.replay.json_reply import json_reply_answer
from delegation_lab.solvers.replay.records import (
    CACHE_COLUMNS,
    CacheFormat,
    ReadOptions,
    ReplayError,
    cache_frame,
    cell_text,
    columns_hint,
    file_model,
    json_list,
)

ZEROEVAL_REQUIRED = ("question", "answer", "output")


def zeroeval_gold(answer: Any) -> str | None:
    """ZeroEval's gold (`# 18`) as our labeler reads gold: the number, else the text without `#`."""
    text = cell_text(answer)
    if text is None:
        return None
    text = text.replace("#", "").strip()
    return normalise_number(text) or text or None


def _reply(record: dict[str, Any], path: Path, where: str) -> str | None:
    """The raw reply: `output[0]`; an empty list or a null reply is a missing answer (an error row)."""
    output = record["output"]
    if not isinstance(output, list):
        raise ReplayError(f"{path}: {where}: field 'output' must be a list holding the reply, got {type(output).__name__}")
    if not output or output[0] is None:
        return None
    if not isinstance(output[0], str):
        raise ReplayError(f"{path}: {where}: output[0] must be the reply text, got {type(output[0]).__name__}")
    return output[0]


def read_zeroeval(path: Path, options: ReadOptions | None = None) -> pl.DataFrame:
    """ZeroEval: <model>.json, a list of records; answers parsed from the reply, gold kept, no labels."""
    records = json_list(path, "ZeroEval result records")
    rows: dict[str, list[Any]] = {k: [] for k in CACHE_COLUMNS}
    extras: dict[str, list[Any]] = {"domain": [], "gold": [], "parsed_answer": [], "answer_source": [], "generator": []}
    for i, r in enumerate(records):
        if not isinstance(r, dict):
            raise ReplayError(f"{path}: record {i}: expected a JSON object, got {type(r).__name__}")
        index = r.get("id", r.get("session_id"))
        where = f"record {i}" + (f" ({index})" if index is not None else "")
        missing = [k for k in ZEROEVAL_REQUIRED if k not in r] + ([] if index is not None else ["id"])
        if missing:
            raise ReplayError(f"{path}: {where}: missing field {missing[0]!r} (fields: {columns_hint(sorted(r))})")
        reply = _reply(r, path, where)
        parsed, source = (json_reply_answer(reply, f"{path}: {where}: the reply (output[0])", ReplayError)
                          if reply is not None else (None, "none"))
        rows["source_index"].append(str(index))
        rows["prompt"].append(cell_text(r["question"]))
        rows["model"].append(file_model(path))
        rows["response"].append(reply)
        rows["correct"].append(None)  # not imported: our labeler grades the parsed answer against the gold
        rows["tokens_in"].append(None)
        rows["tokens_out"].append(None)
        rows["cost_usd"].append(None)
        extras["domain"].append(cell_text(r.get("dataset")) or path.parent.name or None)
        extras["gold"].append(zeroeval_gold(r["answer"]))
        extras["parsed_answer"].append(parsed)
        extras["answer_source"].append(source)
        extras["generator"].append(cell_text(r.get("generator")))
    return cache_frame(rows, extras)


def zeroeval_notes(frame: pl.DataFrame) -> list[str]:
    """What `dlab import` says about a loaded ZeroEval cache."""
    sources = dict(frame.group_by("answer_source").len().iter_rows())
    found = ", ".join(f"{sources[s]} {s}" for s in ANSWER_SOURCES if s in sources)
    return ["no correctness in the files: each reply's parsed answer is graded by our labeler against the "
            f"record's gold (answers found by: {found})"]


ZEROEVAL = CacheFormat(read=read_zeroeval, suffixes=(".json", ".json.gz"), notes=zeroeval_notes, expansion=4.0)
"""expansion 4: `dlab import` of the 42 files of shared/data/zeroeval_gsm (118 MB) peaks 291 MB over the
interpreter's own (2.5x): files are read one at a time and most of a record is not kept."""
