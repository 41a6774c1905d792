"""Coalition replayers: per-agent Shapley credit for stored trajectories (`dlab credit`).

A study can be credited when it can replay any coalition of a stored trajectory's agents with
the environment and the other agents preserved. Two studies can:

- `coordinator` (History Matters §3.1-3.2): each trajectory row is one attempt on an item; the
  agents are the solver columns (A, B, C). With coalition S, the attempt's joint action is kept
  (the coordinator's choice is the environment here), and only the answering executors in S
  answer: success(S) = some answering executor in S is right on the item (its cached label);
  solve cost(S) = their cached costs; fees as the coordinator charges them (`coordinator.envs`):
  alpha x the expected solve cost of each delegation edge into a member of S (the recipient's edge
  is its own cost), or on a management route n_e x alpha x the answerer's solve cost; the fail
  penalty when the attempt is the item's last (attempt = max_attempts, or the lane's
  `attempt_limit` where a fixed policy's route is shorter) and S fails. So
  v(N) is the stored reward exactly (checked), and v(empty) is a failed attempt with no cost.
- `credit` (this study): each team rollout (planner + workers) is replayed by `env.TeamGame` from
  the outcomes stored in its rows' `extra` (the planner masked = its decomposition masked).

Any other study: an InputError naming the studies that can be replayed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.credit.env import OUTCOME_NAMES, TeamGame, TeamRollouts
from delegation_lab.credit.shapley import EXACT_MAX_AGENTS, Estimator, shapley
from delegation_lab.errors import InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import CREDIT_SCHEMA
from delegation_lab.pipeline.store import connect
from delegation_lab.pipeline.tables import write_parquet_atomic

REPLAYABLE = ("coordinator", "credit")


@dataclass
class Replay:
    """One partition's trajectories as a coalition game, with the names of its agents."""

    game: object  # a shapley.CoalitionGame
    keys: pl.DataFrame  # per trajectory: split, episode, step, rollout, item_id
    agents: np.ndarray  # str [T, slots]: agent name per slot ('' where absent)
    roles: np.ndarray  # str [T, slots]


@dataclass
class CreditRun:
    frame: pl.DataFrame
    trajectories: int
    coalitions: int
    seconds: float
    skipped: list[str]

    @property
    def coalitions_per_second(self) -> float:
        return self.coalitions / self.seconds if self.seconds > 0 else float("nan")


# ------------------------------------------------------------------------------ reading rows


def _partitions(layout: Layout, study: str, methods: list[str] | None, seeds: list[int] | None,
                split: str) -> list[tuple[str, int]]:
    con = connect(layout)
    try:
        found = con.sql("SELECT DISTINCT method, seed FROM trajectories WHERE study = $s ORDER BY method, seed",
                        params={"s": study}).fetchall()
    finally:
        con.close()
    if not found:
        raise InputError(f"{Layout().trajectories(study)}: no trajectories of study {study!r} under "
                         f"{layout.root.resolve()}; run `dvc repro {study}` first")
    known = sorted({m for m, _ in found})
    if methods:
        unknown = [m for m in methods if m not in known]
        if unknown:
            raise InputError(f"--method {unknown}: not among the {study} trajectories' methods {known}")
    if seeds:
        have = sorted({s for _, s in found})
        unknown = [s for s in seeds if s not in have]
        if unknown:
            raise InputError(f"--seed {unknown}: not among the {study} trajectories' seeds {have}")
    if split not in ("train", "test", "all"):
        raise InputError(f"--split must be train, test or all (got {split!r})")
    return [(m, s) for m, s in found if (not methods or m in methods) and (not seeds or s in seeds)]


