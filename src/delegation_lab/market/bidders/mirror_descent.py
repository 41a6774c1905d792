"""Mirror Descent shading (seed 004 §4): after each auction the agent's shade target moves
multiplicatively, xi_target = xi e^{-eta} after a win (try to keep more margin) and xi e^{+eta}
after a loss (bid closer to the valuation); the shade head regresses its logit toward the target.

It decouples what is learned: the valuation from realised payoffs when winning, the shade from the
binary win / loss outcome alone. A monopsonist wins every auction, so its shade falls to the floor.
"""

from __future__ import annotations

import torch

from delegation_lab.market.bidders.base import Bidder, Shade, ShadeSamples, logit
from delegation_lab.market.networks import Heads


class MirrorDescent(Bidder):
    name = "mirror_descent"

    def __init__(self, eta: float, **kw):
        super().__init__(**kw)
        self.eta = eta

    def shade(self, heads: Heads, gen: torch.Generator) -> Shade:
        xi = self.clamp(torch.sigmoid(self.logit_init + heads.s1))
        return Shade(xi, logit(xi), torch.zeros_like(xi))

    def target(self, xi: torch.Tensor, won: torch.Tensor) -> torch.Tensor:
        step = torch.where(won, torch.full_like(xi, -self.eta), torch.full_like(xi, self.eta))
        return self.clamp(xi * torch.exp(step))

    def shade_loss(self, heads: Heads, samples: ShadeSamples) -> torch.Tensor:
        goal = logit(self.target(samples.xi, samples.won))
        return (self.logit_init + heads.s1 - goal) ** 2

