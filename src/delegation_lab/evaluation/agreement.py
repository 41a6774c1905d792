"""`agreement`: accept an answer when other models' cached final answers agree with it.

The signal a deployed cascade has (FrugalGPT / AutoMix style): no gold, no judge, only whether
`evaluation.verifier.models` give the same final answer on the item. It is real and priced: a check
of solver S on an item obtains the answer of every verifier model other than S, at that answer's
cached cost (`check_costs`), and a study that pays for its checks counts each as a call.

Same answer means what the label stage means by right answer, with the verifier model's final
answer in the place of gold: the item's matcher (`answer_format`, else `label.matcher`, `auto`
resolved against the item's gold) from `labeling.MATCHERS` (numeric within `label.numeric_tolerance`,
choice letters, math-verify). An answer without a final answer (a backend error, nothing parsed)
agrees with nothing. Verdicts depend on (solver, item) only, so every seed sees the same ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation.params import VerifierParams
from delegation_lab.evaluation.rates import error_rates
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.labeling import AUTO, MATCHERS
from delegation_lab.labeling.matchers import MatchSettings, MatchStats, ToMatch, matcher_for
from delegation_lab.labeling.math_verifier import math_answer
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import ANSWERS_SCHEMA
from delegation_lab.pipeline.tables import read_items, read_table

KEY = "evaluation.verifier.models"
ANSWER_COLUMNS = ("parsed_answer", "answer_text", "error", "tokens_out", "cost_usd", "extra")


@dataclass(frozen=True)
class AgreementVerifier(Verifier):
    """Verdicts precomputed per (solver, item) from the cached final answers of `models`."""

    models: tuple[str, ...] = ()
    min_agree: int = 1
    answer_costs: dict[str, dict[str, float]] = field(default_factory=dict, repr=False)  # model -> item -> US$
    measured: dict[str, Any] = field(default_factory=dict, repr=False)  # error_rates of the checked answers, by split

    @property
    def name(self) -> str:
        models = ",".join(self.models)
        return f"agreement({models})" if self.min_agree == 1 else f"agreement({models};min_agree={self.min_agree})"

    def accepts(self, solvers, item_ids, correct, seeds) -> np.ndarray:
        """The precomputed verdicts; `correct` only gives the shape (agreement never sees gold)."""
        return self._lookup(solvers, item_ids, correct, seeds)

    def check_costs(self, solver: str, item_ids: Sequence[str]) -> dict[str, np.ndarray]:
        return {m: np.array([self.answer_costs[m][str(i)] for i in item_ids], dtype=float)
                for m in self.models if m != solver}

    def describe(self) -> dict:
        pooled = self.measured.get("all", {}).get("all", {})
        return {**super().describe(), "false_positive_rate": pooled.get("false_positive_rate"),
                "false_negative_rate": pooled.get("false_negative_rate"), "models": list(self.models),
                "min_agree": self.min_agree, "measured": self.measured}

    def _no_verdict(self, solver: str, item: str) -> str:
        return (f"evaluation.verifier.kind=agreement: solver {solver!r} has no labelled answer on item {item!r} "
                "(the verifier was built from data/labels.parquet; rerun the label stage)")


def agreement_verifier(params: VerifierParams, root: Path, labels: pl.DataFrame | None) -> AgreementVerifier:
    """`agreement`: read every labelled answer's text and the items under `root`, compare as the project's
    `label` section says (its params.yaml)."""
    from delegation_lab.params.root import (
        load_params,  # config imports this package's params
    )

    layout = Layout(root)
    label = load_params(layout.params_file).label
    answers = labelled_answers(layout, labels if labels is not None else read_table(layout.labels, "labels"))
    return from_answers(params, answers, label.matcher, MatchSettings(label.numeric_tolerance, label.math_timeout_s))


def labelled_answers(layout: Layout, labels: pl.DataFrame) -> pl.DataFrame:
    """The graded answers (labels' request_hash) with their text, output tokens and cost, and their items'
    gold and format."""
    answers = pl.concat([read_table(layout.answers(s), f"answers of solver {s}") for s in labels["solver"].unique().sort()],
                        how="vertical_relaxed")
    # a cache that brought correctness only (no text) or counted no tokens: nulls, which `check_models` refuses
    # where a final answer is needed
    answers = answers.with_columns(pl.lit(None, dtype=ANSWERS_SCHEMA[c]).alias(c) for c in ANSWER_COLUMNS if c not in answers.columns)
    items = read_items(layout)
    if "answer_format" not in items.columns:
        items = items.with_columns(pl.lit(None, dtype=pl.String).alias("answer_format"))
    keys = ["solver", "item_id", "request_hash"]
    return (labels.select(*keys, "correct")
            .join(answers.select(*keys, *ANSWER_COLUMNS), on=keys, how="inner")
            .join(items.select("item_id", "split", "gold", "choices", "answer_format"), on="item_id", how="inner"))


def from_answers(params: VerifierParams, answers: pl.DataFrame, matcher: str = AUTO,
                 settings: MatchSettings | None = None) -> AgreementVerifier:
    """The verifier over `answers` (one row per solver x item: solver, item_id, correct, parsed_answer,
    answer_text, error, cost_usd, extra, split, gold, choices, answer_format), compared with the label
    stage's `matcher` and `settings` (default: its defaults)."""
    check_models(answers, params.models)
    models = tuple(params.models)
    verdicts = agreement_verdicts(answers, models, params.min_agree, matcher, settings or MatchSettings())
    costs = {m: dict(answers.filter(pl.col("solver") == m).select("item_id", "cost_usd").iter_rows()) for m in models}
    verifier = AgreementVerifier("agreement", seed=params.seed, verdicts=verdicts, models=models,
                                 min_agree=params.min_agree, answer_costs=costs,
                                 source=f"final answers of {', '.join(models)} (data/answers), measured against gold")
    # rates of the answers it checks: a lone verifier model's own answers pass unchecked
    checked = answers.filter(~pl.col("solver").is_in(models) | pl.lit(len(models) > 1))
    measured = {"all": error_rates(verifier, checked)}
    for (split,), part in checked.group_by(["split"], maintain_order=True):
        measured[str(split)] = error_rates(verifier, part)
    return replace(verifier, measured=measured)


def agreement_verdicts(answers: pl.DataFrame, models: tuple[str, ...], min_agree: int, matcher: str,
                       settings: MatchSettings) -> dict[tuple[str, str], bool]:
    """(solver, item) -> at least min(min_agree, other models) of `models` other than the solver agree."""
    same = pairwise_agreement(answers, models, matcher, settings)
    return {key: sum(found.values()) >= min(min_agree, sum(m != key[0] for m in models)) for key, found in same.items()}


def pairwise_agreement(answers: pl.DataFrame, models: tuple[str, ...], matcher: str,
                       settings: MatchSettings) -> dict[tuple[str, str], dict[str, bool]]:
    """(solver, item) -> {model: same final answer} for every row of `answers` and each of `models` other
    than the solver that could be compared (both have a final answer; an answer without one agrees with
    nothing, so its dict is empty)."""
    refs = {(r["solver"], r["item_id"]): r for r in answers.filter(pl.col("solver").is_in(models)).iter_rows(named=True)}
    same: dict[tuple[str, str], dict[str, bool]] = {}
    pairs: dict[str, list[tuple[tuple[str, str], str, ToMatch]]] = {}
    for row in answers.iter_rows(named=True):
        key = (row["solver"], row["item_id"])
        same[key] = {}
        if row["error"] is not None:
            continue
        name = matcher_of(row, matcher)
        for m in models:
            ref = reference_answer(refs[(m, row["item_id"])], name) if m != row["solver"] else None
            if ref is not None:
                pairs.setdefault(name, []).append((key, m, ToMatch(row["parsed_answer"], row["answer_text"], ref)))
    for name, group in pairs.items():
        verdicts = MATCHERS.get(name)([t for _, _, t in group], settings, MatchStats())
        for (key, model, _), verdict in zip(group, verdicts, strict=True):
            same[key][model] = bool(verdict)
    return same


def matcher_of(row: dict, declared: str) -> str:
    """The matcher the label stage uses for this item (an item without gold: numeric, or choice)."""
    declared = row["answer_format"] or declared
    if row["gold"] is None:
        return ("choice" if row["choices"] is not None else "numeric") if declared == AUTO else declared
    return matcher_for(declared, row["gold"], row["choices"] is not None)


def reference_answer(row: dict, matcher: str) -> str | None:
    """A verifier model's final answer, in the place the matcher puts gold; None when it has none."""
    if row["error"] is not None:
        return None
    if matcher == "math":
        found = math_answer(row["parsed_answer"], row["answer_text"])
        return found.text if found else None
    return row["parsed_answer"]


def check_models(answers: pl.DataFrame, models: list[str], kind: str = "agreement") -> None:
    """Refuse models that are not solvers, solvers whose caches hold no answer text, and gaps (the
    messages name `evaluation.verifier.kind` `kind`, the verifier reading those answers)."""
    solvers = answers["solver"].unique().sort().to_list()
    unknown = [m for m in models if m not in solvers]
    if unknown:
        raise ConfigError("params.yaml", [
            f"{KEY}: {', '.join(unknown)} not among the solvers with labelled answers ({', '.join(solvers)})"])
    textless = pl.col("parsed_answer").is_null() & pl.col("answer_text").fill_null("").str.strip_chars().eq("")
    no_text = (answers.group_by("solver").agg(textless.all().alias("none"), pl.col("extra").first(), pl.len().alias("n"))
               .filter(pl.col("none")).sort("solver"))
    if no_text.height:
        raise InputError(_no_text_message(no_text, kind))
    items = answers["item_id"].unique()
    for m in models:
        missing = items.filter(~items.is_in(answers.filter(pl.col("solver") == m)["item_id"]))
        if missing.len():
            raise InputError(f"{KEY}: {m!r} has no labelled answer on {missing.len()} items the other solvers answered "
                             f"(e.g. {missing.sort()[0]!r}): a verifier model must answer every item")


def _no_text_message(no_text: pl.DataFrame, kind: str) -> str:
    """One line: the first solver without any final answer, its answers file and its cache."""
    row = no_text.row(0, named=True)
    source = (json.loads(row["extra"]) if row["extra"] else {}).get("replay_source_file")
    where = str(Layout(Path(".")).answers(row["solver"])) + (f"; its cache {source} has no reply text" if source else "")
    others = f" ({no_text.height} such solvers: {', '.join(no_text['solver'])})" if no_text.height > 1 else ""
    return (f"evaluation.verifier.kind {kind} compares final answers, but solver {row['solver']!r} has none: "
            f"`parsed_answer` and `answer_text` are empty in all {row['n']} of its answers ({where}): use kind judge, "
            f"or solvers whose cache holds their replies{others}")
