"""The `history_game` section of params.yaml: the equilibrium study and the money-transfer IQL study."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from delegation_lab.games.limits import check_iql_memory, parse_size
from delegation_lab.params.model import ParamsModel, StudyParams

AGENTS = ("A", "B")


class EquilibriaParams(ParamsModel):
    games: list[str] = ["motivating_example", "help_game_6", "reciprocity_finale"]
    """Games to solve: builtin names (`dlab game builtin`) or spec file paths relative to the repo root
    (add a spec file to the stage's deps in dvc.yaml so that editing it reruns the stage). The default:
    the 2-step motivating example (§2.3), 6 steps of the help game (no SPE with help) and a 3-step help
    game with a coordination finale (history-dependent SPE with mutual help, Markov ones without)."""
    favour: str | None = "B"
    """Player whose value Algorithm 1's selection maximises (null: the total sum of values)."""
    max_combinations: int = Field(2_000_000, ge=1)
    """Work budget of each solver (continuation combinations); a larger game fails fast naming its estimate."""
    max_memory: str = "2GiB"
    """Memory limit of solving and reporting each game (`2GiB`, `512MiB`, ...); a game whose estimate
    (mostly one profile node per history of its game tree) exceeds it fails before any work, naming its size."""

    @field_validator("max_memory")
    @classmethod
    def _size(cls, text: str) -> str:
        parse_size(text)  # InputError is a ValueError: pydantic names the key
        return text

    @field_validator("games")
    @classmethod
    def _distinct(cls, games: list[str]) -> list[str]:
        if len(set(games)) != len(games):
            raise ValueError("games must be distinct")
        return games


class MoneyParams(ParamsModel):
    initial_balance: dict[str, list[int]] = {"A": [1], "B": [1]}
    """Starting balance of each agent, one integer amount per money dimension (paper: 1 unit each)."""
    contracts: dict[str, list[list[int]]] = {"A": [[1]], "B": [[1]]}
    """Contract Cr^i of each payer: the fixed price vectors it may offer for the active agent's Yes
    (one per offer; paper: one offer of 1 unit). An offer is allowed only when the balance covers it
    in every dimension; an accepted offer forces Yes."""

    @model_validator(mode="after")
    def _check(self) -> MoneyParams:
        for key in ("initial_balance", "contracts"):
            if set(getattr(self, key)) != set(AGENTS):
                raise ValueError(f"{key} needs exactly the agents {list(AGENTS)} (got {sorted(getattr(self, key))})")
        dims = {len(v) for v in self.initial_balance.values()} | {len(p) for c in self.contracts.values() for p in c}
        if len(dims) != 1 or 0 in dims:
            raise ValueError(f"every balance and price vector needs the same positive number of money dimensions (got lengths {sorted(dims)})")
        if any(x < 0 for v in self.initial_balance.values() for x in v):
            raise ValueError("initial_balance amounts must be >= 0")
        for agent, offers in self.contracts.items():
            for k, price in enumerate(offers):
                if any(x < 0 for x in price) or not any(price):
                    raise ValueError(f"contracts.{agent}[{k}]: a price needs non-negative amounts, not all zero (got {price})")
        return self


class HelpGameParams(ParamsModel):
    steps: int = Field(20, ge=1)
    """Steps per episode; A is active at steps 1, 3, ... (phase s1), B at steps 2, 4, ... (phase s2)."""
    help_cost: float = Field(1.0, ge=0)
    """Environmental cost to the active agent of Yes."""
    help_benefit: float = Field(100.0, ge=0)
    """Environmental reward to the other agent of the active agent's Yes."""
    money: MoneyParams = MoneyParams()
    """Virtual money of the `transfer` condition (balances never enter the reward)."""


class IQLParams(ParamsModel):
    episodes: int = Field(5000, ge=1)
    """Training episodes per seed (paper: 5000)."""
    seeds: int = Field(20, ge=1)
    """Independent runs, seeds 0..seeds-1, trained batched in one set of arrays (paper: 20)."""
    learning_rate: float = Field(0.1, gt=0, le=1)
    """Tabular Q-learning step size of the first episode."""
    learning_rate_end: float = Field(0.1, gt=0, le=1)
    """Step size after the decay (falls linearly alongside epsilon; equal to learning_rate = constant)."""
    gamma: float = Field(0.5, ge=0, le=1)
    """Discount of each agent's own environmental return (not given in the paper; near 1 the other
    agent's exploratory +100s swamp the cost 1 of Yes and a few greedy choices stay wrong, see README)."""
    epsilon_start: float = Field(1.0, ge=0, le=1)
    """Exploration rate of the first episode."""
    epsilon_end: float = Field(0.01, ge=0, le=1)
    """Exploration rate after the decay."""
    epsilon_decay_fraction: float = Field(0.5, gt=0, le=1)
    """Share of the episodes over which epsilon falls linearly from start to end."""
    late_window: int = Field(100, ge=1)
    """Last training episodes averaged into the late-training return."""
    max_memory: str = "2GiB"
    """Memory limit of the IQL training and its trajectory rows (`2GiB`, `512MiB`, ...): params that
    would take more (estimated from seeds, episodes, steps, the learners of each batch, the money
    balances and `trajectory_every`; the default params: 1.7 GiB) are refused when params load, naming
    the estimate, before any array is allocated."""

    @field_validator("max_memory")
    @classmethod
    def _size(cls, text: str) -> str:
        parse_size(text)  # InputError is a ValueError: pydantic names the key
        return text


class HistoryLearnerParams(ParamsModel):
    enabled: bool = True
    """Also train history-aware IQL on the help game without money (`history_learner` in the metrics),
    in the same batch as the Markov learner: does learning find reciprocity (Yes answered by Yes)?"""
    gammas: list[float] = [0.5, 0.9]
    """Discounts of the history-aware learners (each with `iql.seeds` seeds)."""
    untimed: bool = True
    """Also a learner whose state is the last joint action and the phase only (no step index: the
    finite horizon is unobserved, as in the infinitely repeated game, where reciprocity is an
    equilibrium for gamma x benefit > cost)."""

    @field_validator("gammas")
    @classmethod
    def _unit(cls, gammas: list[float]) -> list[float]:
        if not gammas or any(not 0 <= g <= 1 for g in gammas) or len(set(gammas)) != len(gammas):
            raise ValueError("gammas: one or more distinct discounts in [0, 1]")
        return gammas


class HistoryGameParams(StudyParams):
    equilibria: EquilibriaParams = EquilibriaParams()
    """Exact history-dependent and Markov equilibria of game specs (§2.3, App. B)."""
    game: HelpGameParams = HelpGameParams()
    """The alternating help game of §3.3."""
    iql: IQLParams = IQLParams()
    """Independent Q-learning, run once without and once with money transfer."""
    gamma_sweep: list[float] = [0.8, 0.9, 0.99]
    """Further discounts of the Markov IQL, both conditions, trained in the same batch as `iql.gamma`
    (`money.gamma_sweep` in the metrics): how much the no-money result 0 owes to the discount."""
    history_learner: HistoryLearnerParams = HistoryLearnerParams()
    """IQL whose state includes the last joint action, on the help game without money."""
    trajectory_every: int = Field(1, ge=1)
    """Store the steps of every k-th training episode (and every greedy evaluation step)."""
    curve_log_every: int = Field(25, ge=1)
    """Log every k-th episode of each seed's learning curve to MLflow (the CSV keeps every episode)."""
    workers: int = Field(2, ge=1)
    """Processes the IQL conditions (without / with money) train in, spawned; each seed draws from its own
    generator, so the figures do not depend on this, only the wall time; 1 = one after another in the stage's process."""

    @field_validator("gamma_sweep")
    @classmethod
    def _sweep(cls, gammas: list[float]) -> list[float]:
        if any(not 0 <= g <= 1 for g in gammas) or len(set(gammas)) != len(gammas):
            raise ValueError("gamma_sweep: distinct discounts in [0, 1]")
        return gammas

    def iql_blocks(self, money: bool) -> list[tuple[str, float, str]]:
        """(name, discount, kind of state) of each learner one condition trains in its batch, of
        `iql.seeds` rows each: the reported learner first (the only one whose steps are logged), then
        the sweep's other discounts, then (without money) the history-aware learners."""
        out = [("main", self.iql.gamma, "markov")]
        out += [("sweep", g, "markov") for g in self.gamma_sweep if g != self.iql.gamma]
        h = self.history_learner
        if h.enabled and not money:
            kinds = ["last_action"] + (["last_action_untimed"] if h.untimed else [])
            out += [(k, g, k) for k in kinds for g in h.gammas]
        return out

    @model_validator(mode="after")
    def _iql_fits(self) -> HistoryGameParams:
        """Seeds, episodes, steps and balances size the IQL arrays: refuse them here, before any
        allocation, when the estimate passes iql.max_memory."""
        if self.enabled:
            check_iql_memory(self)
        return self
