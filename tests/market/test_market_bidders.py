"""Bidders (seed 004 §4) and the batched bidder networks."""

from __future__ import annotations

import math

import pytest
import torch

from delegation_lab.market.bidders import ShadeSamples, make_bidder
from delegation_lab.market.bidders.base import logit
from delegation_lab.market.networks import AgentNets, Heads, read_heads
from delegation_lab.market.params import MarketParams

PARAMS = MarketParams()


def heads(s1: float = 0.0, s2: float = 0.0, shape=(1, 1, 1)) -> Heads:
    return Heads(torch.full(shape, 0.8), torch.full(shape, 0.1), torch.full(shape, s1, requires_grad=True), torch.full(shape, s2, requires_grad=True))


def samples(shape=(1, 1, 1), **kw) -> ShadeSamples:
    base = dict(
        agent=torch.zeros(shape, dtype=torch.long), bid=torch.ones(shape, dtype=torch.bool), won=torch.zeros(shape, dtype=torch.bool),
        xi=torch.full(shape, 0.5), z=torch.zeros(shape), logp=torch.zeros(shape), valuation=torch.full(shape, 0.8),
        rival=torch.full(shape, 0.4), utility=torch.zeros(shape),
    )
    base.update(kw)
    return ShadeSamples(**base)


def bidder(name: str, **kw):
    return make_bidder(name, PARAMS.model_copy(update=kw), n_worlds=1, n_agents=1, device="cpu")


def test_truthful_bids_its_valuation():
    shade = bidder("truthful").shade(heads(3.0, -2.0), torch.Generator())
    assert float(shade.xi) == 1.0


@pytest.mark.parametrize(("won", "factor"), [(True, math.exp(-0.05)), (False, math.exp(0.05))])
def test_mirror_descent_target_moves_multiplicatively(won, factor):
    md = bidder("mirror_descent")
    xi = torch.tensor([0.3])
    assert float(md.target(xi, torch.tensor([won]))) == pytest.approx(0.3 * factor)
    assert float(md.target(torch.tensor([0.999]), torch.tensor([False]))) == pytest.approx(PARAMS.learning.shade_max)


def test_mirror_descent_gradient_lowers_the_shade_after_a_win_and_raises_it_after_a_loss():
    md = bidder("mirror_descent")
    for won, sign in ((True, 1.0), (False, -1.0)):
        h = heads()
        xi = md.shade(h, torch.Generator()).xi.detach()
        md.shade_loss(h, samples(won=torch.tensor([[[won]]]), xi=xi)).sum().backward()
        assert float(h.s1.grad) * sign > 0  # gradient descent moves s1 (the shade logit) down after a win


def test_thompson_samples_the_belief_over_the_critical_shade():
    ts = bidder("thompson")
    h = heads(0.7, 0.0, shape=(1, 20000, 1))
    mu, sigma = ts.belief(h)
    z = ts.shade(h, torch.Generator().manual_seed(0)).z
    z = z.detach()
    assert float(z.mean()) == pytest.approx(float(mu.detach().mean()), abs=0.03)
    assert float(z.std()) == pytest.approx(float(sigma.detach().mean()), rel=0.05)


def test_thompson_belief_is_fit_to_the_observed_critical_shade():
    ts = bidder("thompson")
    target = logit(torch.tensor(0.2 / 0.8))  # rival / valuation
    h = heads(0.0, 0.0)
    loss = ts.shade_loss(h, samples(rival=torch.full((1, 1, 1), 0.2)))
    loss.sum().backward()
    mu, _ = ts.belief(h)
    assert abs(float(target)) > 0.5 and (float(mu.detach()) - float(target)) * float(h.s1.grad) > 0  # descent moves mu toward the target


def test_bayes_optimal_maximises_expected_margin():
    bo = bidder("bayes_optimal")
    h = heads(0.4, -0.3, shape=(1, 3, 1))
    h = Heads(h.value, h.value_std, h.s1.detach(), h.s2.detach())
    xi = bo.shade(h, torch.Generator()).xi
    mu, sigma = bo.belief(h)
    grid = torch.linspace(0.001, 0.999, 20001)
    brute = (1 - grid) * torch.special.ndtr((logit(grid) - mu.flatten()[0]) / sigma.flatten()[0])
    assert float(xi.flatten()[0]) == pytest.approx(float(grid[brute.argmax()]), abs=2e-3)
    assert float(brute.max()) - float(((1 - xi) * torch.special.ndtr((logit(xi) - mu) / sigma)).flatten()[0]) < 1e-6


