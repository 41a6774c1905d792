"""Marginal-value distillation: the selection rule (Eqs. 3-4) and the ρ cap.

- correct root -> commit immediately;
- wrong root whose first success is at depth d -> one of the shortest successes, chosen with a
  fixed per-example seed: d delegations, then commit;
- wrong root with no success to depth D -> no label (the state teaches neither commit nor delegate).

Commit examples are capped at ρ x the number of rescue examples (`all` keeps every one), drawn
with a seeded subsample. The result is both the SFT data of an LLM manager (chat JSONL, one
conversation per example, every manager turn supervised: candidate, decisions, revisions) and the
decision steps the embedded manager policy trains on.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.data.items import Item
from delegation_lab.margent import prompts
from delegation_lab.margent.params import SUBAGENTS, Rho
from delegation_lab.margent.schemas import Decision
from delegation_lab.margent.simulator import hash_uniform, item_key

ACTIONS = ("commit", *SUBAGENTS)
"""Policy outputs: index 0 commits, index 1 + k delegates to SUBAGENTS[k]."""


@dataclass(frozen=True)
class Example:
    """One labelled root state and its target trajectory."""

    item_index: int
    item_id: str
    kind: str  # commit | rescue
    sequence: tuple[str, ...]


def label_examples(collection: pl.DataFrame, seed: int) -> tuple[list[Example], dict[str, int]]:
    """Targets of the selection rule for every root state of the collection."""
    frame = collection.filter(~pl.col("blank")).select("item_index", "item_id", "node", "depth", "sequence", "correct")
    roots = frame.filter(pl.col("depth") == 0).sort("item_index")
    successes = (
        frame.filter((pl.col("depth") > 0) & pl.col("correct"))
        .with_columns(pl.col("depth").min().over("item_index").alias("first"))
        .filter(pl.col("depth") == pl.col("first"))
        .sort(["item_index", "node"])
        .group_by("item_index", maintain_order=True)
        .agg(pl.col("sequence"))
    )
    shortest = dict(zip(successes["item_index"].to_list(), successes["sequence"].to_list(), strict=True))
    examples, counts = [], {"commit": 0, "rescue": 0, "unlabelled": 0}
    for row in roots.iter_rows(named=True):
        i = row["item_index"]
        if row["correct"]:
            examples.append(Example(i, row["item_id"], "commit", ()))
            counts["commit"] += 1
        elif i in shortest:
            options = shortest[i]
            u = float(hash_uniform(seed, item_key(row["item_id"]), 0x5EED)[()])
            examples.append(Example(i, row["item_id"], "rescue", tuple(options[int(u * len(options)) % len(options)])))
            counts["rescue"] += 1
        else:
            counts["unlabelled"] += 1
    return examples, counts


def commit_cap(rho: Rho, n_rescue: int, n_commit: int) -> int:
    if rho == "all":
        return n_commit
    return min(n_commit, int(math.floor(float(rho) * n_rescue + 1e-9)))


def select(examples: list[Example], rho: Rho, seed: int) -> list[Example]:
    """All rescue examples plus a seeded subsample of at most ρ x rescue commit examples."""
    rescue = [e for e in examples if e.kind == "rescue"]
    commit = [e for e in examples if e.kind == "commit"]
    k = commit_cap(rho, len(rescue), len(commit))
    rng = np.random.default_rng([seed, 0xC0])
    keep = sorted(rng.choice(len(commit), size=k, replace=False).tolist()) if k else []
    chosen = rescue + [commit[j] for j in keep]
    return sorted(chosen, key=lambda e: e.item_index)


@dataclass(frozen=True)
class StepTable:
    """The decision steps of all examples (each example's steps are contiguous)."""

    example: np.ndarray  # [N] index into the examples list
    item_index: np.ndarray
    node: np.ndarray
    action: np.ndarray  # index into ACTIONS
    features: np.ndarray  # [N, F]
    mask: np.ndarray  # [N, len(ACTIONS)] actions available in the state


def decision_steps(examples: list[Example], collection: pl.DataFrame, pool: tuple[str, ...]) -> StepTable:
    """Expand every target trajectory into (state, action) steps with the collection's features."""
    frame = collection.filter(~pl.col("blank"))
    lookup = {
        (i, tuple(seq)): (n, f)
        for i, seq, n, f in zip(frame["item_index"], frame["sequence"].to_list(), frame["node"], frame["features"].to_list(), strict=True)
    }
    ex, items, nodes, actions, feats, masks = [], [], [], [], [], []
    for k, e in enumerate(examples):
        for t in range(len(e.sequence) + 1):
            prefix = e.sequence[:t]
            node, f = lookup[(e.item_index, prefix)]
            action = 0 if t == len(e.sequence) else 1 + SUBAGENTS.index(e.sequence[t])
            ex.append(k), items.append(e.item_index), nodes.append(node), actions.append(action), feats.append(f)
            masks.append(action_mask(prefix, pool))
    return StepTable(
        np.array(ex, dtype=np.int64), np.array(items, dtype=np.int64), np.array(nodes, dtype=np.int64),
        np.array(actions, dtype=np.int64), np.array(feats, dtype=np.float32).reshape(len(feats), -1),
        np.array(masks, dtype=bool).reshape(len(masks), len(ACTIONS)),
    )


def action_mask(used: tuple[str, ...] | list[str], pool: tuple[str, ...]) -> list[bool]:
    return [True, *[(a in pool and a not in used) for a in SUBAGENTS]]


# ---------------------------------------------------------------------------------------------
# SFT data for an LLM manager


def _candidate_json(row: dict) -> str:
    return json.dumps({"answer": row["answer"], "confidence": round(row["confidence"], 3), "rationale": row["rationale"] or ""})


def sft_conversation(example: Example, view: Item, path: list[dict], pool: tuple[str, ...]) -> dict:
    """One example as a chat: every manager turn of the target trajectory is an assistant message.

    `path`: the collection rows of the root and of each prefix of the target sequence."""
    def user(template, context: dict[str, str]) -> dict[str, str]:
        return {"role": "user", "content": template.render(view, context)[-1]["content"]}

    fmt = prompts.answer_format(tuple(view.choices) if view.choices else None)
    messages = [{"role": "system", "content": prompts.MANAGER_SYSTEM}]
    messages.append(user(prompts.CANDIDATE, {"answer_format": fmt}))
    messages.append({"role": "assistant", "content": _candidate_json(path[0])})
    history: list[str] = []
    for t in range(len(example.sequence) + 1):
        row = path[t]
        used = example.sequence[:t]
        available = [a for a in pool if a not in used]
        context = {
            "candidate": _candidate_json(row), "history": "\n".join(history) or "none",
            "available": ", ".join(available) if available else "none (you must commit)",
        }
        messages.append(user(prompts.DECIDE, context))
        if t == len(example.sequence):
            messages.append({"role": "assistant", "content": prompts.decision_json(Decision(action="commit"))})
            break
        agent = example.sequence[t]
        messages.append({"role": "assistant", "content": prompts.decision_json(Decision(action="delegate", agent=agent))})
        nxt = path[t + 1]
        signal = nxt["signal"] or json.dumps({"error": nxt["error"]})
        messages.append(user(prompts.REVISE, {
            "candidate": _candidate_json(row), "history": "\n".join(history) or "none", "agent": agent,
            "signal": signal, "answer_format": fmt,
        }))
        messages.append({"role": "assistant", "content": _candidate_json(nxt)})
        history.append(json.dumps({"agent": agent, "signal": json.loads(signal), "answer_after": nxt["answer"]}))
    return {"messages": messages, "metadata": {"item_id": example.item_id, "kind": example.kind, "sequence": list(example.sequence)}}


def write_sft(path: Path, examples: list[Example], collection: pl.DataFrame, views: pl.DataFrame, pool: tuple[str, ...]) -> int:
    """Chat-format JSONL (`{"messages": [...]}` per line), the input format of standard SFT tools."""
    frame = collection.filter(~pl.col("blank"))
    rows = {(r["item_index"], tuple(r["sequence"])): r for r in frame.iter_rows(named=True)}
    items = {
        r["item_index"]: Item(item_id=r["item_id"], split="", question=r["question"], gold=None, choices=r["choices"])
        for r in views.iter_rows(named=True)
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as fh:
        for e in examples:
            trail = [rows[(e.item_index, e.sequence[:t])] for t in range(len(e.sequence) + 1)]
            fh.write(json.dumps(sft_conversation(e, items[e.item_index], trail, pool)) + "\n")
    tmp.replace(path)
    return len(examples)
