"""The `routers` params section: one typed model per router with knobs (a field named as the router is
registered in `routers.ROUTERS`), each with the sweep of its cost knob; the valid names come from the registry."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from delegation_lab.params.model import ParamsModel, StudyParams
from delegation_lab.routers import ROUTERS

RouterName = ROUTERS.choices()
"""`Literal[<every registered router>]`: the registry (`routers.ROUTERS`) is the list of valid names."""
LAMBDAS = [0.0, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6]


class KnnParams(ParamsModel):
    k: int = Field(25, gt=0)
    """Nearest training items (cosine of the question embeddings) whose success rates predict a solver's."""
    search_dim: int = Field(48, ge=2)
    """Embeddings are projected on their first `search_dim` principal components (fitted on train)
    before the search: batched routing of 1e5 items stays well under a second."""
    cells: int = Field(64, ge=0)
    """Inverted-file cells (k-means on the training items) for approximate search; 0 = exact search
    (also used when the bank has fewer than cells * k items)."""
    probe: int = Field(2, gt=0)
    """Cells searched per question: its own cell's `probe` nearest cells (by centroid similarity)."""
    sweep: list[float] = Field(default_factory=lambda: list(LAMBDAS), min_length=1)
    """Cost weights lambda: pick argmax(predicted accuracy - lambda * cost / reference cost)."""


class MlpParams(ParamsModel):
    hidden: int = Field(64, ge=1)
    """Width of the two hidden layers."""
    epochs: int = Field(40, ge=1)
    """Passes over the fitting items."""
    batch_size: int = Field(256, ge=1)
    """Items per gradient step."""
    learning_rate: float = Field(1e-3, gt=0)
    """Adam step size."""
    weight_decay: float = Field(1e-4, ge=0)
    """Adam L2 penalty."""
    sweep: list[float] = Field(default_factory=lambda: list(LAMBDAS), min_length=1)
    """Cost weights lambda of the decision rule (as `knn.sweep`)."""


class MfParams(ParamsModel):
    dim: int = Field(32, ge=1)
    """Latent dimension: item embeddings are projected to it and multiplied with a learned vector per solver."""
    epochs: int = Field(60, ge=1)
    """Passes over the fitting items."""
    batch_size: int = Field(256, ge=1)
    """Items per gradient step."""
    learning_rate: float = Field(3e-3, gt=0)
    """Adam step size."""
    weight_decay: float = Field(1e-5, ge=0)
    """Adam L2 penalty."""
    sweep: list[float] = Field(default_factory=lambda: list(LAMBDAS), min_length=1)
    """Cost weights lambda of the decision rule (as `knn.sweep`)."""


class ClusterParams(ParamsModel):
    clusters: int = Field(16, gt=0)
    """k-means clusters of the question embeddings."""
    iterations: int = Field(50, ge=1)
    """Lloyd iterations of k-means (k-means++ start)."""
    sweep: list[float] = Field(default_factory=lambda: [0.0, 0.2, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0], min_length=1)
    """Performance weights alpha in [0, 1]: score = alpha * normalised accuracy + (1 - alpha) * (1 - normalised cost),
    each min-max normalised across the solvers of a cluster."""

    @model_validator(mode="after")
    def _alphas(self) -> ClusterParams:
        if any(not 0 <= a <= 1 for a in self.sweep):
            raise ValueError("sweep: every alpha must lie in [0, 1]")
        return self


class AvengersProParams(ClusterParams):
    top_p: int = Field(3, gt=0)
    """Nearest clusters whose performance-efficiency scores a question aggregates (the paper's top-p;
    the released code's balance config uses 3); 1 = the `cluster` router."""
    beta: float = Field(9.0, ge=0)
    """The top-p clusters' weights: softmax(-beta * squared distance to the question) over them, as
    the released code weights its clusters (beta = 9 there, on the cosine distance); 0 = equal
    weights (the paper's plain sum), which lets a far cluster outvote the question's own."""

    @model_validator(mode="after")
    def _top_p(self) -> AvengersProParams:
        if self.top_p > self.clusters:
            raise ValueError(f"top_p: {self.top_p} nearest clusters asked of {self.clusters} clusters")
        return self