def _rows(layout: Layout, study: str, method: str, seed: int, split: str) -> pl.DataFrame:
    con = connect(layout)
    try:
        where = "study = $s AND method = $m AND seed = $k" + ("" if split == "all" else " AND split = $split")
        params = {"s": study, "m": method, "k": seed} | ({} if split == "all" else {"split": split})
        return con.sql(f"SELECT split, episode, step, item_id, action, executors, correct, reward, extra "
                       f"FROM trajectories WHERE {where} ORDER BY split, episode, step", params=params).pl()
    finally:
        con.close()


# --------------------------------------------------------------------------------- coordinator


class CoordinatorGame:
    """Attempts [T] x solver columns: v(S) = success(S) - lambda (solve(S) + fee(S)) - R_fail drop(S)."""

    def __init__(self, answers, correct, cost, expected, edges, handoffs, lam, last, alpha, fail_penalty):
        self.answers, self.correct, self.cost, self.expected = answers, correct, cost, expected
        self.edges, self.handoffs, self.lam, self.last = edges, handoffs, lam, last
        self.alpha, self.fail_penalty = float(alpha), float(fail_penalty)

    @property
    def present(self) -> np.ndarray:
        return np.ones(self.answers.shape, dtype=bool)

    def values(self, rows: np.ndarray, masks: np.ndarray) -> np.ndarray:
        m = np.broadcast_to(masks, (len(rows), *masks.shape[1:])).astype(np.float64)  # [R, M, n]
        ans = self.answers[rows].astype(np.float64)
        hit = (self.answers[rows] & self.correct[rows]).astype(np.float64)
        success = np.einsum("rms,rs->rm", m, hit) > 0
        solve = np.einsum("rms,rs->rm", m, ans * self.cost[rows])
        fee = self.alpha * (self.handoffs[rows][:, None] * solve
                            + np.einsum("rms,rs->rm", m, self.edges[rows] * self.expected[rows]))
        drop = ~success & self.last[rows][:, None]
        return success - self.lam[rows][:, None] * (solve + fee) - self.fail_penalty * drop