@pytest.mark.parametrize("mu", [-8.0, -2.0, 0.0, 3.0, 9.0])
@pytest.mark.parametrize("sigma", [0.05, 0.5, 3.0])
def test_bayes_optimal_bisection_finds_the_maximum_for_extreme_beliefs(mu, sigma):
    bo = bidder("bayes_optimal")
    z = bo.argmax(torch.tensor(mu), torch.tensor(sigma))
    grid = torch.linspace(bo.z_lo, bo.z_hi, 200001)
    best = bo.expected_margin(grid, torch.tensor(mu), torch.tensor(sigma)).max()
    assert float(best - bo.expected_margin(z, torch.tensor(mu), torch.tensor(sigma))) < 1e-6


def test_ppo_advantage_follows_the_utility_baseline():
    ppo = bidder("ppo")
    h = heads()
    shade = ppo.shade(h, torch.Generator().manual_seed(1))
    mu, _ = ppo.policy(h)
    z = shade.z.detach()
    # a winning sample above the baseline: the policy mean moves toward the sampled logit
    loss = ppo.shade_loss(h, samples(won=torch.tensor([[[True]]]), z=z, logp=shade.logp.detach(), utility=torch.tensor([[[0.3]]])))
    loss.sum().backward()
    assert (float(z) - float(mu.detach())) * float(h.s1.grad) < 0
    # the paper's failure mode: with a positive baseline, a loss (U = 0) has advantage -U_ema < 0
    ppo.end_round(samples(won=torch.tensor([[[True]]]), utility=torch.tensor([[[0.5]]])))
    assert float(ppo.baseline[0, 0]) == pytest.approx(PARAMS.ppo.baseline_rate * 0.5)
    h2 = heads()
    loss = ppo.shade_loss(h2, samples(z=z, logp=shade.logp.detach(), utility=torch.tensor([[[0.0]]])))
    loss.sum().backward()
    assert (float(z) - float(mu.detach())) * float(h2.s1.grad) > 0  # pushed away from the losing shade


# ---------------------------------------------------------------------------------------------
# networks


@pytest.mark.parametrize("trunk", ["frozen", "shared", "private"])
def test_one_batched_pass_equals_every_agent_alone(trunk):
    W, N, A, F = 3, 5, 4, 7
    identity = torch.randn(W, A, 2)
    nets = AgentNets(W, A, F, identity, hidden=6, trunk=trunk, seeds=[1, 2, 3])
    with torch.no_grad():
        for p in nets.parameters():
            p.normal_()
    x = torch.randn(W, N, F)
    full = nets(x)  # [W, N, A, 4]
    for a in range(A):
        assert torch.allclose(full[:, :, a], nets.forward_agent(x, a), atol=1e-5)
    agents = torch.randint(A, (W, N, 3))
    cand = nets.forward_candidates(x, agents)
    assert torch.allclose(cand, torch.gather(full, 2, agents[..., None].expand(-1, -1, -1, 4)), atol=1e-5)


def test_init_depends_on_each_worlds_own_seed():
    identity = torch.zeros(2, 3, 1)
    a = AgentNets(2, 3, 4, identity, 5, "frozen", seeds=[7, 8])
    b = AgentNets(2, 3, 4, identity, 5, "frozen", seeds=[9, 7])
    assert torch.equal(a.w_state[0], b.w_state[1]) and not torch.equal(a.w_state[0], a.w_state[1])
    out = read_heads(a(torch.randn(2, 6, 4)), value_init=0.5)
    assert torch.allclose(out.value, torch.full_like(out.value, 0.5))  # zero heads: every agent starts at value_init


def test_frozen_trunk_agents_without_samples_keep_their_valuations():
    """The reason `frozen` is the default: an agent that stops winning gets no value target, and with
    a trained shared layer its valuation would still drift as its competitors train that layer."""
    W, N, A, F = 1, 16, 3, 5
    x = torch.randn(W, N, F)
    for trunk, drifts in (("frozen", False), ("shared", True)):
        nets = AgentNets(W, A, F, torch.eye(A)[None], hidden=8, trunk=trunk, seeds=[0])
        with torch.no_grad():
            nets.w_out.normal_()
        opt = torch.optim.Adam([p for p in nets.parameters() if p.requires_grad], lr=0.05)
        before = nets(x)[..., 2, 0].detach().clone()  # agent 2 never trains
        for _ in range(20):
            out = nets(x)
            loss = ((out[..., :2, 0] - 1.0) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        moved = float((nets(x)[..., 2, 0].detach() - before).abs().max())
        assert (moved > 1e-3) == drifts, (trunk, moved)
