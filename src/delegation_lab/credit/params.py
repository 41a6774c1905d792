"""The `credit` section of params.yaml: the simulated planner-worker tool-use environment, the
SHARP reward (alpha, beta, gamma), agent-normalised GRPO, the methods compared and the p-sweep.
The paper's values (SHARP Appendix C) are the defaults: alpha = 0.9, beta = 0.9, gamma = 0.1, G = 8
rollouts per input, epsilon = 0.2, delta = 1e-6, batch 256 trajectories, 180 optimisation steps."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from delegation_lab.credit.shapley import EXACT_MAX_AGENTS
from delegation_lab.params.model import ParamsModel, StudyParams

BASE_METHODS = ("single", "broadcast", "no_shapley", "planner_only", "worker_only", "sharp", "sharp_loo",
                "sharp_team_norm", "sharp_role_norm")
DEFAULT_METHODS = ["single", "broadcast", "no_shapley", "planner_only", "worker_only", "sharp", "sharp_loo",
                   "sharp_team_norm"]
MethodName = Literal["single", "broadcast", "no_shapley", "planner_only", "worker_only", "sharp", "sharp_loo",
                     "sharp_team_norm", "sharp_role_norm"]


class ToolSpec(ParamsModel):
    tokens: int = Field(ge=0)
    """Tokens the call consumes (query, returned evidence, the worker's reasoning and report)."""
    hit: float = Field(ge=0, le=1)
    """Chance that the call returns the hop's right fact (a focused subtask on a hop of difficulty 0)."""
    difficulty_slope: float = Field(ge=0, le=1)
    """The hit chance falls to hit x (1 - difficulty_slope) on the hardest hop (difficulty ~ U(0, 1))."""
    distract: float = Field(ge=0, le=1)
    """Chance of a distracting caveat on a hop of ambiguity 0.5 (scaled by ambiguity x ambiguity_scale)."""
    invalid: float = Field(ge=0, le=1)
    """Chance the tool call is malformed or fails (no evidence; the tool-process reward is 0)."""


class ToolsParams(ParamsModel):
    direct: ToolSpec = ToolSpec(tokens=150, hit=0.0, difficulty_slope=0.0, distract=0.0, invalid=0.0)
    """Answer directly without a tool (the worker prompt's "answer directly when tool use is unnecessary"): no evidence, few tokens."""
    search: ToolSpec = ToolSpec(tokens=600, hit=0.6, difficulty_slope=0.7, distract=0.10, invalid=0.15)
    """A terse search query: cheap, often misses or is malformed."""
    search_refined: ToolSpec = ToolSpec(tokens=1000, hit=0.85, difficulty_slope=0.6, distract=0.15, invalid=0.05)
    """A context-rich search query (the planner prompt's advice): the best value per token."""
    search_scrape: ToolSpec = ToolSpec(tokens=2500, hit=0.92, difficulty_slope=0.25, distract=0.50, invalid=0.08)
    """Search, then scrape the page: finds the most, but long pages bring caveats that can turn a right answer wrong."""


class EnvParams(ParamsModel):
    """The multi-hop tool-use environment (a simulated MuSiQue-like task)."""

    hop_probs: list[float] = [0.5, 0.3, 0.2]
    """Probabilities of 2, 3, ... hops per question (MuSiQue has 2-4 hops); the largest team (1 planner +
    hops x max_workers_per_hop) must stay within the exact-Shapley limit of 10 agents."""
    familiarity: list[float] = [0.5, 0.6]
    """Beta(a, b) of a hop's familiarity: the chance the shared model recalls the fact without any tool."""
    ambiguity: list[float] = [0.5, 1.5]
    """Beta(a, b) of a hop's ambiguity, which scales distracting caveats."""
    feature_noise: float = Field(0.1, ge=0)
    """Std of the noise on the familiarity / difficulty / ambiguity features the policy sees."""
    ambiguity_scale: float = Field(2.0, ge=0)
    """A tool's caveat chance is distract x ambiguity_scale x ambiguity."""
    unfocused_hit: float = Field(0.55, ge=0, le=1)
    """Hit multiplier of a worker given the raw question instead of the planner's subtask (the planner's decomposition masked)."""
    unfocused_distract: float = Field(1.5, ge=0)
    """Caveat multiplier of a worker given the raw question."""
    single_hit: float = Field(0.8, ge=0, le=1)
    """Hit multiplier of the single agent's own tool calls (it decomposes in its own context)."""
    single_distract: float = Field(1.2, ge=0)
    """Caveat multiplier of the single agent's own tool calls."""
    max_workers_per_hop: Literal[1, 2] = 2
    """Workers the planner may assign to one hop (the second one is often redundant)."""
    planner_tokens: int = Field(400, ge=0)
    """Planner tokens per question (reading it, writing the plan and the final answer)."""
    planner_tokens_per_hop: int = Field(150, ge=0)
    """Planner tokens per hop (one sub-goal each)."""
    planner_tokens_per_worker: int = Field(100, ge=0)
    """Planner tokens per delegated subtask (the context-rich instruction)."""
    single_tokens: int = Field(400, ge=0)
    """Single-agent tokens per question (reading it and the final answer)."""
    single_tokens_per_hop: int = Field(300, ge=0)
    """Single-agent reasoning tokens per hop."""
    tools: ToolsParams = ToolsParams()
    """The worker's (and single agent's) tool actions."""

    @model_validator(mode="after")
    def _check(self) -> EnvParams:
        if not self.hop_probs or any(p < 0 for p in self.hop_probs) or abs(sum(self.hop_probs) - 1) > 1e-6:
            raise ValueError(f"hop_probs must be non-negative and sum to 1 (got {self.hop_probs})")
        team = 1 + self.max_hops * self.max_workers_per_hop
        if team > EXACT_MAX_AGENTS:  # training credits every rollout exactly; refuse before any method trains
            raise ValueError(f"hop_probs covers 2..{self.max_hops} hops, so a team can have 1 planner + "
                             f"{self.max_hops} x {self.max_workers_per_hop} workers = {team} agents, above the "
                             f"exact-Shapley limit of {EXACT_MAX_AGENTS}; use fewer hops or max_workers_per_hop: 1")
        for key in ("familiarity", "ambiguity"):
            ab = getattr(self, key)
            if len(ab) != 2 or min(ab) <= 0:
                raise ValueError(f"{key} must be two positive Beta parameters [a, b] (got {ab})")
        return self

    @property
    def max_hops(self) -> int:
        return len(self.hop_probs) + 1


class TrajectoryParams(ParamsModel):
    test: bool = True
    """Write every held-out rollout (first evaluation replicate) of every method x seed, one row per agent step."""
    train_every: int = Field(10, ge=0)
    """Also write the training rollouts of every k-th iteration (0 = none)."""
    train_tasks: int = Field(4, ge=1)
    """... of its first tasks (each with its group of G rollouts)."""
    seeds: int | None = Field(2, ge=1)
    """Write trajectories of the first k seeds of each method only (null = every seed): the rows are the
    stage's slowest output, and a few seeds show what the policies do."""


class LongRunParams(ParamsModel):
    iterations_factor: int = Field(0, ge=0)
    """Train this many times `iterations` inside the stage, reported under `long_run.*` (0 = not in the stage:
    it would double its CPU time; `python -m delegation_lab.credit.long_run` runs it 3x by default and writes
    metrics/credit_long_run.json with the run's provenance)."""
    methods: list[MethodName] = ["broadcast", "no_shapley", "sharp"]
    """Methods of the long run (each trained again from scratch, same seeds' questions and draws)."""
    seeds: int = Field(3, ge=1)
    """Seeds of the long run (first_seed .. first_seed + seeds - 1)."""


class CreditParams(StudyParams):
    methods: list[MethodName] = DEFAULT_METHODS
    """single agent (GRPO); broadcast = multi-agent with the global reward only, trajectory-level advantages (MATPO-like); no_shapley = SHARP without the Shapley term (beta = 0, the p = 0 point); planner_only / worker_only = Shapley credit for one role; sharp = the full method; sharp_loo = SHARP trained with the paper's leave-one-out credit instead of exact Shapley (metrics `loo.*`); sharp_team_norm / sharp_role_norm = SHARP's reward with advantages normalised over every agent of the group pooled / per role (planner; workers pooled) instead of per agent (metrics `normalisation_only.*`)."""
    p_sweep: list[float] = [0.5]
    """Fractions of agent invocations that get Shapley credit (the others get 0, no counterfactuals); p = 0 is no_shapley and p = 1 is sharp, so they are not trained twice."""
    alpha: float = Field(0.9, ge=0)
    """Weight of the global (broadcast) accuracy reward."""
    beta: float = Field(0.9, ge=0)
    """Weight of the agent's Shapley marginal credit."""
    gamma: float = Field(0.1, ge=0)
    """Weight of the tool-process reward (share of the agent's tool calls that were valid)."""
    token_cost: float = Field(0.01, ge=0)
    """Reward per 1k tokens subtracted inside the credit game's value v(S) = correct(S) - token_cost x tokens(S) / 1000, so a call that helps nobody earns negative credit."""
    credit_estimator: Literal["exact", "leave_one_out"] = "exact"
    """Training credit of the SHARP family (all but sharp_loo, which always uses leave-one-out): exact Shapley over all coalitions, or the one-agent ablation phi_i = v(N) - v(N - i)."""
    advantage_normalisation: Literal["agent", "agent_group", "role"] = "agent"
    """Advantage statistics of the SHARP family (all but the sharp_*_norm controls): `agent` = each agent's own mean and std over the mini-batch's rollouts in which it acts (the paper's: §4.4 "each agent's mean and standard deviation across sampled trajectories", Appendix C "estimated across each mini-batch"; an agent = the planner or worker r of hop h); `agent_group` = each agent's within its question's group of G (collapses here: with delta = 1e-6 it blows a worker's token-cost differences up to unit advantages on questions every rollout fails); `role` = within the question's group, the planner apart and the workers pooled (this study's earlier choice)."""
    seeds: int = Field(8, ge=1)
    """Independent runs per method (seeds first_seed .. first_seed + seeds - 1), trained batched in one network ensemble."""
    first_seed: int = Field(0, ge=0)
    """First seed."""
    iterations: int = Field(180, ge=1)
    """Optimisation steps (rollout batches); the paper trains 180."""
    tasks_per_batch: int = Field(32, ge=1)
    """Questions per batch; x group_size rollouts = 256 trajectories, the paper's batch."""
    group_size: int = Field(8, ge=2)
    """G: rollouts per question; advantages are normalised within each group."""
    epochs_per_batch: int = Field(2, ge=1)
    """Gradient steps on each batch (the clip matters from the second on)."""
    clip_epsilon: float = Field(0.2, gt=0)
    """PPO / GRPO ratio clip."""
    adv_delta: float = Field(1.0e-6, gt=0)
    """delta added to the group standard deviation."""
    kl_coef: float = Field(0.04, ge=0)
    """GRPO's KL penalty to the reference policy (the initial one), exact over the few actions (DeepSeekMath's 0.04)."""
    learning_rate: float = Field(1.0e-3, gt=0)
    """Adam learning rate of the policy network."""
    hidden: int = Field(64, ge=1)
    """Units in each of the policy network's two hidden layers."""
    env: EnvParams = EnvParams()
    """The planner-worker tool-use environment."""
    train_tasks: int = Field(4000, ge=1)
    """Training questions (drawn with replacement into batches)."""
    test_tasks: int = Field(2000, ge=1)
    """Held-out questions."""
    eval_replicates: int = Field(4, ge=1)
    """Tool-outcome draws per held-out question (common to every method and seed)."""
    eval_every: int = Field(20, ge=1)
    """Held-out accuracy (first replicate) every k iterations, for the stability curves."""
    curve_tasks: int | None = Field(500, ge=1)
    """... on the first k held-out questions (null = all): the curves' checkpoints are the stage's
    largest evaluation cost, and the final evaluation uses every question and replicate anyway."""
    data_seed: int = Field(0, ge=0)
    """Seed of the question pools and of the held-out tool outcomes."""
    usd_per_mtok: float = Field(0.2, ge=0)
    """Price in US dollars per 1M tokens, for cost per question on the frontier (an 8B model served at ~$0.2/M)."""
    device: str = "cpu"
    """torch device for the policy network (`cpu`, `cuda`, or `auto`)."""
    torch_threads: int | None = Field(1, ge=1)
    """torch.set_num_threads while training (small matmuls run best on one thread); null = torch's default."""
    workers: int = Field(2, ge=1)
    """Processes for training: the team methods dealt into this many ensembles, each trained and evaluated in its own spawned process (the single agent after the last one), the MLflow children logged in this process as each arrives; 1 trains the single agent, then every team method in one ensemble, in this process. Each (method, seed) member's numbers depend on its own method and seed only, so they are the same either way."""
    trajectories: TrajectoryParams = TrajectoryParams()
    """Which rollouts become trajectory rows."""
    long_run: LongRunParams = LongRunParams()
    """A second, longer training of a few methods (the learning-speed question)."""

    @field_validator("methods")
    @classmethod
    def _methods(cls, methods: list[str]) -> list[str]:
        if len(set(methods)) != len(methods):
            raise ValueError(f"methods must not repeat (got {methods})")
        return methods

    @field_validator("p_sweep")
    @classmethod
    def _p_sweep(cls, p_sweep: list[float]) -> list[float]:
        bad = [p for p in p_sweep if not 0 < p < 1]
        if bad:
            raise ValueError(f"values must lie strictly between 0 and 1 (got {bad}); p = 0 is method no_shapley "
                             "and p = 1 is method sharp")
        if len(set(p_sweep)) != len(p_sweep):
            raise ValueError(f"p_sweep must not repeat (got {p_sweep})")
        return p_sweep

    @model_validator(mode="after")
    def _check(self) -> CreditParams:
        if not self.methods and not self.p_sweep:
            raise ValueError("methods and p_sweep are both empty: nothing to train")
        if self.alpha + self.beta + self.gamma == 0:
            raise ValueError("alpha, beta and gamma are all 0: every reward would be 0")
        return self

    def method_names(self) -> list[str]:
        return list(self.methods) + [p_method(p) for p in self.p_sweep]


def p_method(p: float) -> str:
    return f"sharp_p{p:g}"