class CoordinatorReplayer:
    study = "coordinator"

    def __init__(self, layout: Layout, params_path: Path):
        from delegation_lab.params.root import load_params
        from delegation_lab.coordinator.actions import delegation_actions, management_actions
        from delegation_lab.coordinator.data import load_coordinator_data
        from delegation_lab.coordinator.study import env_layout

        params = load_params(params_path)
        cp = params.coordinator
        self.layout_env = env_layout(cp, list(params.solvers))
        cols = self.layout_env.columns
        data = load_coordinator_data(layout, list(cols), False, params.ability_map.bucket_edges)
        self.columns = cols
        self.alpha, self.fail_penalty, self.max_attempts = cp.handoff_fee, cp.fail_penalty, cp.max_attempts
        self.tables = {"management": management_actions(self.layout_env.routes, cols), "delegation": delegation_actions(cols)}
        self.action_index = {}
        for kind, table in self.tables.items():
            for a, name in enumerate(table.names):
                self.action_index[name] = (kind, a)
        ids = np.concatenate([data.train.item_ids, data.test.item_ids]).astype(str)
        self.item_index = {item: i for i, item in enumerate(ids)}
        self.correct = np.concatenate([data.train.correct, data.test.correct])
        self.cost = np.concatenate([data.train.cost, data.test.cost])
        self.expected = np.concatenate([data.train.expected_cost, data.test.expected_cost])

    def replay(self, rows: pl.DataFrame, method: str) -> Replay:
        n = len(self.columns)
        unknown = sorted(set(rows["action"].unique().to_list()) - set(self.action_index))
        if unknown:
            raise InputError(f"coordinator trajectories of {method}: action(s) {unknown[:3]} are not joint actions or "
                             f"routes of the agents {list(self.columns)} in params.yaml coordinator.agents / routes; "
                             "were the trajectories written with other agents or routes?")
        missing = sorted(set(rows["item_id"].unique().to_list()) - set(self.item_index))
        if missing:
            raise InputError(f"coordinator trajectories of {method}: item(s) {missing[:3]} have no labeled answers "
                             "in data/ (train or test split); run the data stages of the project that wrote them")
        extra = rows["extra"].str.json_decode(pl.Struct({"attempt": pl.Int64, "cost_weight": pl.Float64,
                                                          "attempt_limit": pl.Int64}))
        attempt = extra.struct.field("attempt").to_numpy()
        limit = extra.struct.field("attempt_limit").fill_null(self.max_attempts).to_numpy()
        lam = extra.struct.field("cost_weight").to_numpy().astype(np.float64)
        kinds, acts = zip(*(self.action_index[a] for a in rows["action"].to_list()), strict=True)
        kinds, acts = np.array(kinds), np.array(acts)
        T = rows.height
        answers = np.zeros((T, n), dtype=bool)
        edges = np.zeros((T, n))
        handoffs = np.zeros(T)
        for kind, table in self.tables.items():
            sel = kinds == kind
            answers[sel] = table.answers[acts[sel]]
            edges[sel] = table.edges[acts[sel]]
            handoffs[sel] = table.handoffs[acts[sel]]
        idx = np.array([self.item_index[i] for i in rows["item_id"].to_list()])
        game = CoordinatorGame(answers, self.correct[idx], self.cost[idx], self.expected[idx], edges, handoffs, lam,
                               attempt >= limit, self.alpha, self.fail_penalty)
        full = game.values(np.arange(T), np.ones((1, 1, n), dtype=bool))[:, 0]
        stored = rows["reward"].to_numpy()
        bad = np.flatnonzero(~np.isclose(full, stored, rtol=1e-9, atol=1e-9))
        if bad.size:
            r = rows.row(int(bad[0]), named=True)
            raise InputError(
                f"coordinator trajectories of {method}: {bad.size} of {T} attempts do not replay to their stored reward "
                f"(e.g. episode {r['episode']} step {r['step']} item {r['item_id']}: stored {stored[bad[0]]:.6g}, replayed "
                f"{full[bad[0]]:.6g}); params.yaml coordinator.handoff_fee / fail_penalty / max_attempts, the ability "
                "map or the cached answers changed since the trajectories were written: rerun `dvc repro coordinator`")
        keys = rows.select("split", "episode", "step", pl.lit(0, dtype=pl.Int64).alias("rollout"), "item_id")
        agents = np.tile(np.array(self.columns, dtype=object), (T, 1))
        return Replay(game, keys, agents, np.full((T, n), "solver", dtype=object))


# ------------------------------------------------------------------------------ credit (team)


