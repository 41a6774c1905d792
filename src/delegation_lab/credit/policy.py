"""The shared policy: one small MLP over decision features for every role (planner, worker, single
agent: SHARP §3.2's self-play with role-specific prompts becomes a role one-hot), trained for many
seeds at once as an ensemble (weights [seeds, in, out], one `baddbmm` per layer).

Seed s's initial weights come from `torch.Generator().manual_seed(seed)`, so every method starts a
seed from the same network. Actions are sampled in numpy from the seed's own stream.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from delegation_lab.credit.env import N_ACTIONS, N_FEATURES


class EnsembleLinear(nn.Module):
    def __init__(self, seeds: list[int], n_in: int, n_out: int, salt: int):
        super().__init__()
        bound = 1.0 / math.sqrt(n_in)
        ws, bs = [], []
        for seed in seeds:
            g = torch.Generator().manual_seed(int(seed) * 1000 + salt)
            ws.append((torch.rand(n_in, n_out, generator=g) * 2 - 1) * bound)
            bs.append((torch.rand(1, n_out, generator=g) * 2 - 1) * bound)
        self.weight = nn.Parameter(torch.stack(ws))  # [S, in, out]
        self.bias = nn.Parameter(torch.stack(bs))  # [S, 1, out]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [S, N, in] -> [S, N, out]
        return torch.baddbmm(self.bias, x, self.weight)


class EnsemblePolicy(nn.Module):
    """logits [S, N, N_ACTIONS] of features [S, N, N_FEATURES]; two hidden tanh layers."""

    def __init__(self, seeds: list[int], hidden: int):
        super().__init__()
        self.l1 = EnsembleLinear(seeds, N_FEATURES, hidden, 1)
        self.l2 = EnsembleLinear(seeds, hidden, hidden, 2)
        self.out = EnsembleLinear(seeds, hidden, N_ACTIONS, 3)
        with torch.no_grad():  # a near-uniform initial policy, as a pretrained model's spread over options
            self.out.weight.mul_(0.01)
            self.out.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.tanh(self.l2(torch.tanh(self.l1(x)))))


def masked_log_probs(logits: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """log pi over the allowed actions (bool [..., N_ACTIONS]); disallowed get -inf."""
    return torch.log_softmax(logits.masked_fill(~allowed, float("-inf")), dim=-1)


def sample(log_probs: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF sampling: log_probs [..., A], u [...] in [0, 1) -> actions [...]."""
    cdf = np.cumsum(np.exp(log_probs), axis=-1)
    action = (cdf < u[..., None] * cdf[..., -1:]).sum(axis=-1)
    return np.minimum(action, log_probs.shape[-1] - 1)


def greedy(log_probs: np.ndarray) -> np.ndarray:
    return np.argmax(log_probs, axis=-1)
