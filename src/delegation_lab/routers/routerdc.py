"""RouterDC (Chen et al., NeurIPS 2024, "RouterDC: Query-Based Router by Dual Contrastive Learning
for Assembling Large Language Models", arXiv 2409.19886; code github.com/shuhao02/RouterDC, the
losses as in train_router_mdeberta.py at 0e63989c5bf4363330b8a4616386e3f7f116d9f8).

A query encoder and one learnable embedding e_m per solver; score(q, m) = cos(enc(q), e_m) / T.
Trained with the sum of
- the sample-LLM contrastive loss: for each query, each of its top_k best-scoring solvers (a
  positive, skipped when it scored 0) against its last_k worst (negatives; any that scored > 0.5
  drop out): -log softmax([s_pos, s_neg...])[pos], summed over the positives, mean over the batch;
- cluster_weight x the sample-sample contrastive loss: each query against one query of its own
  cluster and `negatives` queries of other clusters in the batch: -log softmax of the encoder
  outputs' cosines (no temperature, as upstream), the clusters being k-means clusters of the
  training questions.

Where ours differs: the paper fine-tunes mDeBERTa-v3-base end to end; ours is a small torch MLP on
the frozen question embedding (`Inputs.embedding`, MiniLM by default), so the clusters are k-means
on that embedding (upstream: k-means on a t-SNE of the untrained encoder's outputs). Upstream's
scores are graded (a probability or a share of attempts right); ours are 0/1, so which of a query's
many right solvers are its top_k positives is a tie: `ties: accuracy` (default) takes the solvers
most accurate on the fitting items first, our stand-in for a graded score (`ties: random` draws
them afresh per batch; in 4-fold cross-validation on zeroeval_math's train split its argmax
accuracy was 0.71 against 0.86). The same-cluster partner is another query when the batch has one
(upstream may draw the query itself). Training runs `epochs` passes (at most `max_steps` steps)
with AdamW; upstream keeps the checkpoint that scores best on its evaluation sets, which we do not
have.

Routing: RouterDC sends a query to argmax score, which is our lambda = 0 point. For the cost sweep
the scores become a calibrated success estimate: P(right | q, m) = sigmoid(a * score + b), one (a, b)
fitted on the dev split (Platt scaling with a > 0, so the argmax is kept), and the shared decision
rule (`utility_choice`: argmax P - lambda * mean cost / reference cost) sweeps lambda.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F

from delegation_lab.routers.base import (
    Inputs,
    Router,
    fit_bce,
    load_module_arrays,
    module_arrays,
    torch_generator,
)
from delegation_lab.routers.cluster import kmeans, nearest

if TYPE_CHECKING:
    from delegation_lab.routers.params import RouterDcParams

INIT_STD = 0.78  # upstream's initial spread of the LLM embeddings
MIN_SLOPE = 1e-6  # Platt slope floor: the calibrated estimate stays increasing in the score


class DualContrastive(torch.nn.Module):
    """enc(q) = MLP(q) and one embedding per solver; forward gives cos(enc(q), e_m) [n, S]."""

    def __init__(self, d_in: int, hidden: int, dim: int, n_solvers: int):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, dim))
        self.llm = torch.nn.Parameter(torch.randn(n_solvers, dim) * INIT_STD)

    def forward(self, q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.encoder(q)
        return F.normalize(h, dim=1) @ F.normalize(self.llm, dim=1).T, h


def sample_llm_loss(scores: torch.Tensor, labels: torch.Tensor, top_k: int, last_k: int, gen: torch.Generator,
                    prior: torch.Tensor | None = None) -> torch.Tensor:
    """RouterDC's sample-LLM loss on scores [B, S] (cosine / T) and labels [B, S] in [0, 1]. Equal
    labels are ordered by `prior` [S] in [0, 1] when given, else (and within equal priors) at random."""
    ranked = labels + 1e-3 * torch.rand(labels.shape, generator=gen)
    if prior is not None:
        ranked = labels + 1e-2 * prior[None, :] + 1e-4 * torch.rand(labels.shape, generator=gen)
    pos = ranked.topk(min(top_k, labels.shape[1]), dim=1).indices  # [B, K]
    neg = ranked.topk(min(last_k, labels.shape[1]), dim=1, largest=False).indices  # [B, L]
    neg_scores = scores.gather(1, neg).masked_fill(labels.gather(1, neg) > 0.5, float("-inf"))
    logits = torch.cat([scores.gather(1, pos)[:, :, None], neg_scores[:, None, :].expand(-1, pos.shape[1], -1)], dim=2)
    nll = -torch.log_softmax(logits, dim=2)[:, :, 0]  # [B, K]
    used = labels.gather(1, pos) > 0  # a positive that scored 0 teaches nothing
    return torch.where(used, nll, torch.zeros_like(nll)).mean(dim=0).sum()


def sample_sample_loss(hidden: torch.Tensor, cluster: torch.Tensor, negatives: int, gen: torch.Generator) -> torch.Tensor:
    """RouterDC's sample-sample (cluster) loss on encoder outputs [B, h] and cluster ids [B]."""
    b = hidden.shape[0]
    unit = F.normalize(hidden, dim=1)
    sim = unit @ unit.T
    same = cluster[:, None] == cluster[None, :]
    own = torch.eye(b, dtype=torch.bool)
    partners = same & ~own
    partners = torch.where(partners.any(dim=1, keepdim=True), partners, own)  # alone in the batch: itself
    draw = torch.rand((2, b, b), generator=gen)
    pos = torch.where(partners, draw[0], -1.0).argmax(dim=1)
    others = ~same
    usable = others.sum(dim=1) >= negatives  # upstream skips a query with too few negatives
    if not bool(usable.any()) or negatives == 0:
        return hidden.new_zeros(())
    neg = torch.where(others, draw[1], -1.0).topk(negatives, dim=1).indices
    logits = torch.cat([sim.gather(1, pos[:, None]), sim.gather(1, neg)], dim=1)[usable]
    return -torch.log_softmax(logits, dim=1)[:, 0].mean()


