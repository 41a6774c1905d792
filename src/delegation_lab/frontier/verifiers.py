"""The verifiers the frontier's baselines are computed under, and what each frontier row and method
says about its verifier.

- Sets (`verifier_sets`): the main verifier (`evaluation.verifier`, the studies' one), each of
  `evaluation.compare_verifiers` (e.g. a k-of-m agreement vote) and `gold` where a study ran with a
  perfect verifier. The baselines are recomputed under each (frontier/build.py); each
  (dataset, verifier) is its own Pareto set.
- Deployable: every frontier row's `verifier_deployable` is `Verifier.deployable` of the verifier it
  records (null where the frontier did not build that verifier: `unrecorded`, a simulated
  environment's own reward, a name from another run); the baseline oracle's is false (it reads gold).
  A method whose best point rests on a verifier that is not deployable (a cascade's or a study's
  accept decisions; a single, a mixture or a served policy takes none) is marked `not_deployable`
  with the reason (`Verifier.not_deployable_reason`).
- Rates (`verifier_report`): each verifier's description with its FP / FN against gold
  (`evaluation.error_rates`) on every labelled answer of the reported split and of each other split
  given (train), over the verifier seeds the cascades use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from delegation_lab.errors import ConfigError
from delegation_lab.evaluation.rates import error_rates
from delegation_lab.evaluation.verifier import Verifier
from delegation_lab.params.root import CascadeNoise
from delegation_lab.frontier.cascades import verifier_seeds

RESTS_ON_VERIFIER = ("cascade", "study")
"""Kinds whose points' accept decisions came from the row's verifier."""
ORACLE = "oracle"  # the baseline oracle's verifier column: it knows gold, an upper bound


@dataclass(frozen=True)
class VerifierSet:
    """One verifier the baselines are computed under: `role` main | compared | gold upper bound, and
    `compare_name` its `evaluation.compare_verifiers` name (compared ones only)."""

    verifier: Verifier
    role: str
    compare_name: str | None = None


def verifier_sets(main: Verifier, compared: Mapping[str, Verifier], study_verifiers: list[str]) -> list[VerifierSet]:
    """The main verifier first, then each compared one, then `gold` where a study ran with it (and no
    set is gold already). Two sets that decide under one name would merge their rows: an error."""
    sets = [VerifierSet(main, "main")] + [VerifierSet(v, "compared", name) for name, v in compared.items()]
    seen = {main.name: "evaluation.verifier"}
    for s in sets[1:]:
        if s.verifier.name in seen:
            raise ConfigError("params.yaml", [f"evaluation.compare_verifiers: {s.compare_name!r} is the verifier "
                                              f"{s.verifier.name}, as {seen[s.verifier.name]} is: compare another one"])
        seen[s.verifier.name] = f"evaluation.compare_verifiers {s.compare_name!r}"
    if main.kind != "gold" and "gold" in study_verifiers and "gold" not in seen:
        sets.append(VerifierSet(Verifier("gold", source="gold labels"), "gold upper bound"))
    return sets


def deployable_by_name(sets: list[VerifierSet]) -> dict[str, bool]:
    """Verifier name (a frontier row's `verifier`) -> deployable, for the verifiers the frontier built."""
    return {ORACLE: False} | {s.verifier.name: s.verifier.deployable for s in sets}


def with_deployable(frontier: pl.DataFrame, sets: list[VerifierSet]) -> pl.DataFrame:
    """`frontier` with `verifier_deployable` after `verifier` (null for a verifier it did not build)."""
    known = deployable_by_name(sets)
    flag = pl.col("verifier").replace_strict(known, default=None, return_dtype=pl.Boolean).alias("verifier_deployable")
    return frontier.with_columns(flag)


def mark_methods(methods: dict[str, dict], sets: list[VerifierSet]) -> None:
    """Each method entry's `verifier_deployable`; `not_deployable` (the reason) where its best point
    rests on a verifier no deployment could run."""
    known = deployable_by_name(sets)
    reasons = {s.verifier.name: s.verifier.not_deployable_reason for s in sets}
    for entry in methods.values():
        entry["verifier_deployable"] = known.get(entry["verifier"])
        reason = reasons.get(entry["verifier"])
        if reason and entry["kind"] in RESTS_ON_VERIFIER:
            entry["not_deployable"] = reason


def verifier_report(sets: list[VerifierSet], labeled: Mapping[str, pl.DataFrame], cascade: CascadeNoise) -> dict[str, Any]:
    """Verifier name -> its description, role, compare name and its pooled FP / FN against gold on
    each split of `labeled` (split -> labelled answers: solver, item_id, correct), over the verifier
    seeds the cascades draw (`frontier.cascade.seeds` for a judge)."""
    out = {}
    for s in sets:
        v = s.verifier
        rates = {}
        for split, answers in labeled.items():
            graded = answers.filter(pl.col("correct").is_not_null()).select("solver", "item_id", "correct")
            try:
                rates[split] = error_rates(v, graded, verifier_seeds(cascade, v))["all"]
            except ValueError as e:  # a cached judge that did not grade this split's answers
                rates[split] = {"unavailable": str(e)}
        out[v.name] = {**v.describe(), "role": s.role, **({"compare_name": s.compare_name} if s.compare_name else {}),
                       "not_deployable": v.not_deployable_reason, "error_rates": rates}
    return out


def deployable_note(kind: str, deployable: bool | None, reason: str | None) -> str:
    """What a table says of a point's verifier: `—` where the point takes no accept decision (a single,
    a mixture, an oracle, a served policy), `deployable`, why not (`simulated verifier: not
    deployable`), or `unknown` (a verifier the frontier did not build, e.g. `unrecorded`)."""
    if kind not in RESTS_ON_VERIFIER:
        return "—"
    if deployable is None:
        return "unknown"
    return "deployable" if deployable else reason or "not deployable"


def verifier_summary(described: dict, split: str) -> str:
    """`<name> (deployable, FP 0.205 / FN 0.014 on test)` from a `verifiers` entry (or an older
    metrics file's `verifier`, which may say neither)."""
    said = []
    if described.get("deployable") is not None:
        said.append("deployable" if described["deployable"] else described.get("not_deployable") or "not deployable")
    rates = (described.get("error_rates") or {}).get(split) or {}
    if rates.get("false_positive_rate") is not None and rates.get("false_negative_rate") is not None:
        said.append(f"FP {rates['false_positive_rate']:.3f} / FN {rates['false_negative_rate']:.3f} on {split}")
    return described["name"] + (f" ({', '.join(said)})" if said else "")


def main_verifier(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The description of the verifier the studies ran under, in a metrics/frontier.json: its
    `verifier` block, else the `verifiers` entry whose role is main; None when it names neither."""
    named = summary.get("verifier")
    if named and named.get("name"):
        return dict(named)
    sets = summary.get("verifiers") or {}
    return next((dict(d, name=d.get("name", n)) for n, d in sets.items() if d.get("role") == "main"), None)