class RouterDcParams(ParamsModel):
    hidden: int = Field(128, ge=1)
    """Hidden width of the query encoder (an MLP on the frozen question embedding; the paper
    fine-tunes mDeBERTa)."""
    dim: int = Field(64, ge=2)
    """Dimension of the encoder's output and of each solver's learned embedding."""
    temperature: float = Field(1.0, gt=0)
    """T in score = cos(enc(q), e_m) / T (upstream's scripts: 1)."""
    top_k: int = Field(3, ge=1)
    """Positives per query in the sample-LLM loss: its best-scoring solvers (upstream: 3)."""
    last_k: int = Field(3, ge=1)
    """Negatives per query in the sample-LLM loss: its worst-scoring solvers (upstream: 3)."""
    ties: Literal["accuracy", "random"] = "accuracy"
    """How the sample-LLM loss orders solvers with equal (0/1) labels on a query when it takes the
    top_k as positives and the last_k as negatives: `accuracy` = the solver more accurate on the
    fitting items first (our stand-in for upstream's graded scores), `random` = a fresh random order per batch."""
    clusters: int = Field(8, gt=0)
    """k-means clusters of the training questions for the sample-sample loss (upstream: 8)."""
    negatives: int = Field(3, ge=1)
    """Other-cluster queries per query in the sample-sample loss (upstream's H: 3)."""
    cluster_weight: float = Field(1.0, ge=0)
    """Weight of the sample-sample loss (upstream's scripts: 1); 0 = the sample-LLM loss alone."""
    epochs: int = Field(30, ge=1)
    """Passes over the fitting items (30: the best of 15 / 30 / 50 / 100 in 4-fold cross-validation on
    zeroeval_math's train split; longer fits lost accuracy there)."""
    max_steps: int = Field(1000, ge=1)
    """At most this many gradient steps, whichever of epochs / max_steps ends first (upstream trains
    1000 steps): bounds the fit on large training splits."""
    batch_size: int = Field(64, ge=2)
    """Queries per step (upstream's default: 64); the sample-sample loss draws its pairs inside a batch."""
    learning_rate: float = Field(1e-3, gt=0)
    """AdamW step size."""
    weight_decay: float = Field(1e-2, ge=0)
    """AdamW decoupled weight decay (torch's default)."""
    sweep: list[float] = Field(default_factory=lambda: list(LAMBDAS), min_length=1)
    """Cost weights lambda of the decision rule on the calibrated success estimate (lambda = 0:
    RouterDC's argmax score)."""


class ThresholdParams(ParamsModel):
    strong: str | None = None
    """The strong solver; null = the most accurate on train."""
    weak: str | None = None
    """The weak solver; null = the cheapest on train."""
    epochs: int = Field(60, ge=1)
    """Passes of the win-probability model (logistic regression on the features)."""
    learning_rate: float = Field(1e-2, gt=0)
    """Adam step size of the win-probability model."""
    sweep: list[float] = Field(default_factory=lambda: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8], min_length=1)
    """Target shares of calls to the strong solver; each share's threshold is calibrated on the dev
    split (the dev quantile of the win probability), as RouteLLM calibrates its thresholds."""

    @model_validator(mode="after")
    def _shares(self) -> ThresholdParams:
        if any(not 0 <= s <= 1 for s in self.sweep):
            raise ValueError("sweep: every strong-call share must lie in [0, 1]")
        return self


class LearnedCascadeParams(ParamsModel):
    epochs: int = Field(60, ge=1)
    """Passes of the per-solver success scorer (logistic regression on the features)."""
    learning_rate: float = Field(1e-2, gt=0)
    """Adam step size of the scorer."""
    sweep: list[float] = Field(default_factory=lambda: [0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95], min_length=1)
    """Scorer thresholds tau: a cheaper solver is called only when its predicted success >= tau, and
    its answer is kept only when the shared verifier accepts it; the priciest solver always answers."""


class IrtParams(ParamsModel):
    dim: int = Field(16, ge=1)
    """Latent dimensions of the abilities theta_m and discriminations a_q (IRT-Router: 25; EmbedLLM: 232)."""
    hidden: int = Field(0, ge=0)
    """Width of the one hidden layer (ReLU) of the question network that reads a_q and b_q; 0 = linear in the
    embedding, as IRT-Router's `MIRTNet`."""
    noise: float = Field(0.0, ge=0)
    """Std of the Gaussian noise added to each question embedding coordinate while fitting (EmbedLLM's alpha, 0.05 there)."""
    epochs: int = Field(100, ge=1)
    """Passes over the fitting items."""
    batch_size: int = Field(256, ge=1)
    """Items (each with every solver's label) per gradient step."""
    learning_rate: float = Field(1e-2, gt=0)
    """Adam step size."""
    weight_decay: float = Field(1e-3, ge=0)
    """Adam L2 penalty (abilities and question network alike), chosen on the dev log-loss of the ZeroEval
    projects' 208-314 fitting items: 1e-4 overfits (0.599 against 0.529 on MATH level 5)."""
    sweep: list[float] = Field(default_factory=lambda: list(LAMBDAS), min_length=1)
    """Cost weights lambda of the decision rule (as `knn.sweep`)."""


