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


def make_bidder(
    name: str, params: MarketParams, n_worlds: int, n_agents: int, device: str | torch.device, win_loss: torch.Tensor | None = None
) -> Bidder:
    """`win_loss` [n_worlds] bool picks each market's belief reading (Thompson, Bayes-optimal);
    None = the reading in the bidder's params for every market."""
    lp = params.learning

    def readings(reading: str) -> torch.Tensor:
        return win_loss if win_loss is not None else torch.full((n_worlds,), reading == "win_loss", dtype=torch.bool)

    common = dict(shade_init=lp.shade_init, shade_min=lp.shade_min, shade_max=lp.shade_max, n_worlds=n_worlds, n_agents=n_agents, device=device)
    if name == "mirror_descent":
        return MirrorDescent(eta=params.mirror_descent.eta, **common)
    if name == "thompson":
        return Thompson(sigma_floor=params.thompson.sigma_floor, win_loss=readings(params.thompson.reading), **common)
    if name == "bayes_optimal":
        bo = params.bayes_optimal
        return BayesOptimal(iterations=bo.iterations, sigma_floor=bo.sigma_floor, win_loss=readings(bo.reading), **common)
    if name == "ppo":
        p = params.ppo
        return PPO(clip=p.clip, entropy=p.entropy, epochs=p.epochs, baseline_rate=p.baseline_rate, init_log_std=p.init_log_std, **common)
    if name == "truthful":
        return Truthful(**common)
    raise ValueError(f"unknown bidder {name!r}; choose one of mirror_descent, thompson, bayes_optimal, ppo, truthful")
