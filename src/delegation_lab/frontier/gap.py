"""Where the oracle gap goes: for every method, how far its best point is from the oracle, split
per item into what routing lost, what the verifier lost, and where the extra dollars went.

Inputs: the frontier's item-level outcomes (`OUTCOME_SCHEMA`: the studies' and the baselines' own)
of each method's best-accuracy point (the point the methods summary reports), and the oracle's
(`oracle_items`: any solver right, at the cheapest right solver's cost). Per (seed, item), with o
the oracle's correctness and price, c the method's correctness, k its cost, h its `held_right`,
a its `answer_cost_usd` and v its `check_cost_usd`:

- accuracy gap = o - c, split into
  (a) routing = o - h: no right answer was within the method's reach though some solver had one
      (it routed to wrong models only);
  (b) verifier = h - c: a right answer was within reach and the method did not return it (the
      verifier rejected it, or accepted a wrong one first).
  Within reach (`held_right`) means: a solver it asked was right, or, for a method whose chain is
  fixed by its routing and cut short only by verdicts (the frontier's cascades, the learned cascade
  router: `Outcome.reach`), a member of that chain was right: what it would return under a perfect
  verifier. A method that chooses its next step from what it saw (the coordinator's policies) is
  judged on what it asked: a false acceptance that stopped it before it asked a right solver counts
  as routing there, so its verifier share is a lower bound. Where a study records no `held_right`
  (null: market, redref, credit, margent, served), (a) + (b) are reported together as
  `routing_or_verifier` = o - c ("the study records no trajectory").
- cost gap = k - o's price, split into
  (c1) checks = v: answers bought only to verify another;
  (c2) escalations = k - a - v: calls whose answer was not returned (rejected cascade members,
       retries, several answerers, the coordinator's handoff fees);
  (c3) answer premium = a - o's price: the answering call's price over the oracle's cheapest right
       solver (negative where a cheaper wrong answer was returned).
  Null `answer_cost_usd` or `check_cost_usd`: the cost gap is reported unsplit.

The parts are per-item identities, so their means sum to the gap (exactly up to float addition;
the reported values are rounded to 6 decimals, costs unrounded). Values are means over items with
seeds averaged (a mixture's are expectations); each part's interval is the frontier's item-level
bootstrap (`ItemBootstrap` with the same resamples: paired across methods and parts), seeds
resampled too. Cost O(P R S n) for P methods, R resamples, S seeds, n items.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.evaluation.statistics import ItemBootstrap
from delegation_lab.frontier.build import method_key

ACCURACY_PARTS = ("routing", "verifier", "routing_or_verifier")
COST_PARTS = ("checks_usd", "escalations_usd", "answer_premium_usd")
NO_TRAJECTORY = "the study records no trajectory: routing and verifier losses together"
NO_COST_SPLIT = "the study records no answer / check costs: the cost gap unsplit"


def decompose(correct: np.ndarray, cost: np.ndarray, oracle_correct: np.ndarray, oracle_cost: np.ndarray,
              held_right: np.ndarray | None = None, answer_cost: np.ndarray | None = None,
              check_cost: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per (seed, item) parts of the gap (arrays broadcast together; the module docstring's definitions):
    accuracy_gap, routing + verifier (or routing_or_verifier), cost_gap_usd and, when both costs are
    recorded, checks_usd + escalations_usd + answer_premium_usd."""
    out = {"accuracy_gap": oracle_correct - correct}
    if held_right is None:
        out["routing_or_verifier"] = out["accuracy_gap"]
    else:
        out["routing"] = oracle_correct - held_right
        out["verifier"] = held_right - correct
    out["cost_gap_usd"] = cost - oracle_cost
    if answer_cost is not None and check_cost is not None:
        out["checks_usd"] = check_cost
        out["escalations_usd"] = cost - answer_cost - check_cost
        out["answer_premium_usd"] = answer_cost - oracle_cost
    return out


def item_matrix(rows: pl.DataFrame, column: str, item_ids: list[str]) -> np.ndarray | None:
    """[n_seeds, n_items] of one point's `column` in `item_ids` order; None when any value is null."""
    if rows[column].null_count():
        return None
    wide = rows.pivot(on="item_id", index="seed", values=column).sort("seed")
    return wide.select(item_ids).to_numpy().astype(float)


