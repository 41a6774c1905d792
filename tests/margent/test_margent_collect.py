"""MARGENT interventional collection on the simulated team: the search rule, batching, gold
isolation, determinism, error branches, and the marginal values the simulator's parameters imply."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from delegation_lab.ability.maps import wilson_interval
from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.margent import analysis
from delegation_lab.margent.collect import build_tree
from delegation_lab.margent.params import SUBAGENTS, SimulatorParams, SubAgentSim
from delegation_lab.margent.schemas import AgentView
from delegation_lab.margent.simulator import SimulatedTeam, hash_uniform, solve_structure
from delegation_lab.margent.team import GoldScorer
from delegation_lab.margent.tree import SequenceTree
from delegation_lab.solvers.params import Price

PRICE = Price(input_usd_per_mtok=0.05, output_usd_per_mtok=0.10)
PRICES = {r: PRICE for r in ("manager", *SUBAGENTS)}


@pytest.fixture(scope="module")
def items():
    return generate(ArithParams(), 400, seed=21)


def views_of(items):
    return [AgentView.from_item(i) for i in items]


def collect(items, sim=None, depth=3, mode="interventional", **kw):
    team = SimulatedTeam(sim or SimulatorParams(), PRICES)
    frame, stats = build_tree(team, views_of(items), GoldScorer(items), SequenceTree(SUBAGENTS, depth), mode=mode, **kw)
    return frame, stats, team


class SpyTeam:
    """Wraps a team; records every object handed to it and every batched call."""

    def __init__(self, inner):
        self.inner = inner
        self.seen: list = []
        self.calls: list[tuple[str, str | None, int]] = []

    @property
    def backend_calls(self):
        return self.inner.backend_calls

    def candidates(self, views):
        self.seen += views
        self.calls.append(("candidates", None, len(views)))
        return self.inner.candidates(views)

    def consult(self, agent, states, sees_candidate):
        self.seen += states
        self.calls.append(("consult", agent, len(states)))
        return self.inner.consult(agent, states, sees_candidate)

    def revise(self, pending):
        self.seen += [s for s, _ in pending] + [c for _, c in pending]
        self.calls.append(("revise", None, len(pending)))
        return self.inner.revise(pending)

    def decide(self, states, pool):
        self.seen += states
        self.calls.append(("decide", None, len(states)))
        return self.inner.decide(states, pool)


def test_sequence_tree():
    tree = SequenceTree(SUBAGENTS, 3)
    assert tree.n_nodes == 16 and len(tree.at_depth(1)) == 3 and len(tree.at_depth(2)) == 6 and len(tree.at_depth(3)) == 6
    for k, seq in enumerate(tree.sequences):
        if seq:
            assert tree.sequences[tree.parent[k]] == seq[:-1]
        for a, agent in enumerate(SUBAGENTS):
            child = tree.child[k, a]
            assert (child >= 0) == (agent not in seq and len(seq) < 3)
    assert SequenceTree(("Verifier", "Reasoner"), 2).n_nodes == 5


def test_simulated_team_solves_from_structure_never_from_gold(items):
    for item in items[:50]:
        assert solve_structure(AgentView.from_item(item)) == pytest.approx(float(item.gold))


def test_search_rule(items):
    frame, _, _ = collect(items)
    for (i,), g in frame.group_by("item_index"):
        root = g.filter(pl.col("depth") == 0).row(0, named=True)
        depths = g["depth"].to_list()
        if root["correct"]:  # correct root: one-step branches only, kept for corruption analysis
            assert sorted(depths) == [0, 1, 1, 1]
            continue
        wins = g.filter((pl.col("depth") > 0) & pl.col("correct"))["depth"]
        stop = int(wins.min()) if len(wins) else 3  # stop at the first depth with a success
        assert max(depths) == stop
        expected = {0: 1, 1: 3, 2: 6, 3: 6}
        assert {d: depths.count(d) for d in set(depths)} == {d: expected[d] for d in range(stop + 1)}  # all equally short kept


def test_every_depth_is_one_call_per_subagent_and_one_revision(items):
    team = SpyTeam(SimulatedTeam(SimulatorParams(), PRICES))
    frame, stats = build_tree(team, views_of(items), GoldScorer(items), SequenceTree(SUBAGENTS, 3))
    depths = int(frame["depth"].max())
    assert [c for c in team.calls if c[0] == "candidates"] == [("candidates", None, len(items))]
    for agent in SUBAGENTS:
        sizes = [n for kind, a, n in team.calls if kind == "consult" and a == agent]
        assert len(sizes) == depths
        assert sum(sizes) == frame.filter(pl.col("agent") == agent).height  # every branch of the depth in that call
    assert len([c for c in team.calls if c[0] == "revise"]) == depths
    assert stats.consult_calls == {a: depths for a in SUBAGENTS} and stats.branches == frame.height


def test_gold_never_reaches_the_team(items):
    sentinel = "7777777"
    secret = [i.model_copy(update={"gold": sentinel}) for i in items[:60]]
    team = SpyTeam(SimulatedTeam(SimulatorParams(), PRICES))
    frame, _ = build_tree(team, views_of(secret), GoldScorer(secret), SequenceTree(SUBAGENTS, 3), mode="full", decisions=True)
    assert len(team.seen) > 500
    for obj in team.seen:
        text = obj.model_dump_json()
        assert sentinel not in text and '"gold"' not in text
    assert not frame["correct"].any()  # only the scorer saw the (unreachable) gold
    assert sentinel not in frame.write_json()


def test_branches_do_not_depend_on_batch_or_order(items):
    a, _, _ = collect(items[:120], mode="full")
    b, _, _ = collect(items[60:120][::-1] + items[:60], mode="full")
    key = ["item_id", "node"]
    cols = ["answer", "confidence", "correct", "raises_issue", "changed", "tokens_out"]
    joined = a.select(key + cols).join(b.select(key + cols), on=key, suffix="_b")
    assert joined.height == a.height == b.height
    for c in cols:
        assert joined[c].equals(joined[f"{c}_b"], null_equal=True), c


def test_frozen_subagent_on_an_unchanged_candidate_repeats_itself(items):
    frame, _, _ = collect(items[:200], mode="full")
    rows = {(r["item_index"], tuple(r["sequence"])): r for r in frame.iter_rows(named=True)}
    checked = 0
    for (i, seq), row in rows.items():
        if len(seq) == 2 and not rows[(i, seq[:1])]["changed"]:
            assert row["answer"] == rows[(i, seq[1:])]["answer"]  # [E, V] after an idle E == [V]
            checked += 1
    assert checked > 100


def sim_with(agent: str, **update) -> SimulatorParams:
    base = SimulatorParams()
    return base.model_copy(update={agent: base.subagent(agent.capitalize()).model_copy(update=update)})


def test_net_value_sign_follows_the_parameters(items):
    harmful = sim_with("extractor", rescue_at_d1=0.02, corruption_at_d1=0.35)
    helpful = sim_with("extractor", rescue_at_d1=0.6, corruption_at_d1=0.0)
    bad = analysis.marginal_values(collect(items, harmful, depth=1)[0], SUBAGENTS, 0.95)["Extractor"]
    good = analysis.marginal_values(collect(items, helpful, depth=1)[0], SUBAGENTS, 0.95)["Extractor"]
    assert bad["net_value"] < -5 and bad["corruption_low"] > bad["rescue_high"]
    assert good["net_value"] > 10 and good["n_corruptions"] == 0


def test_measured_rates_match_flat_parameters():
    items = generate(ArithParams(), 900, seed=4)
    flat = SubAgentSim(rescue_at_d1=0.5, rescue_logit_slope=0.0, rescue_hardness=0.0, corruption_at_d1=0.1, corruption_logit_slope=0.0)
    sim = SimulatorParams().model_copy(update={"verifier": flat, "rescue_correlation": 0.0})
    mv = analysis.marginal_values(collect(items, sim, depth=1)[0], SUBAGENTS, 0.99)["Verifier"]
    assert mv["rescue_low"] <= 0.5 <= mv["rescue_high"]
    assert mv["corruption_low"] <= 0.1 <= mv["corruption_high"]


def test_blank_verifier_uses_common_random_numbers(items):
    sim = sim_with("verifier", blank_rescue_scale=0.5)
    seen, _, _ = collect(items[:200], sim, mode="full")
    blank, _, _ = collect(items[:200], sim, mode="full", sees_candidate=False)
    no_v = pl.col("sequence").list.contains("Verifier").not_()
    assert seen.filter(no_v).select("answer", "correct").equals(blank.filter(no_v).select("answer", "correct"))
    roots = seen.filter(pl.col("depth") == 0).select("item_index", pl.col("correct").alias("root"))
    one = lambda f: f.filter(pl.col("sequence") == ["Verifier"]).join(roots, on="item_index").filter(~pl.col("root")).sort("item_index")  # noqa: E731
    s, b = one(seen)["correct"].to_numpy(), one(blank)["correct"].to_numpy()
    assert not (b & ~s).any() and b.sum() < s.sum()  # blank rescues are a strict subset


def test_malformed_replies_become_error_branches(items):
    sim = SimulatorParams().model_copy(update={"malformed_rate": 0.3})
    frame, stats, _ = collect(items[:150], sim)
    errors = frame.filter(pl.col("error").is_not_null())
    assert stats.errors == errors.height > 20
    assert errors["signal"].is_null().all() and errors["error"].str.contains("breaks its schema").all()
    parents = frame.select("item_index", pl.col("node").alias("parent"), pl.col("answer").alias("parent_answer"))
    joined = errors.join(parents, on=["item_index", "parent"])
    assert (joined["answer"] == joined["parent_answer"]).all()  # the candidate stands unchanged
    assert analysis.marginal_values(frame, SUBAGENTS, 0.95)["Verifier"]["errors"] > 0


def test_prompted_decisions_are_available_actions(items):
    frame, _, _ = collect(items[:80], mode="full", decisions=True)
    assert frame["decision"].is_not_null().all()
    for seq, decision in zip(frame["sequence"].to_list(), frame["decision"].to_list(), strict=True):
        assert decision == "commit" or (decision in SUBAGENTS and decision not in seq)


def test_table1_and_deltas(items):
    frame, _, _ = collect(items)
    t1 = analysis.table1(frame, 3)
    assert t1["A0"] <= t1["A1"] <= t1["A2"] <= t1["A3"] == t1["AD"]
    assert t1["gain_at_1"] == pytest.approx(100 * (t1["A1"] - t1["A0"]) / (t1["AD"] - t1["A0"]))
    roots = frame.filter(pl.col("depth") == 0)
    assert t1["A0"] == pytest.approx(100 * roots["correct"].mean())
    mv = analysis.marginal_values(frame, SUBAGENTS, 0.95)
    for agent in SUBAGENTS:
        one = frame.filter(pl.col("sequence") == [agent]).join(roots.select("item_index", pl.col("correct").alias("r")), on="item_index")
        delta = one["correct"].cast(int) - one["r"].cast(int)
        assert set(delta.unique().to_list()) <= {-1, 0, 1}
        assert mv[agent]["net_value"] == pytest.approx(100 * delta.mean())
        lo, hi = wilson_interval(mv[agent]["n_rescues"], mv[agent]["n_wrong_roots"], 0.95)
        assert (mv[agent]["rescue_low"], mv[agent]["rescue_high"]) == (lo, hi)


def test_hash_uniform_is_uniform_and_keyed():
    u = hash_uniform(0, np.arange(200_000, dtype=np.uint64), 3)
    assert 0 < u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.005 and abs(u.std() - math.sqrt(1 / 12)) < 0.005
    assert not np.array_equal(u, hash_uniform(1, np.arange(200_000, dtype=np.uint64), 3))
    assert np.array_equal(u[:10], hash_uniform(0, np.arange(10, dtype=np.uint64), 3))
