"""PPO shading (seed 004 §4): a Gaussian policy over the logit of the shade, z ~ N(mu(s), sigma(s)),
xi = sigmoid(z), trained each round on L = -min(rho A, clip(rho, 1 - eps, 1 + eps) A) - beta H with
advantage A = U - U_ema: the realised utility when the agent won (0 when it lost) minus an
exponential moving average of the agent's own utility. As the paper notes, once winners carry a
positive baseline, a higher shade that still loses gets A = -U_ema < 0 and is pushed down.
"""

from __future__ import annotations

import math

import torch

from delegation_lab.market.bidders.base import Bidder, Shade, ShadeSamples
from delegation_lab.market.networks import Heads

LOG_STD_RANGE = (-4.0, 1.0)


class PPO(Bidder):
    name = "ppo"

    def __init__(self, clip: float, entropy: float, epochs: int, baseline_rate: float, init_log_std: float, **kw):
        super().__init__(**kw)
        self.clip, self.entropy, self.epochs = clip, entropy, epochs
        self.baseline_rate, self.init_log_std = baseline_rate, init_log_std
        self.baseline = torch.zeros(self.n_worlds, self.n_agents, device=self.device)  # U_ema per agent

    def policy(self, heads: Heads) -> tuple[torch.Tensor, torch.Tensor]:
        mu = self.logit_init + heads.s1
        log_std = (self.init_log_std + heads.s2).clamp(*LOG_STD_RANGE)
        return mu, log_std

    @staticmethod
    def log_prob(z: torch.Tensor, mu: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
        return -0.5 * ((z - mu) / log_std.exp()) ** 2 - log_std - 0.5 * math.log(2 * math.pi)

    def shade(self, heads: Heads, gen: torch.Generator) -> Shade:
        mu, log_std = self.policy(heads)
        z = mu + log_std.exp() * torch.randn(mu.shape, generator=gen, device=mu.device)
        return Shade(self.clamp(torch.sigmoid(z)), z, self.log_prob(z, mu, log_std))

    def shade_loss(self, heads: Heads, samples: ShadeSamples) -> torch.Tensor:
        mu, log_std = self.policy(heads)
        ratio = torch.exp(self.log_prob(samples.z, mu, log_std) - samples.logp)
        baseline = torch.gather(self.baseline, 1, samples.agent.reshape(self.n_worlds, -1)).view_as(samples.utility)
        advantage = samples.utility - baseline
        surrogate = torch.minimum(ratio * advantage, ratio.clamp(1 - self.clip, 1 + self.clip) * advantage)
        entropy = log_std + 0.5 * math.log(2 * math.pi * math.e)
        return -surrogate - self.entropy * entropy

    def end_round(self, samples: ShadeSamples) -> None:
        flat = samples.agent.reshape(self.n_worlds, -1)
        count = torch.zeros_like(self.baseline).scatter_add_(1, flat, samples.bid.reshape(self.n_worlds, -1).float())
        total = torch.zeros_like(self.baseline).scatter_add_(
            1, flat, torch.where(samples.bid, samples.utility, torch.zeros_like(samples.utility)).reshape(self.n_worlds, -1)
        )
        rate = self.baseline_rate * (count > 0)
        self.baseline = (1 - rate) * self.baseline + rate * total / count.clamp_min(1)
