"""Bayes-optimal shading baseline (seed 004 §4): under the belief over the critical shade, pick
xi = argmax_{xi'} (1 - xi') Phi((logit xi' - mu_l) / sigma_l), the expected margin per unit of
valuation, searched over a logit-spaced grid of shades."""

from __future__ import annotations

import torch

from delegation_lab.market.bidders.base import Shade, logit
from delegation_lab.market.bidders.belief import CriticalShadeBelief
from delegation_lab.market.networks import Heads


class BayesOptimal(CriticalShadeBelief):
    name = "bayes_optimal"

    def __init__(self, grid: int, **kw):
        super().__init__(**kw)
        lo, hi = float(logit(self.shade_min)), float(logit(self.shade_max))
        self.grid_z = torch.linspace(lo, hi, grid, device=self.device)
        self.grid_xi = torch.sigmoid(self.grid_z)

    def expected_margin(self, mu: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        """[..., A, G]: (1 - xi) P(win | xi) for every grid shade."""
        p_win = torch.special.ndtr((self.grid_z - mu.unsqueeze(-1)) / sigma.unsqueeze(-1))
        return (1 - self.grid_xi) * p_win

    def shade(self, heads: Heads, gen: torch.Generator) -> Shade:
        mu, sigma = self.belief(heads)
        best = self.expected_margin(mu, sigma).argmax(dim=-1)
        xi = self.grid_xi[best]
        return Shade(xi, self.grid_z[best], torch.zeros_like(xi))
