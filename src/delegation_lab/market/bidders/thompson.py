"""Thompson-sampling shading (seed 004 §4): draw z ~ N(mu_l, sigma_l^2) from the belief over the
logit of the critical shade and bid xi = sigmoid(z), i.e. bid a sampled guess of the smallest
winning shade."""

from __future__ import annotations

import torch

from delegation_lab.market.bidders.base import Shade
from delegation_lab.market.bidders.belief import CriticalShadeBelief
from delegation_lab.market.networks import Heads


class Thompson(CriticalShadeBelief):
    name = "thompson"

    def shade(self, heads: Heads, gen: torch.Generator) -> Shade:
        mu, sigma = self.belief(heads)
        z = mu + sigma * torch.randn(mu.shape, generator=gen, device=mu.device)
        xi = self.clamp(torch.sigmoid(z))
        return Shade(xi, z, torch.zeros_like(xi))
