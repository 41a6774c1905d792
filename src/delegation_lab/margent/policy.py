"""The learned manager of the embedded default: a small MLP over state features that picks commit or
an unused sub-agent, trained by cross-entropy on the distilled decision steps.

Every (ρ, seed) manager is trained at once: the weights carry a leading model dimension and each
model sees the steps of its own dataset through a 0/1 weight matrix over the union of steps.
Managers with the same seed share their initialisation, so a ρ comparison changes only the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


class BatchedPolicy(nn.Module):
    """M independent one-hidden-layer MLPs (features -> hidden -> actions), evaluated with batched matmuls."""

    def __init__(self, seeds: list[int], n_features: int, hidden: int, n_actions: int):
        super().__init__()
        shapes = [(n_features, hidden), (hidden, n_actions)]
        weights = [[] for _ in shapes]
        for seed in seeds:
            g = torch.Generator().manual_seed(int(seed))
            for k, (fan_in, fan_out) in enumerate(shapes):
                weights[k].append(torch.randn(fan_in, fan_out, generator=g) * math.sqrt(2.0 / fan_in))
        self.w = nn.ParameterList([nn.Parameter(torch.stack(w)) for w in weights])
        self.b = nn.ParameterList([nn.Parameter(torch.zeros(len(seeds), fan_out)) for _, fan_out in shapes])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [N, F] -> logits [M, N, A]."""
        h = torch.relu(torch.matmul(x, self.w[0]) + self.b[0][:, None])  # [M, N, H]
        return torch.bmm(h, self.w[1]) + self.b[1][:, None]


def masked_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return logits.masked_fill(~mask, float("-inf"))


@dataclass
class TrainResult:
    policy: BatchedPolicy
    loss_curve: np.ndarray  # [M, epochs]
    train_accuracy: np.ndarray  # [M]: share of each model's own steps it imitates


def train_policies(
    features: np.ndarray,
    actions: np.ndarray,
    mask: np.ndarray,
    weights: np.ndarray,
    seeds: list[int],
    hidden: int,
    epochs: int,
    lr: float,
    weight_decay: float,
    device: str = "cpu",
    n_actions: int = 4,
    cpu_threads: int | None = None,
) -> TrainResult:
    """Full-batch AdamW on M models at once; weights [M, N] select each model's steps."""
    if cpu_threads is not None:
        torch.set_num_threads(cpu_threads)
    torch.manual_seed(int(seeds[0]) if seeds else 0)
    dev = torch.device(device)
    x = torch.as_tensor(features, dtype=torch.float32, device=dev)
    y = torch.as_tensor(actions, dtype=torch.long, device=dev)
    m = torch.as_tensor(mask, dtype=torch.bool, device=dev)
    w = torch.as_tensor(weights, dtype=torch.float32, device=dev)
    if not bool((m[torch.arange(len(y), device=dev), y]).all()):
        raise ValueError("a target action is not available in its state")
    policy = BatchedPolicy(seeds, x.shape[1], hidden, n_actions).to(dev)
    opt = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=weight_decay)
    denom = w.sum(1).clamp_min(1.0)
    curve = torch.zeros(len(seeds), epochs, device=dev)
    for epoch in range(epochs):
        logits = masked_logits(policy(x), m[None])
        logp = torch.log_softmax(logits, dim=-1)
        nll = -logp.gather(2, y[None, :, None].expand(len(seeds), -1, 1)).squeeze(2)  # [M, N]
        per_model = (nll * w).sum(1) / denom
        opt.zero_grad()
        per_model.sum().backward()
        opt.step()
        curve[:, epoch] = per_model.detach()
    with torch.no_grad():
        pred = masked_logits(policy(x), m[None]).argmax(-1)
        acc = ((pred == y[None]).float() * w).sum(1) / denom
    return TrainResult(policy.cpu(), curve.cpu().numpy(), acc.cpu().numpy())


def act(policy: BatchedPolicy, features: np.ndarray, mask: np.ndarray, device: str = "cpu") -> np.ndarray:
    """Greedy actions [M, N] of every model on every state."""
    dev = torch.device(device)
    policy = policy.to(dev)
    with torch.no_grad():
        x = torch.as_tensor(features, dtype=torch.float32, device=dev)
        m = torch.as_tensor(mask, dtype=torch.bool, device=dev)
        out = masked_logits(policy(x), m[None]).argmax(-1).cpu().numpy()
    policy.cpu()
    return out
