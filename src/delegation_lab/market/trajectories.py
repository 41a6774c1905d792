"""Every auction a trajectory row: bids, winner, prices paid and received, utility, subsidy.

`AuctionRecorder` turns each round's `RoundLog` into compact numpy arrays (only auctions that took
place), and `frames` builds one polars frame per world in the platform's trajectory schema:
`episode` = task, `step` = auction within the task, `action` / `executors` = the winner, `correct`
= the task's final success, `cost_usd` = the winner's inference cost, `reward` = the environment
reward r (minus the cost, plus the terminal reward), `calls` = 1 when the state was sold; the
market facts go to `extra` (JSON): place, seller, every bid, the agents that bid as probes, b1, b2,
price paid, amount the seller received, subsidy, the winner's utility U = r + P_in - P_out, its
shade and valuation (units of the terminal reward).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import torch

from delegation_lab.market.engine import RoundLog

DIGITS = 6  # money in the extra JSON is rounded to a micro-dollar


@dataclass
class AuctionRecorder:
    """Accumulates auction rows of many rounds; `every` > 1 keeps only every n-th training round."""

    every: int = 1
    keep: np.ndarray | None = None  # [W] bool: the worlds whose auctions are recorded (None = all)
    parts: list[dict[str, np.ndarray]] = field(default_factory=list)

    def add(self, log: RoundLog, round_index: int, episode_offset: int, split: str, items: Callable[[np.ndarray], np.ndarray], force: bool = False) -> None:
        if not force and round_index % self.every:
            return
        steps = log.steps

        def st(name: str) -> np.ndarray:
            return torch.stack([getattr(s, name) for s in steps]).cpu().numpy()

        active = st("active")  # [T, W, K]
        if self.keep is not None:
            active = active & self.keep[None, :, None]
        t, w, k = np.nonzero(active)
        if t.size == 0:
            return
        pick = (t, w, k)
        bidding = st("bidding")[pick]
        terminal = st("terminal")[pick]
        cost = st("cost")[pick]
        kept = st("holder_income")[pick] * (~st("sold")[pick]) * st("unsold_end")[pick]
        self.parts.append(
            {
                "world": w,
                "episode": episode_offset + k,
                "step": t,
                "split": np.full(t.size, split, dtype=object),
                "item": items(st("item")[pick]),
                "place": st("place")[pick],
                "winner": st("winner")[pick],
                "holder": st("holder")[pick],
                "b1": st("b1")[pick],
                "b2": st("b2")[pick],
                "paid": st("buyer_pays")[pick],
                "seller_got": st("seller_gets")[pick],
                "subsidy": st("subsidy")[pick],
                "utility": log.utility.cpu().numpy()[pick],
                "cost": cost,
                "reward": terminal - cost + kept,
                "correct": log.success.cpu().numpy()[w, k],
                "agents": st("agents")[pick],
                "bidding": bidding,
                "bids": st("bids")[pick],
                "probe": st("probe")[pick],
                "xi": st("xi")[pick],
                "valuation": st("value")[pick],
                "winner_slot": st("winner_slot")[pick],
            }
        )

    def frames(self, agent_names: Sequence[str], place_names: Sequence[str]) -> dict[int, pl.DataFrame]:
        """Rows per world in the trajectory schema (study / method / seed come from the partition,
        which names the protocol, bidder and density or operating point)."""
        if not self.parts:
            return {}
        cols = {key: np.concatenate([p[key] for p in self.parts]) for key in self.parts[0]}
        n = cols["world"].size
        names = np.asarray(list(agent_names), dtype=object)
        places = np.asarray(list(place_names), dtype=object)
        winner = cols["winner"]
        sold = winner >= 0
        slot = np.where(sold, cols["winner_slot"], 0)
        rows_idx = np.arange(n)
        shade = np.where(sold, cols["xi"][rows_idx, slot], np.nan)
        valuation = np.where(sold, cols["valuation"][rows_idx, slot], np.nan)
        action = np.where(sold, names[np.clip(winner, 0, None)], "none")
        holder = cols["holder"]
        seller = np.where(holder >= 0, names[np.clip(holder, 0, None)], "consumer")
        r, m = np.nonzero(cols["bidding"])
        bids_long = pl.DataFrame(
            {
                "row": r.astype(np.int64),
                "agent": names[cols["agents"][r, m]].astype(str),
                "bid": np.round(cols["bids"][r, m].astype(np.float64), DIGITS),
                "probe": cols["probe"][r, m].astype(bool),
            }
        )
        bids = bids_long.group_by("row").agg(
            pl.struct("agent", "bid").alias("bids"), pl.col("agent").filter(pl.col("probe")).alias("probes")
        )
        base = pl.DataFrame(
            {
                "row": rows_idx.astype(np.int64),
                "world": cols["world"].astype(np.int64),
                "episode": cols["episode"].astype(np.int64),
                "step": cols["step"].astype(np.int64),
                "split": cols["split"].astype(str),
                "item_id": np.asarray(cols["item"]).astype(str),
                "action": action.astype(str),
                "correct": cols["correct"].astype(bool),
                "cost_usd": cols["cost"].astype(np.float64),
                "reward": cols["reward"].astype(np.float64),
                "calls": sold.astype(np.int64),
                "place": places[cols["place"]].astype(str),
                "seller": seller.astype(str),
                "b1": cols["b1"].astype(np.float64),
                "b2": cols["b2"].astype(np.float64),
                "paid": cols["paid"].astype(np.float64),
                "seller_received": cols["seller_got"].astype(np.float64),
                "subsidy": cols["subsidy"].astype(np.float64),
                "utility": cols["utility"].astype(np.float64),
                "shade": shade.astype(np.float64),
                "valuation_units": valuation.astype(np.float64),
            }
        ).join(bids, on="row", how="left")
        money = ["b1", "b2", "paid", "seller_received", "subsidy", "utility", "shade", "valuation_units"]
        base = base.with_columns(pl.col(money).round(DIGITS))
        extra_fields = ["place", "seller", "bids", "probes", *money]
        frame = base.with_columns(
            pl.when(pl.col("action") == "none").then(pl.lit([], dtype=pl.List(pl.String))).otherwise(pl.concat_list("action")).alias("executors"),
            pl.struct(extra_fields).struct.json_encode().alias("extra"),
        ).sort(["world", "split", "episode", "step"])
        keep = ["episode", "step", "split", "item_id", "action", "executors", "correct", "cost_usd", "reward", "calls", "extra"]
        return {int(key[0]): part.select(keep) for key, part in frame.partition_by("world", as_dict=True, maintain_order=True).items()}
