"""The belief Thompson sampling and the Bayes-optimal baseline share (seed 004 §4): a Gaussian
N(mu_l, sigma_l^2) over the logit of the critical shade, the shade at which the agent's bid would
just match the highest competing bid (xi* = rival / valuation, clipped to the shade bounds).
P(win | xi) = Phi((logit xi - mu_l) / sigma_l). Its head is trained by Gaussian NLL on every
auction the agent bid in (the market publishes the bids once an auction clears)."""

from __future__ import annotations

import torch
from torch.nn import functional as F

from delegation_lab.market.bidders.base import Bidder, ShadeSamples, logit
from delegation_lab.market.networks import Heads, inverse_softplus

SIGMA_INIT = 1.0


class CriticalShadeBelief(Bidder):
    def __init__(self, sigma_floor: float, **kw):
        super().__init__(**kw)
        self.sigma_floor = sigma_floor

    def belief(self, heads: Heads) -> tuple[torch.Tensor, torch.Tensor]:
        mu = self.logit_init + heads.s1
        sigma = F.softplus(heads.s2 + inverse_softplus(SIGMA_INIT)) + self.sigma_floor
        return mu, sigma

    def critical_logit(self, samples: ShadeSamples) -> torch.Tensor:
        ratio = samples.rival / samples.valuation.clamp_min(1e-9)
        return logit(self.clamp(ratio))

    def shade_loss(self, heads: Heads, samples: ShadeSamples) -> torch.Tensor:
        mu, sigma = self.belief(heads)
        z = self.critical_logit(samples)
        return 0.5 * ((z - mu) / sigma) ** 2 + torch.log(sigma)