class FrugalGptParams(ParamsModel):
    models: list[str] | None = None
    """Reference solvers whose cached final answers the answer scorer compares each answer with (a check
    buys them, once per item, paid and counted as calls); null = `evaluation.verifier.models`, [] = none
    (the scorer then reads the answer's own features, the solver and the question)."""
    max_length: int = Field(3, ge=1, le=4)
    """Most solvers in the cascade (chosen on the fitting items, cheapest first)."""
    candidates: int = Field(8, ge=1)
    """Solvers the chain is drawn from: the most accurate of those on the fitting items' accuracy-cost
    Pareto front (every chain of up to `max_length` of them is scored)."""
    cost_weight: float = Field(0.1, ge=0)
    """lambda of the chain choice: the chain maximising train accuracy - lambda * cost / the priciest
    solver's mean cost at its best threshold of the sweep."""
    embedding_dims: int = Field(8, ge=0)
    """Principal components of the question embedding the scorer reads (fitted on the fitting items); 0 = none."""
    sweep: list[float] = Field(default_factory=lambda: [0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95], min_length=1)
    """Scorer thresholds tau: the cascade stops at the first answer whose calibrated P(right) >= tau (the
    last solver's answer is always kept)."""

    @model_validator(mode="after")
    def _thresholds(self) -> FrugalGptParams:
        if any(not 0 <= t <= 1 for t in self.sweep):
            raise ValueError("sweep: every threshold must lie in [0, 1]")
        if self.models is not None and len(set(self.models)) != len(self.models):
            raise ValueError(f"models: names repeat ({self.models})")
        return self


class RandomParams(ParamsModel):
    sweep: list[float] = Field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0], min_length=1)
    """Probabilities of sending an item to the strongest solver (else a uniformly drawn other one)."""


class RoutersParams(StudyParams):
    routers: list[RouterName] = Field(default_factory=lambda: list(ROUTERS.names()), min_length=1)  # type: ignore[valid-type]
    """Routers to fit and evaluate, by the names they are registered under (`routers.ROUTERS`); default: every one."""
    seeds: int = Field(3, ge=1)
    """Seeds per router (initialisation, k-means start, random draws, verifier noise stream)."""
    seed: int = 0
    """Base seed: seed s of a router uses [seed, s]."""
    dev_fraction: float = Field(0.2, gt=0, lt=1)
    """Share of the train split carved out (by a hash of item_id) as the dev split for calibration."""
    knn: KnnParams = KnnParams()
    """k-nearest-neighbour router."""
    mlp: MlpParams = MlpParams()
    """Torch MLP predicting each solver's success."""
    mf: MfParams = MfParams()
    """RouteLLM-style matrix factorisation."""
    cluster: ClusterParams = ClusterParams()
    """Cluster router: Avengers-Pro's rule on the single nearest cluster."""
    threshold: ThresholdParams = ThresholdParams()
    """RouteLLM strong/weak win-probability threshold router."""
    learned_cascade: LearnedCascadeParams = LearnedCascadeParams()
    """FrugalGPT-style learned cascade."""
    routerdc: RouterDcParams = RouterDcParams()
    """RouterDC: dual-contrastive query encoder and solver embeddings."""
    avengers_pro: AvengersProParams = AvengersProParams()
    """Avengers-Pro: performance-efficiency scores of the top-p nearest clusters."""
    irt: IrtParams = IrtParams()
    """EmbedLLM / IRT-Router model-embedding router (multidimensional IRT)."""
    frugalgpt: FrugalGptParams = FrugalGptParams()
    """FrugalGPT scorer cascade (a learned answer scorer decides when to stop)."""
    random: RandomParams = RandomParams()
    """Random router (reference)."""
    torch_threads: int = Field(1, ge=1)
    """Torch CPU threads while fitting (deterministic results for a given machine)."""

    @model_validator(mode="after")
    def _unique(self) -> RoutersParams:
        if len(set(self.routers)) != len(self.routers):
            raise ValueError("routers: a router is listed twice")
        return self