def oracle_gap(frontier: pl.DataFrame, methods: dict[str, dict], outcomes: pl.DataFrame, dataset: str, split: str,
               main_verifier: str, intervals: IntervalParams) -> dict:
    """The decomposition of every method in `methods` (the frontier's summary) at its best point, from
    `outcomes` (every study's and the baselines', the oracle's included) on `dataset` / `split`.
    Methods whose best point has no outcomes on the oracle's items are listed in `without_outcomes`."""
    mine = outcomes.filter((pl.col("dataset") == dataset) & (pl.col("split") == split))
    oracle_rows = mine.filter((pl.col("study") == "baselines") & (pl.col("method") == "oracle"))
    if not oracle_rows.height:
        return {"methods": {}, "without_outcomes": sorted(k for k, m in methods.items() if m["kind"] != "oracle"),
                "note": "no oracle outcomes on this split"}
    item_ids = sorted(oracle_rows["item_id"].unique().to_list())
    o_correct = item_matrix(oracle_rows, "correct", item_ids)
    o_cost = item_matrix(oracle_rows, "cost_usd", item_ids)
    boot = ItemBootstrap(len(item_ids), intervals.resamples, intervals.confidence, intervals.seed)
    by_point = {tuple(k): g for k, g in mine.group_by(["study", "method", "operating_point", "verifier"])}
    report, missing = {}, []
    for row in frontier.filter(pl.col("dataset") == dataset).select("study", "method", "verifier").unique(maintain_order=True).iter_rows():
        key = method_key(*row, main_verifier)
        entry = methods.get(key)
        if entry is None or entry["kind"] == "oracle":
            continue
        g = by_point.get((row[0], row[1], entry["best_operating_point"], row[2]))
        if g is None or sorted(g["item_id"].unique().to_list()) != item_ids or g.height != g["seed"].n_unique() * len(item_ids):
            missing.append(key)  # no outcomes, or not on the oracle's items in every seed
            continue
        values = {c: item_matrix(g, c, item_ids) for c in ("correct", "cost_usd", "held_right", "answer_cost_usd", "check_cost_usd")}
        parts = decompose(values["correct"], values["cost_usd"], o_correct, o_cost, values["held_right"],
                          values["answer_cost_usd"], values["check_cost_usd"])
        report[key] = summarize_parts(parts, boot, entry, values["correct"].shape[0])
    return {"oracle": {"accuracy": round(float(o_correct.mean()), 6), "cost_per_item_usd": float(o_cost.mean())},
            "n_items": len(item_ids), "confidence": intervals.confidence,
            "methods": report, "without_outcomes": sorted(missing)}


def closest_first(gap: dict, kinds: set[str] | tuple[str, ...], top: int | None = None) -> list[tuple[str, dict]]:
    """The methods of `kinds`, smallest accuracy gap first (then smallest cost gap); the first `top`."""
    chosen = [(k, m) for k, m in gap["methods"].items() if m["kind"] in kinds]
    return sorted(chosen, key=lambda kv: (kv[1]["accuracy_gap"], kv[1]["cost_gap_usd"], kv[0]))[:top]


def summarize_parts(parts: dict[str, np.ndarray], boot: ItemBootstrap, entry: dict, n_seeds: int) -> dict:
    """Each part's mean and bootstrap interval (accuracy rounded to 6 decimals, dollars unrounded)."""
    out = {"kind": entry["kind"], "operating_point": entry["best_operating_point"], "n_seeds": n_seeds}
    for name, values in parts.items():
        full = np.broadcast_to(values, (n_seeds, values.shape[-1]))
        lo, hi = boot.interval(full)
        dollars = name.endswith("_usd")
        out[name] = float(full.mean()) if dollars else round(float(full.mean()), 6)
        out[f"{name}_ci"] = [lo, hi] if dollars else [round(lo, 6), round(hi, 6)]
    notes = ([NO_TRAJECTORY] if "routing_or_verifier" in parts else []) + ([] if "checks_usd" in parts else [NO_COST_SPLIT])
    if notes:
        out["notes"] = notes
    return out


# ------------------------------------------------------------------------------------------------
# the README table (`dlab gap-table`)

TABLE_KINDS = "single,cascade,study"


def gap_markdown(gap: dict, dataset: str, split: str, kinds: set[str], top: int | None, markdown_table) -> str:
    """The decomposition of the `top` methods closest to the oracle (of `kinds`) as Markdown."""

    def acc(entry: dict, name: str) -> str:
        if name not in entry:
            return "—"
        lo, hi = entry[f"{name}_ci"]
        return f"{entry[name]:.3f} [{lo:.3f}, {hi:.3f}]"

    def usd(entry: dict, name: str) -> str:
        if name not in entry:
            return "—"
        lo, hi = entry[f"{name}_ci"]
        return f"{entry[name]:.3g} [{lo:.3g}, {hi:.3g}]"

    if "oracle" not in gap:
        return f"{dataset}, {split} split: {gap['note']}.\n"
    chosen = closest_first(gap, kinds, top)
    rows = [{"method": k, "kind": m["kind"], "gap (acc)": acc(m, "accuracy_gap"), "routing": acc(m, "routing"),
             "verifier": acc(m, "verifier"), "routing or verifier": acc(m, "routing_or_verifier"),
             "cost gap (US$)": usd(m, "cost_gap_usd"), "checks": usd(m, "checks_usd"),
             "escalations": usd(m, "escalations_usd"), "answer premium": usd(m, "answer_premium_usd")} for k, m in chosen]
    oracle = gap["oracle"]
    header = (f"{dataset}, {split} split ({gap['n_items']} items): the gap to the oracle (accuracy {oracle['accuracy']:.3f} at "
              f"${oracle['cost_per_item_usd']:.3g}/item) at each method's most accurate point, split into routing "
              f"(no right answer within reach) and verifier (a right one within reach, not returned), and the extra "
              f"dollars per item into checks, escalations and the answering call's premium; "
              f"{round(100 * gap['confidence'])} % item-level bootstrap intervals. "
              f"\"routing or verifier\": the study records no trajectory.\n\n")
    return header + markdown_table(rows, ["method", "kind", "gap (acc)", "routing", "verifier", "routing or verifier",
                                          "cost gap (US$)", "checks", "escalations", "answer premium"])
