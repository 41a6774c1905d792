"""Avengers-Pro router (Zhang et al. 2025, "Beyond GPT-5: Making LLMs Cheaper and Better via
Performance-Efficiency Optimized Routing", arXiv 2508.12631; code github.com/ZhangYiqun018/AvengersPro,
read at dfb60b156c4b6011b89edfc8516aa16d8e4f4d38).

k-means clusters of the training questions' embeddings; per cluster j and solver i its accuracy
p_ij and mean cost q_ij, each min-max normalised across the solvers of the cluster; the cluster's
score x_ij = alpha * p~_ij + (1 - alpha) * (1 - q~_ij). A question is routed to the argmax over i of
its top-p nearest clusters' scores, aggregated. The paper sums them (`beta: 0`, equal weights);
the released code (simple_cluster_router.py `route_queries_batch`) weights its top-k clusters by
softmax(-beta * distance), beta = 9, and that is our default: with equal weights a far cluster of
another topic outvotes the question's own (tests/routers/test_avengers_pro.py). Where ours differs
from the released code: our distance is the squared Euclidean one k-means assigns by (theirs:
1 - cosine), we aggregate the scores themselves as the paper does (theirs: reciprocal ranks by
score), its cost normalisation is cost / max cost in the cluster (ours: the paper's min-max), and
one k-means++ start (theirs: sklearn, n_init = 10).

Everything but the top-p weighting is `cluster.ClusterRouter` (k-means, the per-cluster profiles,
the normalisation, the alpha rule): that router is this one with top_p = 1.
"""

from __future__ import annotations

import numpy as np

from delegation_lab.routers.base import Inputs
from delegation_lab.routers.cluster import ClusterRouter, sq_distances


class AvengersProRouter(ClusterRouter):

    def cluster_weights(self, x: Inputs) -> np.ndarray:
        """[n, k]: each question's top-p nearest clusters, weighted by softmax(-beta * squared
        distance) over those p (beta = 0: equally); every other cluster 0."""
        dist = sq_distances(np.asarray(x.embedding, dtype=np.float32), self.centres)  # as `nearest` ranks them
        p = min(self.params.top_p, self.centres.shape[0])
        top = np.argsort(dist, axis=1, kind="stable")[:, :p]  # [n, p]; the first is `nearest`'s
        near = np.take_along_axis(dist, top, axis=1).astype(float)
        logits = -self.params.beta * (near - near[:, :1])  # shifted by the nearest: no overflow
        w = np.exp(logits)
        weights = np.zeros(dist.shape)
        np.put_along_axis(weights, top, w / w.sum(axis=1, keepdims=True), axis=1)
        return weights
