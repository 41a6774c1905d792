"""Bidding algorithms of seed 004 §4, one module each, and the factory the market uses."""

from __future__ import annotations

import torch

from delegation_lab.market.bidders.base import Bidder, Shade, ShadeSamples
from delegation_lab.market.bidders.bayes_optimal import BayesOptimal
from delegation_lab.market.bidders.mirror_descent import MirrorDescent
from delegation_lab.market.bidders.ppo import PPO
from delegation_lab.market.bidders.thompson import Thompson
from delegation_lab.market.bidders.truthful import Truthful
from delegation_lab.market.params import MarketParams

__all__ = ["Bidder", "Shade", "ShadeSamples", "make_bidder"]


def make_bidder(name: str, params: MarketParams, n_worlds: int, n_agents: int, device: str | torch.device) -> Bidder:
    lp = params.learning
    common = dict(shade_init=lp.shade_init, shade_min=lp.shade_min, shade_max=lp.shade_max, n_worlds=n_worlds, n_agents=n_agents, device=device)
    if name == "mirror_descent":
        return MirrorDescent(eta=params.mirror_descent.eta, **common)
    if name == "thompson":
        return Thompson(sigma_floor=params.thompson.sigma_floor, **common)
    if name == "bayes_optimal":
        return BayesOptimal(iterations=params.bayes_optimal.iterations, sigma_floor=params.bayes_optimal.sigma_floor, **common)
    if name == "ppo":
        p = params.ppo
        return PPO(clip=p.clip, entropy=p.entropy, epochs=p.epochs, baseline_rate=p.baseline_rate, init_log_std=p.init_log_std, **common)
    if name == "truthful":
        return Truthful(**common)
    raise ValueError(f"unknown bidder {name!r}; choose one of mirror_descent, thompson, bayes_optimal, ppo, truthful")
