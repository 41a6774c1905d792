"""Bayes-optimal shading baseline (seed 004 §4): under the belief over the critical shade, pick
xi = argmax_{xi'} (1 - xi') Phi((logit xi' - mu_l) / sigma_l), the expected margin per unit of
valuation.

With z = logit xi and u = (z - mu_l) / sigma_l, the derivative of the objective in z is
(1 - xi) [phi(u) / sigma_l - xi Phi(u)], whose sign is that of h(z) = lambda(u) / sigma_l - sigmoid(z)
with lambda = phi / Phi (the inverse Mills ratio). lambda falls and sigmoid rises in z, so h has a
single root, the maximiser: found by bisection between the shade bounds (all bidders at once).
"""

from __future__ import annotations

import math

import torch

from delegation_lab.market.bidders.base import Shade, logit
from delegation_lab.market.bidders.belief import CriticalShadeBelief
from delegation_lab.market.networks import Heads

LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


class BayesOptimal(CriticalShadeBelief):
    name = "bayes_optimal"

    def __init__(self, iterations: int, **kw):
        super().__init__(**kw)
        self.iterations = iterations
        self.z_lo, self.z_hi = float(logit(self.shade_min)), float(logit(self.shade_max))

    @staticmethod
    def expected_margin(z: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """(1 - xi) P(win | xi) at shade logit z."""
        return (1 - torch.sigmoid(z)) * torch.special.ndtr((z - mu) / sigma)

    def first_order(self, z: torch.Tensor, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        u = (z - mu) / sigma
        mills = torch.exp(-0.5 * u * u - LOG_SQRT_2PI - torch.special.log_ndtr(u))
        return mills / sigma - torch.sigmoid(z)

    def argmax(self, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        lo = torch.full_like(mu, self.z_lo)
        hi = torch.full_like(mu, self.z_hi)
        for _ in range(self.iterations):
            mid = 0.5 * (lo + hi)
            rising = self.first_order(mid, mu, sigma) > 0
            lo = torch.where(rising, mid, lo)
            hi = torch.where(rising, hi, mid)
        return 0.5 * (lo + hi)

    def shade(self, heads: Heads, gen: torch.Generator) -> Shade:
        mu, sigma = self.belief(heads)
        z = self.argmax(mu.detach(), sigma.detach())
        xi = self.clamp(torch.sigmoid(z))
        return Shade(xi, z, torch.zeros_like(xi))
