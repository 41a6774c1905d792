"""The `margent:` params section: team, simulator, collection, distillation, manager, evaluation.

Split into sub-sections so each DVC stage depends only on what it reads: the collection on
`team`, `subagents`, `solvers`, `simulator`, `collect`; the manager training on `distill` and
`manager`; the evaluation on `eval`. Changing ρ (`distill.rho`) reruns training and evaluation
but never the collection.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from delegation_lab.params.model import ParamsModel, StudyParams

SubAgent = Literal["Extractor", "Reasoner", "Verifier"]
SUBAGENTS: tuple[SubAgent, ...] = ("Extractor", "Reasoner", "Verifier")
Rho = float | Literal["all"]


def rho_label(rho: Rho) -> str:
    """How a ρ value is written in keys and file names: 0, 0.5, 1, 2, 3, all."""
    if rho == "all":
        return "all"
    value = float(rho)
    return str(int(value)) if value.is_integer() else f"{value:g}"


class SubAgentSim(ParamsModel):
    """What one simulated sub-agent call does to the manager's candidate (call, then revise)."""

    rescue_at_d1: float = Field(gt=0, lt=1)
    """P(the revised candidate is right | the candidate was wrong) at difficulty 1, for an item of average latent hardness."""
    rescue_logit_slope: float = -0.1
    """Change of the rescue log-odds per extra difficulty unit (negative: harder items are rescued less often)."""
    rescue_hardness: float = Field(0.8, ge=0)
    """Drop of the rescue log-odds per standard deviation of the item's latent hardness (the hardness that also makes the manager's candidate wrong), so an item no call rescues is hard for the next call too."""
    corruption_at_d1: float = Field(ge=0, lt=1)
    """P(the revised candidate is wrong | the candidate was right) at difficulty 1."""
    corruption_logit_slope: float = 0.1
    """Change of the corruption log-odds per extra difficulty unit."""
    flag_if_unresolved: float = Field(0.5, ge=0, le=1)
    """P(the signal raises an issue | the candidate was wrong and this call does not rescue it)."""
    flag_if_right: float = Field(0.1, ge=0, le=1)
    """P(the signal raises an issue | the candidate was right and stays right): a false alarm the manager shrugs off."""
    blank_rescue_scale: float = Field(1.0, ge=0)
    """Rescue probability multiplier when the call is made without the candidate (the Verifier candidate-blank ablation; only the Verifier ever receives the candidate)."""
    blank_corruption_scale: float = Field(1.0, ge=0)
    """Corruption probability multiplier when the call is made without the candidate."""
    tokens_out: float = Field(150.0, ge=1)
    """Mean completion tokens of the signal (log-normal, coefficient of variation simulator.tokens_cv)."""


class ManagerSim(ParamsModel):
    """The simulated manager: its temperature-0 candidate, its self-reported confidence, its revisions."""

    skill: float = 0.9
    """Probit intercept of the root candidate: P(right | d) = Phi(skill - difficulty_slope * (d - 1)), averaged over item hardness."""
    difficulty_slope: float = Field(0.22, ge=0)
    """How fast the root candidate's probit falls per extra difficulty unit."""
    hardness_weight: float = Field(0.7, ge=0, le=1)
    """Share of the root candidate's error noise that is the item's latent hardness (shared with the sub-agents' rescue odds)."""
    confidence_separation: float = Field(1.5, ge=0)
    """Gap in log-odds between the confidence the manager reports for a right and for a wrong candidate (0 = uninformative)."""
    confidence_noise: float = Field(1.0, gt=0)
    """Standard deviation of the log-odds noise of the reported confidence."""
    revise_if_flagged: float = Field(0.5, ge=0, le=1)
    """P(the manager changes a wrong candidate it fails to fix, given a signal that raises an issue)."""
    candidate_tokens_out: float = Field(220.0, ge=1)
    """Mean completion tokens of the root candidate."""
    revise_tokens_out: float = Field(180.0, ge=1)
    """Mean completion tokens of a revision."""
    decide_tokens_out: float = Field(16.0, ge=1)
    """Mean completion tokens of a decide call (prompted manager baseline only)."""
    prompted_threshold: float = Field(0.5, ge=0, le=1)
    """The untrained (prompted) manager delegates while its confidence is below this, else commits."""
    prompted_order: list[SubAgent] = ["Verifier", "Reasoner", "Extractor"]
    """Order in which the untrained manager tries sub-agents (unused ones of the pool only)."""


