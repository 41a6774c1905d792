"""What the evaluation writes: trajectory rows (collection branches and every evaluated walk),
summary rows for the frontier, plot tables and the overview picture."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.pipeline.figures import pyplot, save_figure
from delegation_lab.margent.distill import ACTIONS
from delegation_lab.margent.evaluate import TreeTable
from delegation_lab.margent.params import SUBAGENTS
from delegation_lab.margent.study import Method
from delegation_lab.pipeline.schemas import OUTCOME_SCHEMA


def collection_rows(collection: pl.DataFrame) -> pl.DataFrame:
    """Every branch of the interventional collection as one trajectory row (step = depth)."""
    frame = collection.filter(~pl.col("blank")).sort(["item_index", "node"])
    parent = frame.select("item_index", pl.col("node").alias("parent"), pl.col("correct").alias("parent_correct"))
    roots = frame.filter(pl.col("depth") == 0).select("item_index", pl.col("correct").alias("root_correct"))
    frame = frame.join(parent, on=["item_index", "parent"], how="left").join(roots, on="item_index", how="left")
    delta = pl.col("correct").cast(pl.Int64) - pl.col("parent_correct").cast(pl.Int64)
    kind = pl.when(pl.col("depth") == 0).then(pl.lit("root")).when(delta > 0).then(pl.lit("rescue")).when(delta < 0).then(pl.lit("corruption")).otherwise(pl.lit("no_change"))
    extras = [
        json.dumps({"item_index": i, "sequence": s, "kind": k, "root_correct": r, "error": e, "answer": a, "confidence": c})
        for i, s, k, r, e, a, c in zip(
            frame["item_index"].to_list(), frame["sequence"].to_list(), frame.select(kind.alias("k"))["k"].to_list(),
            frame["root_correct"].to_list(), frame["error"].to_list(), frame["answer"].to_list(), frame["confidence"].to_list(),
            strict=True,
        )
    ]
    return frame.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("episode"),  # one episode per branch (item order, then sequence)
        pl.col("depth").alias("step"),
        pl.lit("train").alias("split"),
        "item_id",
        pl.when(pl.col("depth") == 0).then(pl.lit("commit")).otherwise(pl.lit("delegate:") + pl.col("sequence").list.join(">")).alias("action"),
        pl.when(pl.col("depth") == 0).then(pl.lit(["manager"])).otherwise(pl.col("sequence")).alias("executors"),
        "correct",
        "cost_usd",
        pl.when(pl.col("depth") == 0).then(pl.col("correct").cast(pl.Float64)).otherwise(delta.cast(pl.Float64)).alias("reward"),
        pl.col("depth").alias("calls"),
        pl.Series("extra", extras),
    )


def walk_rows(table: TreeTable, method: Method, k: int) -> pl.DataFrame:
    """One evaluated walk (method x seed k) on the test tree: a row per decision."""
    tree = table.tree
    to_pool = np.array([tree.pool.index(a) if a in tree.pool else 0 for a in SUBAGENTS])
    nodes, acts = method.walk.nodes[k], method.walk.actions[k]
    ii, tt = np.nonzero(nodes >= 0)
    node, a = nodes[ii, tt], acts[ii, tt]
    child = np.where(a > 0, tree.child[node, to_pool[np.maximum(a - 1, 0)]], node)
    correct = table.correct[ii, child]
    cost = np.where(a > 0, table.cost[ii, child], 0.0) + np.where(tt == 0, table.cost[ii, 0], 0.0)
    if method.decision_costs:
        cost = cost + table.decision_cost[ii, node]
    reward = np.where(a == 0, correct.astype(float), correct.astype(float) - table.correct[ii, node].astype(float))
    root = table.root_correct[ii]
    conf = table.features[ii, node, 1]
    return pl.DataFrame({
        "episode": ii.astype(np.int64), "step": tt.astype(np.int64), "split": ["test"] * len(ii),
        "item_id": [table.item_ids[i] for i in ii],
        "action": ["commit" if x == 0 else f"delegate:{ACTIONS[x]}" for x in a],
        "executors": [["manager"] if x == 0 else [ACTIONS[x]] for x in a],
        "correct": correct, "cost_usd": cost, "reward": reward, "calls": tree.depth[child].astype(np.int64),
        "extra": [json.dumps({"candidate_correct": bool(r), "confidence": round(float(c), 4), "operating_point": method.operating_point})
                  for r, c in zip(root, conf, strict=True)],
    })


ORACLE = "margent-oracle"


def summary_rows(methods: list[Method], dataset: str, solvers: str, run_ids: dict[tuple[str, str, int], str],
                 verifier: str | None = None) -> list[dict]:
    """Held-out rows for the frontier; the measured oracle (it reads gold) is left out.

    `verifier`: the shared `evaluation.verifier`'s name. No MARGENT method consults a verifier (the
    manager commits on its own, the baselines follow fixed sequences), so their results are the same
    under any verifier and the rows join the run's verifier set."""
    rows = []
    for m in methods:
        if m.name == ORACLE:
            continue
        for seed, row in zip(m.seeds, m.rows, strict=True):
            rows.append({
                "study": "margent", "method": m.name, "seed": seed, "split": "test", "operating_point": m.operating_point,
                "accuracy": row["accuracy"], "cost_per_item_usd": row["cost_per_item_usd"], "calls_per_item": row["calls"],
                "return": None, "n_items": row["n_items"], "dataset": dataset, "solver_set": solvers,
                "run_id": run_ids.get((m.name, m.operating_point, seed)), "verifier": verifier,
            })
    return rows