def train(model: DualContrastive, q: torch.Tensor, y: torch.Tensor, cluster: torch.Tensor, prior: torch.Tensor | None,
          p: RouterDcParams, gen: torch.Generator) -> None:
    """AdamW on the sample-LLM loss + cluster_weight x the sample-sample loss, `p.epochs` passes of
    minibatches, at most `p.max_steps` steps."""
    opt = torch.optim.AdamW(model.parameters(), lr=p.learning_rate, weight_decay=p.weight_decay, foreach=True)
    model.train()
    steps = 0
    for _ in range(p.epochs):
        if steps == p.max_steps:
            break
        order = torch.randperm(q.shape[0], generator=gen)
        for start in range(0, q.shape[0], p.batch_size):
            if steps == p.max_steps:
                break
            idx = order[start:start + p.batch_size]
            cos, hidden = model(q[idx])
            loss = sample_llm_loss(cos / p.temperature, y[idx], p.top_k, p.last_k, gen, prior)
            if p.cluster_weight:
                loss = loss + p.cluster_weight * sample_sample_loss(hidden, cluster[idx], p.negatives, gen)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
    model.eval()


class RouterDcRouter(Router):
    features = "embedding"

    def fit(self, x: Inputs, correct: np.ndarray, cost: np.ndarray, seed: int) -> None:
        self.fit_costs(cost)
        p = self.params
        emb = np.ascontiguousarray(x.embedding, dtype=np.float32)
        centres = kmeans(emb, p.clusters, 50, np.random.default_rng(seed)).astype(np.float32)
        torch.manual_seed(seed)
        self.model = DualContrastive(emb.shape[1], p.hidden, p.dim, len(self.solvers))
        gen = torch_generator(seed)
        q, y = torch.from_numpy(emb), torch.from_numpy(np.asarray(correct, dtype=np.float32))
        cluster = torch.from_numpy(nearest(emb, centres))
        prior = y.mean(dim=0) if p.ties == "accuracy" else None
        train(self.model, q, y, cluster, prior, p, gen)
        self.platt = np.array([1.0, 0.0])  # sigmoid(score) until `calibrate` fits it on dev

    @torch.no_grad()
    def scores(self, x: Inputs) -> np.ndarray:
        """RouterDC's score cos(enc(q), e_m) / T, [n, S]."""
        cos, _ = self.model(torch.from_numpy(np.ascontiguousarray(x.embedding, dtype=np.float32)))
        return cos.numpy().astype(float) / self.params.temperature

    def calibrate(self, x: Inputs, correct: np.ndarray, cost: np.ndarray) -> None:
        """Platt scaling on dev: one slope and intercept over every (question, solver) pair."""
        s = self.scores(x).reshape(-1, 1)
        platt = torch.nn.Linear(1, 1)
        with torch.no_grad():  # start at sigmoid(score): deterministic, no seed needed
            platt.weight.fill_(1.0)
            platt.bias.fill_(0.0)
        fit_bce(platt, s, np.asarray(correct, dtype=float).reshape(-1, 1), epochs=100, batch_size=512,
                learning_rate=0.05, weight_decay=0.0, seed=0)
        self.platt = np.array([max(platt.weight.item(), MIN_SLOPE), platt.bias.item()])
        super().calibrate(x, correct, cost)

    def predict(self, x: Inputs) -> tuple[np.ndarray, np.ndarray]:
        acc = 1.0 / (1.0 + np.exp(-(self.platt[0] * self.scores(x) + self.platt[1])))
        return acc, np.broadcast_to(self.mean_cost, acc.shape)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"platt": self.platt, **module_arrays(self.model)}

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        hidden, d_in = arrays["w.encoder.0.weight"].shape
        n_solvers, dim = arrays["w.llm"].shape
        self.model = load_module_arrays(DualContrastive(d_in, hidden, dim, n_solvers), arrays)
        self.platt = np.asarray(arrays["platt"], dtype=float)
