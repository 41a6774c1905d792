"""The belief Thompson sampling and the Bayes-optimal baseline share (seed 004 §4): a Gaussian
N(mu_l, sigma_l^2) over the logit of the critical shade, the shade at which the agent's bid would
just match the highest competing bid (xi* = rival / valuation, clipped to the shade bounds), so
P(win | xi) = Phi((logit xi - mu_l) / sigma_l).

Reading this as a belief over the critical shade is our interpretation (the paper gives only the
two formulas), and what the belief is fitted to has two readings, chosen per market (`reading`):
- `rival_bid`: Gaussian NLL on the critical shade each auction revealed (the market publishes the
  bids once an auction clears);
- `win_loss`: the probit likelihood of the agent's own outcome at the shade it bid,
  -log Phi(u) after a win and -log Phi(-u) after a loss, u = (logit xi - mu_l) / sigma_l: the agent
  never sees a rival's bid, only whether it won (as Mirror Descent learns).
Both train on every auction the agent bid in."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from delegation_lab.market.bidders.base import Bidder, ShadeSamples, logit
from delegation_lab.market.networks import Heads, inverse_softplus

SIGMA_INIT = 1.0


class CriticalShadeBelief(Bidder):
    def __init__(self, sigma_floor: float, win_loss: torch.Tensor, **kw):
        """win_loss: [W] bool, the markets whose belief is fitted to win / loss only."""
        super().__init__(**kw)
        self.sigma_floor = sigma_floor
        self.win_loss = win_loss.to(self.device).bool().reshape(-1, 1, 1)

    def belief(self, heads: Heads) -> tuple[torch.Tensor, torch.Tensor]:
        mu = self.logit_init + heads.s1
        sigma = F.softplus(heads.s2 + inverse_softplus(SIGMA_INIT)) + self.sigma_floor
        return mu, sigma

    def critical_logit(self, samples: ShadeSamples) -> torch.Tensor:
        ratio = samples.rival / samples.valuation.clamp_min(1e-9)
        return logit(self.clamp(ratio))

    def rival_bid_loss(self, mu: torch.Tensor, sigma: torch.Tensor, samples: ShadeSamples) -> torch.Tensor:
        z = self.critical_logit(samples)
        return 0.5 * ((z - mu) / sigma) ** 2 + torch.log(sigma)

    def win_loss_loss(self, mu: torch.Tensor, sigma: torch.Tensor, samples: ShadeSamples) -> torch.Tensor:
        u = (logit(self.clamp(samples.xi)) - mu) / sigma
        return -torch.special.log_ndtr(torch.where(samples.won, u, -u))

    def shade_loss(self, heads: Heads, samples: ShadeSamples) -> torch.Tensor:
        mu, sigma = self.belief(heads)
        if not bool(self.win_loss.any()):
            return self.rival_bid_loss(mu, sigma, samples)
        if bool(self.win_loss.all()):
            return self.win_loss_loss(mu, sigma, samples)
        return torch.where(self.win_loss, self.win_loss_loss(mu, sigma, samples), self.rival_bid_loss(mu, sigma, samples))
