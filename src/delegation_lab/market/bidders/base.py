"""What every bidder shares: the bid is xi x v (seed 004 §4), the valuation head is trained by
Gaussian NLL toward the realised P_in + reward - cost, and a bidder only adds how it picks and
learns the shade xi."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from delegation_lab.market.networks import Heads


@dataclass
class Shade:
    xi: torch.Tensor  # [..., A] shade in (0, 1]
    z: torch.Tensor  # the sampled logit (PPO, Thompson) or logit(xi)
    logp: torch.Tensor  # log-density of z under the policy (PPO), else 0


@dataclass
class ShadeSamples:
    """One round of auctions seen by every candidate bidder, laid out like the network outputs [W, N, M]."""

    agent: torch.Tensor  # agent index of each candidate slot
    bid: torch.Tensor  # bool: the agent bid in this auction
    won: torch.Tensor  # bool
    xi: torch.Tensor  # shade it used
    z: torch.Tensor
    logp: torch.Tensor
    valuation: torch.Tensor  # the valuation it shaded (with exploration noise), units of the reward, > 0 where bid
    rival: torch.Tensor  # highest competing bid, units of the reward (0 when it bid alone)
    utility: torch.Tensor  # r + P_in - P_out when it won, 0 when it lost, units of the reward


def logit(p: torch.Tensor | float) -> torch.Tensor:
    p = torch.as_tensor(p)
    return torch.log(p) - torch.log1p(-p)


class Bidder:
    """Base: subclasses set `name` and implement `shade` and `shade_loss`."""

    name = "base"
    truthful = False
    epochs = 1  # optimisation passes over each round's samples

    def __init__(self, shade_init: float, shade_min: float, shade_max: float, n_worlds: int, n_agents: int, device: str | torch.device):
        self.shade_min, self.shade_max = shade_min, shade_max
        self.logit_init = float(logit(shade_init))
        self.n_worlds, self.n_agents, self.device = n_worlds, n_agents, device

    def clamp(self, xi: torch.Tensor) -> torch.Tensor:
        return xi.clamp(self.shade_min, self.shade_max)

    def shade(self, heads: Heads, gen: torch.Generator) -> Shade:  # pragma: no cover - interface
        raise NotImplementedError

    def shade_loss(self, heads: Heads, samples: ShadeSamples) -> torch.Tensor:
        """Per-(state, candidate) loss [W, N, M]; the caller averages it over the samples where the agent bid."""
        raise NotImplementedError  # pragma: no cover - interface

    def end_round(self, samples: ShadeSamples) -> None:
        """Per-round bookkeeping after the update (PPO's utility baseline)."""
