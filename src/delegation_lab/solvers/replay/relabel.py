"""Our labeler on a loaded cache, as `dlab import` reports it: each model's first answer to every
question graded by the label stage's own code (`labeling.matchers.match_frame`, the `MATCHERS`
registry, `label.matcher: auto`, default tolerance) against the gold, choices and matcher the cache
brings (`records.ITEM_COLUMNS`: zeroeval) or, failing that, those of our item with the same question,
beside the label the cache imported. A reply is parsed as the solve stage parses it: by the layout
where it parses (`parsed_answer`: zeroeval; null = no answer), else the choice letter for an item
with choices, else the number. Where the layout parses, an empty reply is a wrong answer (and a
`no_answer`), as the label stage counts it, never left out of the accuracy."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from delegation_lab.labeling import AUTO
from delegation_lab.labeling.accuracy import count_accuracy, final_label
from delegation_lab.labeling.matchers import match_frame
from delegation_lab.params.root import LabelParams
from delegation_lab.parsing import parse_choice, parse_number_answer
from delegation_lab.solvers.replay.cache import ReplayCache
from delegation_lab.solvers.replay.records import ITEM_COLUMNS

USE_IMPORTED = LabelParams.model_fields["use_imported"].default
"""`label.use_imported` as a project has it unless set: what `dlab import` reports accuracy under."""

ITEM_KEYS = {"key": pl.String, **ITEM_COLUMNS}
"""Our items by normalised question (`import_report.read_items` builds it)."""


def _parse(reply: str | None, choices: list[str] | None) -> str | None:
    if reply is None:
        return None
    return parse_choice(reply, len(choices)) if choices else parse_number_answer(reply)


def first_answers(cache: ReplayCache, items: pl.DataFrame) -> pl.DataFrame:
    """Every model's first row per question with the gold, choices and parsed answer it is graded by."""
    first = cache.frame.unique(subset=["model", "key"], keep="first", maintain_order=True)
    first = first.with_columns([(pl.col(c) if c in first.columns else pl.lit(None)).cast(t).alias(f"cache_{c}")
                                for c, t in ITEM_COLUMNS.items()]).drop(list(ITEM_COLUMNS), strict=False)
    first = first.join(items.rename({c: f"item_{c}" for c in ITEM_COLUMNS}), on="key", how="left")
    layout_parses = "parsed_answer" in first.columns
    if not layout_parses:
        first = first.with_columns(pl.lit(None, dtype=pl.String).alias("parsed_answer"))
    first = first.with_columns([pl.coalesce(f"cache_{c}", f"item_{c}").alias(c) for c in ITEM_COLUMNS])
    # a reply the layout parsed counts even when empty (a wrong answer); elsewhere an empty response is a
    # correctness-only cache's missing text, not an answer
    replied = pl.col("response").is_not_null() & (pl.lit(layout_parses) | (pl.col("response") != ""))
    first = first.with_columns((replied & (pl.lit(layout_parses) | pl.col("gold").is_not_null())).alias("parsed"))
    parsed = [p if layout_parses or not wanted else _parse(r, c) for p, r, c, wanted in
              first.select("parsed_answer", "response", "choices", "parsed").iter_rows()]
    return first.with_columns(pl.Series("parsed_answer", parsed, dtype=pl.String))


def relabel(cache: ReplayCache, items: pl.DataFrame) -> pl.DataFrame:
    """One row per (model, question): `imported`, `programmatic` (our verdict; null where there is no
    gold or no reply to grade: a correctness-only cache), `parsed` (a reply we or the layout parsed)
    and its `parsed_answer`, `response`."""
    first = first_answers(cache, items)
    # every reply with a gold is graded, an empty one as wrong (as the label stage grades it); only a
    # correctness-only row (no text, the cache's own label) is left to its label
    labels_only = pl.col("correct").is_not_null() & (pl.col("response").str.strip_chars() == "")
    graded = first.filter(pl.col("gold").is_not_null() & ~labels_only.fill_null(False))
    answers = graded.select(
        pl.col("model").alias("solver"), pl.col("key").alias("item_id"), "parsed_answer",
        pl.col("response").alias("answer_text"),
        pl.when(pl.col("response").is_null()).then(pl.lit("no reply in the cache")).alias("error"),
        pl.Series("extra", [json.dumps({"imported_correct": c}) if c is not None else None
                            for c in graded["correct"].to_list()], dtype=pl.String),
    )
    gold = graded.unique(subset="key", keep="first").select(
        pl.col("key").alias("item_id"), "gold", "choices", pl.lit("").alias("split"), pl.lit(0).alias("difficulty"),
        "answer_format",
    )
    verdicts = match_frame(answers, gold, rel_tol=1e-6, matcher=AUTO).select(
        pl.col("solver").alias("model"), pl.col("item_id").alias("key"), "programmatic")
    return first.join(verdicts, on=["model", "key"], how="left").select(
        "model", "key", "response", "parsed", "parsed_answer", "gold", pl.col("correct").alias("imported"),
        "programmatic")


def model_summary(rows: pl.DataFrame, agreement: dict[str, Any] | None) -> dict[str, Any]:
    """One model's report: accuracy over distinct questions counted as the label stage counts it
    (`labeling.accuracy`, under `label.use_imported`'s default: the cache's label where it brings one,
    else our verdict; an empty or missing reply is wrong and counted in `no_reply`; a question with no
    label is counted in `unlabelled`, outside the denominator), replies with no extractable answer,
    and (`labeling.agreement.imported_agreement`) how often our verdict agrees with the imported label."""
    counted = count_accuracy(rows.with_columns(final_label(USE_IMPORTED).alias("correct")), "response")

    def mean(column: str | pl.Expr) -> float | None:
        values = rows.select(column).to_series().drop_nulls()
        return float(values.mean()) if len(values) else None

    parsed = rows.filter(pl.col("parsed"))
    return {
        "n_items": rows.height,
        "accuracy": counted.accuracy,
        "unlabelled": counted.unlabelled,
        "labelled_by_us": int(rows["programmatic"].is_not_null().sum()),
        "labelled_by_cache_only": int((rows["programmatic"].is_null() & rows["imported"].is_not_null()).sum()),
        "no_answer": int(parsed["parsed_answer"].is_null().sum()) if parsed.height else None,
        "no_reply": counted.no_reply,
        "unscored": int(rows["imported"].is_null().sum()),
        "our_accuracy": mean("programmatic"),
        "imported_accuracy": mean("imported"),
        "agreement": agreement,
    }