class TeamReplayer:
    """The credit study's team rollouts: everything a replay needs is in the rows' `extra` (no params)."""

    study = "credit"

    def __init__(self, layout: Layout, params_path: Path):
        del layout, params_path

    def replay(self, rows: pl.DataFrame, method: str) -> Replay | None:
        roles = rows["extra"].str.json_path_match("$.role")
        if (roles == "single").all():
            return None
        if (roles == "single").any():
            raise InputError(f"credit trajectories of {method} mix single-agent and team rows")
        planner = rows.filter(roles == "planner")
        workers = rows.filter(roles == "worker")
        p_extra = planner["extra"].str.json_decode(pl.Struct({
            "rollout": pl.Int64, "task": pl.Int64, "hops": pl.Int64, "plan": pl.List(pl.Int64),
            "recall": pl.List(pl.Boolean), "tokens": pl.Float64, "max_hops": pl.Int64, "workers_per_hop": pl.Int64,
            "token_cost": pl.Float64}))
        planner = planner.with_columns(p_extra.alias("x")).unnest("x").with_row_index("t")
        T = planner.height
        H = int(planner["max_hops"].max())
        K = int(planner["workers_per_hop"].max())
        token_costs = planner["token_cost"].unique().to_list()
        if len(token_costs) != 1:
            raise InputError(f"credit trajectories of {method}: rows name several token costs {token_costs}")
        key = ["split", "episode", "rollout"]
        w_extra = workers["extra"].str.json_decode(pl.Struct({
            "rollout": pl.Int64, "hop": pl.Int64, "rank": pl.Int64, "outcome": pl.String, "outcome_raw": pl.String,
            "tokens": pl.Float64}))
        workers = workers.with_columns(w_extra.alias("x")).unnest("x").join(
            planner.select(*key, "t"), on=key, how="left")
        if workers["t"].null_count():
            raise InputError(f"credit trajectories of {method}: worker rows without their planner row")
        hops = planner["hops"].to_numpy()
        hop_present = np.arange(H)[None, :] < hops[:, None]
        recall = np.zeros((T, H), dtype=bool)
        n_workers = np.zeros((T, H), dtype=np.int64)
        for t, (rec, plan) in enumerate(zip(planner["recall"].to_list(), planner["plan"].to_list(), strict=True)):
            recall[t, : len(rec)] = rec
            n_workers[t, : len(plan)] = plan
        code = {name: i for i, name in enumerate(OUTCOME_NAMES)}
        t_idx, h, r = workers["t"].to_numpy(), workers["hop"].to_numpy(), workers["rank"].to_numpy()
        present = np.zeros((T, H, K), dtype=bool)
        out_f = np.zeros((T, H, K), dtype=np.int8)
        out_r = np.zeros((T, H, K), dtype=np.int8)
        w_tok = np.zeros((T, H, K))
        present[t_idx, h, r] = True
        out_f[t_idx, h, r] = [code[o] for o in workers["outcome"].to_list()]
        out_r[t_idx, h, r] = [code[o] for o in workers["outcome_raw"].to_list()]
        w_tok[t_idx, h, r] = workers["tokens"].to_numpy()
        roll = TeamRollouts(planner["task"].to_numpy(), hop_present, n_workers, present, np.zeros((T, H, K), dtype=np.int64),
                            recall, out_f, out_r, present.copy(), w_tok, planner["tokens"].to_numpy())
        game = TeamGame(roll, float(token_costs[0]))
        correct, _ = game.full()
        stored = planner["correct"].to_numpy()
        if not np.array_equal(correct, stored):
            bad = int(np.flatnonzero(correct != stored)[0])
            raise InputError(f"credit trajectories of {method}: rollout {planner.row(bad, named=True)['episode']} does "
                             "not replay to its stored outcome; the rows' extra was edited or is incomplete")
        names = np.full((T, 1 + H * K), "", dtype=object)
        roles_out = np.full((T, 1 + H * K), "", dtype=object)
        names[:, 0] = [e[0] for e in planner["executors"].to_list()]
        roles_out[:, 0] = "planner"
        slots = 1 + h * K + r
        names[t_idx, slots] = [e[0] for e in workers["executors"].to_list()]
        roles_out[t_idx, slots] = "worker"
        keys = planner.select("split", "episode", "step", "rollout", "item_id")
        return Replay(game, keys, names, roles_out)


REPLAYERS = {"coordinator": CoordinatorReplayer, "credit": TeamReplayer}


def replayer_for(study: str, layout: Layout, params_path: Path):
    if study not in REPLAYERS:
        raise InputError(f"study {study!r} cannot replay a coalition of its agents, so its trajectories get no "
                         f"Shapley credit; studies with a coalition replayer: {', '.join(REPLAYABLE)}")
    return REPLAYERS[study](layout, params_path)


# ------------------------------------------------------------------------------------ credit


