"""What `dlab import` prints about a cache: its files and domains, its models (imported accuracy, and
our labeler's where a gold is known: `relabel`), how its questions match our items, and the
params.yaml `solvers` entries that replay it (a TODO where a price belongs); `--json` writes the same
per-model figures for a script (`ImportResult.summary`)."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from delegation_lab.labeling.agreement import imported_agreement
from delegation_lab.solvers.params import PRICE_TODO, SCORE_THRESHOLD, LongTableFields
from delegation_lab.solvers.pricing import estimate_tokens
from delegation_lab.solvers.replay import FORMATS
from delegation_lab.solvers.replay.cache import ReplayCache, load_cache, normalise_question
from delegation_lab.solvers.replay.records import PUBLISHED_SPLIT
from delegation_lab.solvers.replay.relabel import ITEM_KEYS, model_summary, relabel


def solver_name_for(model: str, taken: set[str]) -> str:
    """A valid params.yaml solver name (letter first, [A-Za-z0-9_-], <= 32 chars) for a model id."""
    base = re.sub(r"[^A-Za-z0-9_-]+", "-", model.rsplit("/", 1)[-1]).strip("-_") or "model"
    if not base[0].isalpha():
        base = "m-" + base
    base = base[:32]
    name, k = base, 2
    while name in taken:
        suffix = f"-{k}"
        name, k = base[: 32 - len(suffix)] + suffix, k + 1
    taken.add(name)
    return name


def read_items(items_dir: Path) -> tuple[dict[str, int], dict[str, str], pl.DataFrame]:
    """Counts of items per split, the normalised question -> split of every item, and the items'
    gold, choices and answer_format by normalised question (`relabel.ITEM_KEYS`; first item wins)."""
    counts: dict[str, int] = {}
    keys: dict[str, str] = {}
    frames = [pl.DataFrame(schema=ITEM_KEYS)]
    for split in ("ability", "train", "test"):
        p = items_dir / f"{split}.parquet"
        if not p.exists():
            continue
        df = pl.read_parquet(p)
        counts[split] = df.height
        for q in df["question"].to_list():
            keys.setdefault(normalise_question(q or ""), split)
        df = df.with_columns(pl.col("question").fill_null("").map_elements(normalise_question, return_dtype=pl.String)
                             .alias("key"))
        frames.append(df.select([pl.col(c).cast(t) if c in df.columns else pl.lit(None, dtype=t).alias(c)
                                 for c, t in ITEM_KEYS.items()]))
    return counts, keys, pl.concat(frames).unique(subset="key", keep="first", maintain_order=True)


def _short(text: str, n: int = 90) -> str:
    return textwrap.shorten(" ".join((text or "").split()), width=n, placeholder=" …")


@dataclass(frozen=True)
class ImportResult:
    text: str
    """What `dlab import` prints."""
    summary: dict[str, Any]
    """What `dlab import --json` writes: the cache, and per model `n_items` (distinct questions),
    `accuracy` over the labelled ones as the label stage counts it (`labeling.accuracy`: the cache's
    label where it brings one, else ours; an empty or missing reply wrong), `unlabelled`, `unscored` (questions the
    cache gives no score: graded by our labeler where a gold is known), `no_answer` (replies with no extractable
    answer, empty ones included; null where no reply is parsed), `no_reply` (replies missing
    or empty, wrong), `our_accuracy`, `imported_accuracy` and `agreement` of the two where both exist
    (null where they never do)."""


def import_report(path: Path, format: str, items_dir: Path, fields: LongTableFields | None = None,
                  trust_pickle: bool = False) -> str:
    """What `dlab import` prints: files, domains, models, match against our items, a params.yaml snippet."""
    return build_import(path, format, items_dir, fields, trust_pickle).text


def summary_of(cache: ReplayCache, labels: pl.DataFrame, threshold: float, notes: list[str]) -> dict[str, Any]:
    """The JSON report of a cache relabelled (`relabel.relabel`)."""
    frame = cache.frame
    agreement = imported_agreement(labels.rename({"model": "solver"}))
    by_model = labels.partition_by("model", as_dict=True, maintain_order=True)
    models = {}
    for model in cache.models:
        idx = cache.index(model)
        models[model] = {**model_summary(by_model[(model,)], agreement.get(model)),
                         "rows": idx.n_rows, "duplicates": idx.duplicates}
    domains = frame.group_by("domain", maintain_order=True).agg(pl.col("key").n_unique())
    return {
        "path": str(cache.path), "format": cache.format, "sha256": cache.sha256,
        "files": [{"path": f, "sha256": sha} for f, sha in cache.files],
        "rows": frame.height, "questions": frame["key"].n_unique(), "score_threshold": threshold,
        "domains": dict(domains.iter_rows()), "notes": notes, "models": models,
    }


def build_import(path: Path, format: str, items_dir: Path, fields: LongTableFields | None = None,
                 trust_pickle: bool = False, score_threshold: float = SCORE_THRESHOLD,
                 max_memory_gb: float | None = None) -> ImportResult:
    """The text `dlab import` prints and the summary `--json` writes."""
    cache = load_cache(path, format, fields, trust_pickle, score_threshold, max_memory_gb)
    frame = cache.frame
    counts, item_keys, items = read_items(Path(items_dir))
    cache_format = FORMATS.get(format)
    notes = cache_format.notes(frame) if cache_format.notes is not None else []
    summary = summary_of(cache, relabel(cache, items), score_threshold, notes)
    ours = summary["models"]
    lines = [
        f"replay cache: {path}",
        f"  format {format}, {len(cache.files)} file(s), {frame.height} rows, {frame['key'].n_unique()} distinct "
        f"questions, sha256 {cache.sha256[:16]}…",
    ]
    domains = frame.group_by("domain", maintain_order=True).agg(pl.col("key").n_unique().alias("n"))
    if domains.height > 1:
        shown = ", ".join(f"{d} {n}" for d, n in domains.head(12).iter_rows())
        lines.append(f"  domains ({domains.height}): {shown}{', ...' if domains.height > 12 else ''}")
    lines += [f"  note: {n}" for n in notes]
    if PUBLISHED_SPLIT in frame.columns and frame[PUBLISHED_SPLIT].is_not_null().any():
        first = frame.unique(subset="key", keep="first", maintain_order=True)
        splits = first.group_by(PUBLISHED_SPLIT, maintain_order=True).len()
        shown = ", ".join(f"{s} {n}" for s, n in splits.iter_rows())
        lines.append(f"  published split (each question's first row): {shown}; `data.split: as_published` keeps it")
    lines += ["", f"models ({len(cache.models)}):"]
    stats: dict[str, dict[str, Any]] = {}
    for model in cache.models:
        idx = cache.index(model)
        rows = cache.model_frame(model)
        labelled = [r["correct"] for r in idx.rows.values() if r["correct"] is not None]  # as replayed
        acc = sum(labelled) / len(labelled) if labelled else None
        missing_tokens = int((rows["tokens_in"].is_null() | rows["tokens_out"].is_null()).sum())
        has_cost = int(rows["cost_usd"].is_not_null().sum())
        stats[model] = {"acc": acc, "has_cost": has_cost, "questions": len(idx.rows)}
        acc_text = f"imported accuracy {acc:.1%} ({len(labelled)} labelled questions)" if acc is not None else "no imported labels"
        lines.append(
            f"  {model}: {idx.n_rows} rows, {len(idx.rows)} distinct questions, {idx.duplicates} duplicate(s) "
            f"(first kept), {acc_text}"
        )
        lines += _counted_lines(ours[model])
        if ours[model]["our_accuracy"] is not None:
            lines.append(_our_line(ours[model]))
        if missing_tokens:
            est_in = sum(estimate_tokens(p) for p in rows["prompt"].to_list()) / rows.height
            est_out = sum(estimate_tokens(r) for r in rows["response"].to_list()) / rows.height
            lines.append(
                f"      token counts missing on {missing_tokens} row(s): estimated at ~4 chars/token, "
                f"mean ~{est_in:.0f} in (question alone; the prompt template adds some) / ~{est_out:.0f} out"
            )
        lines.append(
            f"      cost: {'from the cache on ' + str(has_cost) + ' row(s)' if has_cost else 'none in the cache (priced from tokens with price)'}"
        )

    lines.append("")
    if not counts:
        lines.append(
            f"items: none in {items_dir} ({{ability,train,test}}.parquet); matching skipped. "
            "Run `dvc repro prepare` first, or use `data.dataset: replay` to make the cache its own dataset."
        )
    else:
        total = sum(counts.values())
        lines.append(
            f"items in {items_dir}: " + ", ".join(f"{s} {n}" for s, n in counts.items()) + f" ({total} in all)"
        )
        cache_keys = frame.select("key", "prompt").unique(subset="key", keep="first", maintain_order=True)
        matched_mask = [k in item_keys for k in cache_keys["key"].to_list()]
        n_matched = sum(matched_mask)
        n_unmatched = cache_keys.height - n_matched
        by_split: dict[str, int] = {}
        for k, m in zip(cache_keys["key"].to_list(), matched_mask, strict=True):
            if m:
                by_split[item_keys[k]] = by_split.get(item_keys[k], 0) + 1
        lines.append(
            f"  matched: {n_matched} of {cache_keys.height} distinct cache questions "
            f"({', '.join(f'{s} {n}' for s, n in by_split.items()) or 'none'})"
        )
        lines.append(f"  unmatched: {n_unmatched} cache question(s) match no item (they are not replayed)")
        unmatched_prompts = [p for p, m in zip(cache_keys["prompt"].to_list(), matched_mask, strict=True) if not m]
        for p in unmatched_prompts[:3]:
            lines.append(f"    e.g. \"{_short(p)}\"")
        for model in cache.models:
            idx = cache.index(model)
            covered = sum(k in idx.rows for k in item_keys)
            lines.append(
                f"  {model}: answers {covered} of {len(item_keys)} items; "
                f"{len(item_keys) - covered} item(s) without an answer become error rows"
            )

    lines += ["", "params.yaml entries that replay this cache (merge into `solvers:`; replace every TODO "
              "with the model's real price and where it comes from: `dlab params check` refuses a TODO, "
              "and a 0 price needs `free: true`):", "solvers:"]
    taken: set[str] = set()
    trusted = FORMATS.get(format).trust_warning is not None
    chosen = fields.model_dump(include=fields.model_fields_set) if fields is not None and cache_format.fields else {}
    mapping = f", fields: {json.dumps(chosen)}" if chosen else ""
    for model in cache.models:
        name = solver_name_for(model, taken)
        s = stats[model]
        acc = f", imported accuracy {s['acc']:.1%}" if s["acc"] is not None else ""
        price_note = (
            "US$ per 1M tokens: used only where the cache has no cost"
            if s["has_cost"] else "US$ per 1M tokens of this model"
        )
        lines += [
            f"  {name}:  # {model}: answers {s['questions']} questions{acc}",
            "    backend: replay",
            f"    model: {json.dumps(model)}",
            f"    price: {{input_usd_per_mtok: {PRICE_TODO}, output_usd_per_mtok: {PRICE_TODO}, source: {PRICE_TODO}}}"
            f"  # {price_note}; source: the price list and its date",
            f"    replay: {{path: {json.dumps(str(path))}, format: {format}, source_model: {json.dumps(model)}{mapping}"
            + (", trust_pickle: true}  # only for a pickle you trust" if trusted else "}"),
        ]
    return ImportResult("\n".join(lines), summary)


def _counted_lines(s: dict[str, Any]) -> list[str]:
    """A model's accuracy as the label stage counts it, its missing replies and its unlabelled questions."""
    out = []
    if s["accuracy"] is not None:
        out.append(f"      accuracy {s['accuracy']:.1%} over {s['n_items'] - s['unlabelled']} labelled question(s), as "
                   "the label stage counts it (metrics/replay_accuracy.json)")
    if s["no_reply"]:
        out.append(f"      {s['no_reply']} repl(y/ies) missing or empty, with no label of the cache's: wrong, and counted")
    graded = s["unscored"] - s["unlabelled"]
    if graded and s["imported_accuracy"] is not None:  # a scored cache with gaps: the gaps are graded by us
        out.append(f"      {s['unscored']} question(s) carry no score in the cache: {graded} graded by our labeler "
                   "against a gold")
    if s["unlabelled"]:
        out.append(f"      {s['unlabelled']} question(s) with no label (no gold, no correctness or score): the label "
                   "stage cannot label them (`dlab params check` names them)")
    return out


def _our_line(s: dict[str, Any]) -> str:
    """A model's relabel in one line: our accuracy, unparsed replies, agreement with the cache's labels."""
    text = f"      our labeler: accuracy {s['our_accuracy']:.1%} over {s['labelled_by_us']} question(s) with a gold"
    if s["no_answer"]:
        text += f", {s['no_answer']} repl(y/ies) with no extractable answer (wrong)"
    a = s["agreement"]
    if a is not None:
        text += f"; agrees with the cache's labels on {a['agreement']:.1%} of {a['n']}"
    return text