def outcome_rows(methods: list[Method], item_ids: list[str], dataset: str, verifier: str | None) -> pl.DataFrame:
    """Item-level test outcomes for every summary row (same method / operating point / seed)."""
    parts = []
    n = len(item_ids)
    for m in methods:
        if m.name == ORACLE:
            continue
        for k, seed in enumerate(m.seeds):
            parts.append(pl.DataFrame({
                "study": ["margent"] * n, "method": [m.name] * n, "operating_point": [m.operating_point] * n, "seed": [seed] * n,
                "split": ["test"] * n, "dataset": [dataset] * n, "verifier": [verifier] * n, "item_id": [str(i) for i in item_ids],
                "correct": m.outcomes["correct"][k].astype(float), "cost_usd": m.outcomes["cost"][k].astype(float),
            }, schema_overrides={"verifier": pl.String}))
    return pl.concat(parts) if parts else pl.DataFrame(schema=OUTCOME_SCHEMA)


def operating_points(metrics: dict) -> pl.DataFrame:
    rows = [{"method": f"margent rho={label}", "calls": v["calls"], "accuracy": v["accuracy"], "call_gap": v["call_gap"],
             "cost_per_item_usd": v["cost_per_item_usd"]} for label, v in metrics["rho"].items() if label != "paper"]
    rows += [{"method": name, "calls": v["calls"], "accuracy": v["accuracy"], "call_gap": v["call_gap"],
              "cost_per_item_usd": v["cost_per_item_usd"]} for name, v in metrics["baselines"].items()]
    return pl.DataFrame(rows)


def table1_frame(metrics: dict) -> pl.DataFrame:
    t1 = metrics["table1"]
    return pl.DataFrame([{"depth": k, "accuracy": t1[f"A{k}"]} for k in range(t1["depth"] + 1)])


def table2_frame(metrics: dict) -> pl.DataFrame:
    """One row per sub-agent; the net value's interval as net_value_low / net_value_high (CSV cells are flat)."""
    rows = []
    for a, d in metrics["marginal"].items():
        lo, hi = d.get("net_value_ci") or (None, None)
        rows.append({"agent": a, **{k: v for k, v in d.items() if k != "net_value_ci"}, "net_value_low": lo, "net_value_high": hi})
    return pl.DataFrame(rows)


def plot_overview(metrics: dict, out: Path) -> Path:
    plt = pyplot()

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.3), dpi=110)
    t1 = metrics["table1"]
    depths = list(range(t1["depth"] + 1))
    axes[0].bar([f"A{k}" for k in depths], [t1[f"A{k}"] for k in depths], color="tab:blue")
    gain = t1["gain_at_1"]
    axes[0].set_title(f"Measured oracle by depth (Gain@1 {gain:.1f} %)" if gain is not None else "Measured oracle by depth")
    axes[0].set_ylabel("accuracy (%)")
    agents = [a for a in metrics["table2"] if a != "paper"]
    values = [metrics["table2"][a] for a in agents]
    axes[1].bar(agents, values, color=["tab:red" if v < 0 else "tab:green" for v in values])
    axes[1].axhline(0, color="black", lw=0.8)
    axes[1].set_title("Net marginal value of one forced call (points)")
    ax = axes[2]
    rho = {k: v for k, v in metrics["rho"].items() if k != "paper"}
    xs, ys = [v["calls"] for v in rho.values()], [v["accuracy"] for v in rho.values()]
    ax.plot(xs, ys, "o-", color="tab:blue", label="MARGENT (ρ sweep)")
    for label, x, y in zip(rho, xs, ys, strict=True):
        ax.annotate(f"ρ={label}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    markers = {"candidate": "s", "forced_verifier": "D", "force_all": "P", "prompted": "v", "oracle": "*"}
    for name, marker in markers.items():
        if name in metrics["baselines"]:
            b = metrics["baselines"][name]
            ax.plot([b["calls"]], [b["accuracy"]], marker, markersize=9, label=name.replace("_", " "))
    ax.set_xlabel("sub-agent calls per example")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("Test: accuracy vs calls")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, out)