def iter_credit(layout: Layout, study: str, params_path: Path = Path("params.yaml"), methods: list[str] | None = None,
                seeds: list[int] | None = None, split: str = "test", estimator: Estimator = "auto",
                samples: int | None = None, confidence: float = 0.95, exact_max: int = EXACT_MAX_AGENTS,
                mc_seed: int = 0) -> Iterator[tuple[str, int, pl.DataFrame | None, int, float]]:
    """Per (method, seed) partition: (method, seed, credit rows or None when skipped, coalitions, seconds)."""
    if exact_max < 1 or exact_max > 20:
        raise InputError(f"the exact limit must lie in 1..20 agents (got {exact_max})")
    replayer = replayer_for(study, layout, params_path)
    for method, seed in _partitions(layout, study, methods, seeds, split):
        rows = _rows(layout, study, method, seed, split)
        if rows.is_empty():
            continue
        rep = replayer.replay(rows, method)
        if rep is None:
            if methods and method in methods:
                raise InputError(f"{study} trajectories of {method} have a single agent: its credit is the whole "
                                 "reward, there is nothing to split")
            yield method, seed, None, 0, 0.0
            continue
        res = shapley(rep.game, estimator, samples, confidence, exact_max, seed=mc_seed)
        present = np.asarray(rep.game.present)
        t, s = np.nonzero(present)
        keys = rep.keys[t]
        frame = keys.with_columns(
            pl.lit(study).alias("study"), pl.lit(method).alias("method"), pl.lit(seed, dtype=pl.Int64).alias("seed"),
            pl.Series("agent", rep.agents[t, s].astype(str)), pl.Series("role", rep.roles[t, s].astype(str)),
            pl.Series("credit", res.credit[t, s]), pl.Series("ci_low", res.ci_low[t, s]),
            pl.Series("ci_high", res.ci_high[t, s]), pl.Series("v_full", res.v_full[t]),
            pl.Series("v_empty", res.v_empty[t]), pl.Series("n_agents", present.sum(axis=1)[t].astype(np.int64)),
            pl.Series("estimator", res.estimator[t]),
        ).select(list(CREDIT_SCHEMA))
        yield method, seed, frame, res.coalitions, res.seconds


def compute_credit(layout: Layout, study: str, out: Path | None = None, **kwargs) -> CreditRun:
    """Credit every selected partition and write one table (results/credit/<study>.parquet by default)."""
    frames, skipped = [], []
    coalitions, seconds = 0, 0.0
    for method, seed, frame, n, s in iter_credit(layout, study, **kwargs):
        if frame is None:
            skipped.append(f"{method}/seed={seed}")
            continue
        frames.append(frame)
        coalitions += n
        seconds += s
    frame = pl.concat(frames) if frames else pl.DataFrame(schema=CREDIT_SCHEMA)
    if frame.is_empty():
        raise InputError(f"no {study} trajectories to credit with these filters (split {kwargs.get('split', 'test')!r}"
                         + (f"; skipped single-agent runs {skipped}" if skipped else "") + ")")
    write_parquet_atomic(frame, out or layout.credit(study))
    trajectories = frame.select("method", "seed", "split", "episode", "rollout", "step").unique().height
    return CreditRun(frame, trajectories, coalitions, max(seconds, 1e-12), skipped)


def summary_table(frame: pl.DataFrame) -> pl.DataFrame:
    """Mean credit per method x agent (over trajectories and seeds), with how often it was positive / negative."""
    return (frame.group_by("method", "role", "agent")
            .agg(pl.col("credit").mean().alias("mean_credit"), (pl.col("credit") > 1e-12).mean().alias("positive_share"),
                 (pl.col("credit") < -1e-12).mean().alias("negative_share"), pl.len().alias("n"))
            .sort("method", "role", "agent"))


def describe(run: CreditRun) -> str:
    est = ", ".join(f"{k}: {v}" for k, v in run.frame["estimator"].value_counts().iter_rows())
    return (f"{run.trajectories:,} trajectories, {run.frame.height:,} agent rows ({est}); {run.coalitions:,} coalition "
            f"values in {run.seconds:.2f} s ({run.coalitions_per_second:,.0f} coalitions/s)"
            + (f"; skipped single-agent runs: {', '.join(run.skipped)}" if run.skipped else ""))

