"""Truthful bidding, xi = 1: the weakly dominant strategy of a myopic agent in a Vickrey auction
(seed 004 §2.2); the Vickrey protocols enforce it. Under first_price it earns zero margin."""

from __future__ import annotations

import torch

from delegation_lab.market.bidders.base import Bidder, Shade, ShadeSamples
from delegation_lab.market.networks import Heads


class Truthful(Bidder):
    name = "truthful"
    truthful = True

    def shade(self, heads: Heads, gen: torch.Generator) -> Shade:
        one = torch.ones_like(heads.value)
        return Shade(one, torch.full_like(one, float("inf")), torch.zeros_like(one))

    def shade_loss(self, heads: Heads, samples: ShadeSamples) -> torch.Tensor:
        return torch.zeros_like(heads.value)