class SimulatorParams(ParamsModel):
    seed: int = 0
    """Seeds every simulated draw; a call's effect is a pure function of (seed, item, sub-agent, the candidate it sees)."""
    manager: ManagerSim = ManagerSim()
    """The manager's candidate, confidence and revision."""
    extractor: SubAgentSim = SubAgentSim(
        rescue_at_d1=0.12, rescue_logit_slope=-0.10, corruption_at_d1=0.05, corruption_logit_slope=0.10,
        flag_if_unresolved=0.3, flag_if_right=0.15, tokens_out=140.0,
    )
    """Extractor: decision-relevant facts and their polarity (receives the question). Defaults: rescue 0.12, slope -0.10, corruption 0.05, slope 0.10, flags 0.3 / 0.15, 140 tokens."""
    reasoner: SubAgentSim = SubAgentSim(
        rescue_at_d1=0.40, rescue_logit_slope=-0.15, corruption_at_d1=0.06, corruption_logit_slope=0.12,
        flag_if_unresolved=0.5, flag_if_right=0.2, tokens_out=260.0,
    )
    """Reasoner: a decomposition and the missing steps (receives the question). Defaults: rescue 0.40, slope -0.15, corruption 0.06, slope 0.12, flags 0.5 / 0.2, 260 tokens."""
    verifier: SubAgentSim = SubAgentSim(
        rescue_at_d1=0.70, rescue_logit_slope=-0.12, corruption_at_d1=0.02, corruption_logit_slope=0.10,
        flag_if_unresolved=0.6, flag_if_right=0.08, blank_rescue_scale=0.75, tokens_out=180.0,
    )
    """Verifier: an audit of the current candidate (receives the question and the candidate). Defaults: rescue 0.70, slope -0.12, corruption 0.02, slope 0.10, flags 0.6 / 0.08, blank rescue x0.75, 180 tokens."""
    rescue_correlation: float = Field(0.6, ge=0, lt=1)
    """Share of the rescue noise shared by every call on the same item (probit scale; marginal rescue probabilities are unchanged): high values make an item that one call cannot rescue unlikely to be rescued by another."""
    tokens_cv: float = Field(0.25, ge=0)
    """Coefficient of variation of every simulated completion length."""
    malformed_rate: float = Field(0.0, ge=0, le=1)
    """Probability that a sub-agent's reply breaks its schema (becomes an error branch), to exercise that path."""

    def subagent(self, name: SubAgent) -> SubAgentSim:
        return getattr(self, name.lower())


class SolverRoles(ParamsModel):
    """Which solver of `solvers:` plays each role. Team `llm`: that solver answers; team `simulated`:
    its `price` prices the simulated tokens. Either way every call is priced through solver costs."""

    manager: str = "C"
    """Solver for the manager's candidate, revise and decide calls."""
    extractor: str = "C"
    """Solver for the Extractor."""
    reasoner: str = "C"
    """Solver for the Reasoner."""
    verifier: str = "C"
    """Solver for the Verifier."""

    def for_role(self, role: str) -> str:
        return getattr(self, role.lower())


class CollectParams(ParamsModel):
    split: Literal["train"] = "train"
    """Split the interventional collection and the development pool are drawn from (disjoint from test)."""
    n_items: int = Field(2000, ge=1)
    """Root states (items) in the interventional collection (the paper: 400 per task, GPQA 200)."""
    dev_items: int = Field(500, ge=0)
    """Further train items, disjoint from the collection, on which the operating point (ρ) is selected; 0 = no development pool."""
    test_items: int | None = Field(None, ge=1)
    """Held-out test items evaluated (full tree of every call sequence); null = the whole test split."""
    depth: int = Field(3, ge=1, le=3)
    """Maximum delegation depth D of the breadth-first search (1..3)."""
    seed: int = 0
    """Seed of the item sample (which train items are collected, which form the development pool)."""


class DistillParams(ParamsModel):
    rho: list[Rho] = [0.0, 0.5, 1.0, 2.0, 3.0, "all"]
    """Commit examples are capped at ρ x the rescue examples; `all` keeps every commit example. One manager per value."""
    seed: int = 0
    """Seed of the per-example choice among equally short successes and of the commit subsample."""

    @field_validator("rho")
    @classmethod
    def _rho(cls, values: list[Rho]) -> list[Rho]:
        if not values:
            raise ValueError("give at least one ρ")
        for value in values:
            if value != "all" and value < 0:
                raise ValueError(f"ρ must be >= 0 or 'all' (got {value})")
        labels = [rho_label(v) for v in values]
        if len(set(labels)) != len(labels):
            raise ValueError(f"ρ values repeat: {labels}")
        return values


class ManagerParams(ParamsModel):
    hidden: int = Field(32, ge=1)
    """Hidden units of the manager policy (an MLP over state features)."""
    epochs: int = Field(300, ge=1)
    """Full-batch Adam steps."""
    lr: float = Field(0.01, gt=0)
    """Adam learning rate."""
    weight_decay: float = Field(1e-4, ge=0)
    """L2 penalty (AdamW decoupled weight decay)."""
    seeds: int = Field(3, ge=1)
    """Independent managers per ρ (initialisation and commit subsample), trained batched in one tensor."""
    seed: int = 0
    """First seed; managers use seed, seed + 1, ..."""
    device: str = "cpu"
    """torch device for training and evaluation of the policies."""
    cpu_threads: int | None = Field(1, ge=1)
    """torch CPU threads (1 suits these small batched MLPs on shared cores; null = torch's default)."""


class EvalParams(ParamsModel):
    resamples: int = Field(2000, ge=1)
    """Resamples of the matched-budget random replay."""
    confidence: float = Field(0.95, gt=0, lt=1)
    """Coverage of the replay interval and of the rescue / corruption Wilson intervals."""
    selected_rho: Rho | None = None
    """Operating point reported as MARGENT's result; null = the most accurate ρ on the development pool (ties: fewer calls)."""
    seed: int = 0
    """Seed of the random replay."""
    simulator_seeds: int = Field(4, ge=0)
    """Further simulator seeds (`simulator.seed` + 1 ... + n) the whole study reruns on (team simulated), so
    Tables 1-3 carry an interval over independent simulated teams (metrics `simulator_seeds`); 0 = none. ~14 s CPU each."""
    sensitivity: bool = True
    """Rerun the whole study under each setting of `margent.sensitivity.variants` (team simulated; metrics
    `sensitivity`: Tables 1-3 per setting). ~14 s CPU each."""
    replicate_workers: int = Field(2, ge=1)
    """Processes the replicates (simulator seeds and sensitivity settings) run in; each replicate is seeded on
    its own, so the figures do not depend on this, only the stage's wall time (2 = both cores of a laptop)."""

    @field_validator("selected_rho")
    @classmethod
    def _selected(cls, value: Rho | None) -> Rho | None:
        if value is not None and value != "all" and value < 0:
            raise ValueError(f"ρ must be >= 0 or 'all' (got {value})")
        return value


class MargentParams(StudyParams):
    team: Literal["simulated", "llm"] = "simulated"
    """Who plays the manager and sub-agents: the documented simulator, or real LLMs through the solver protocol."""
    subagents: list[SubAgent] = list(SUBAGENTS)
    """The sub-agent pool, in the fixed scaffold order the force-all baseline calls them."""
    solvers: SolverRoles = SolverRoles()
    """Solver (a key of `solvers:`) behind each role; it answers (team llm) or prices (team simulated)."""
    simulator: SimulatorParams = SimulatorParams()
    """The simulated manager and sub-agents (team simulated)."""
    collect: CollectParams = CollectParams()
    """Interventional collection (train) and the full evaluation trees (development pool, test)."""
    distill: DistillParams = DistillParams()
    """Marginal-value distillation into supervision."""
    manager: ManagerParams = ManagerParams()
    """The learned manager policy."""
    eval: EvalParams = EvalParams()
    """Evaluation on collection-disjoint items."""

    @field_validator("subagents")
    @classmethod
    def _pool(cls, pool: list[SubAgent]) -> list[SubAgent]:
        if not pool:
            raise ValueError("the sub-agent pool is empty")
        if len(set(pool)) != len(pool):
            raise ValueError(f"a sub-agent is listed twice: {pool}")
        return pool

    @model_validator(mode="after")
    def _depth(self) -> MargentParams:
        if self.collect.depth > len(self.subagents):
            raise ValueError(
                f"collect.depth={self.collect.depth} exceeds the {len(self.subagents)} sub-agents of the pool "
                "(each sub-agent is called at most once)"
            )
        missing = [a for a in self.simulator.manager.prompted_order if a not in self.subagents]
        if len(missing) == len(self.simulator.manager.prompted_order):
            raise ValueError(f"simulator.manager.prompted_order {self.simulator.manager.prompted_order} names no sub-agent of the pool {self.subagents}")
        labels = [rho_label(r) for r in self.distill.rho]
        if self.eval.selected_rho is not None and rho_label(self.eval.selected_rho) not in labels:
            raise ValueError(f"eval.selected_rho={rho_label(self.eval.selected_rho)} is not one of distill.rho {labels}")
        if self.eval.selected_rho is None and self.collect.dev_items == 0:
            raise ValueError("eval.selected_rho is null (select on the development pool) but collect.dev_items is 0; set one of them")
        return self
