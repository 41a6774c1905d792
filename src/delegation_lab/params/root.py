"""Typed models of params.yaml: one model per section, validated before any stage does work.

Every field carries a docstring; `dlab params docs` renders them into docs/params.md and a test
keeps that file current. A bad key fails with its dotted path and the keys that are valid there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import Field, ValidationError, field_validator, model_validator

from delegation_lab.coordinator.params import CoordinatorParams
from delegation_lab.credit.params import CreditParams
from delegation_lab.data.params import DataParams
from delegation_lab.embeddings import EmbedParams
from delegation_lab.evaluation.params import EvaluationParams
from delegation_lab.games.params import HistoryGameParams
from delegation_lab.labeling import AUTO, MATCHERS
from delegation_lab.margent.params import MargentParams
from delegation_lab.market.params import MarketParams
from delegation_lab.params import work_size
from delegation_lab.errors import short_repr
from delegation_lab.games.limits import parse_size
from delegation_lab.params.model import ConfigError, ParamsModel, YAMLRefused, dotted, load_yaml, read_config_text
from delegation_lab.redref.params import RedrefParams
from delegation_lab.routers.params import RoutersParams
from delegation_lab.solvers.params import SolverParams

_SOLVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")


# --------------------------------------------------------------------------------------------
# labels, ability map, tracking


class JudgeParams(ParamsModel):
    solver: SolverParams
    """The judge: any solver config, asked with role `judge` (its tokens never enter a policy's cost)."""
    sample_size: int = Field(300, ge=0)
    """Answers per solver judged for the agreement report (every answer when label.method is judge)."""
    seed: int = 0
    """Seed of the agreement sample."""


class LabelParams(ParamsModel):
    method: Literal["programmatic", "judge"] = "programmatic"
    """Which verdict becomes `correct`: exact matching against gold, or the judge."""
    use_imported: bool = True
    """When a replayed answer brings its cache's own correctness label, keep it (method `imported`)."""
    numeric_tolerance: float = Field(1e-6, ge=0)
    """Relative tolerance when matching numeric answers."""
    matcher: Literal[(AUTO, *MATCHERS.names())] = AUTO  # type: ignore[valid-type]
    """How the programmatic label compares an answer with gold, for items whose `answer_format` column
    does not say (it wins where set): `numeric` the parsed number within `numeric_tolerance` (a gold
    that is not a number must equal the parsed answer exactly), `choice` the option letter, `math`
    equivalence by math-verify (`\\frac{1}{2}` = `0.5`, `2\\sqrt{2}` = `\\sqrt{8}`, intervals, sets, lists:
    `2, -1` = `-1, 2`; the reply's last `\\boxed{}`, else the parsed answer), `grid` every cell of a logic
    puzzle's solution grid (ZebraLogic), `literal` equal Python literals (CRUXEval outputs). `auto`:
    `choice` for items with choices, `math` for a gold that is an expression or a list but not a plain
    number (LaTeX, or digits, operators, commas, brackets and one-letter variables), else `numeric`. A
    comma is a thousands separator only between groups of three digits (`1,234`): a list is never read
    as a number (`2, 5` is not 25), so a list answer to a numeric gold is wrong."""
    math_timeout_s: int = Field(2, ge=1)
    """Seconds math-verify may spend on each parse or comparison of one `math` answer; an answer past it
    is wrong and counted in metrics/labels.json (`agreement.math_matcher.timeouts`)."""
    judge: JudgeParams
    """The offline LLM judge and its agreement sample."""


class AbilityMapParams(ParamsModel):
    bucket_by: Literal["difficulty", "domain"] = "difficulty"
    """Key of the map's buckets: the item's difficulty, or its domain (MMLU-style subjects; buckets
    numbered by domain name in sorted order, `bucket_edges` ignored but still kept in params.yaml:
    the coordinator stage names it, and DVC refuses a stage whose named key the file lacks)."""
    bucket_edges: list[int] | None = None
    """Lower edges of difficulty buckets (e.g. [1, 3, 5] -> 1-2, 3-4, 5+); null = one bucket per difficulty."""
    confidence: float = Field(0.95, gt=0, lt=1)
    """Coverage of the Wilson interval."""

    @field_validator("bucket_edges")
    @classmethod
    def _sorted(cls, edges: list[int] | None) -> list[int] | None:
        if edges is not None and (not edges or edges != sorted(set(edges))):
            raise ValueError("bucket_edges must be a non-empty strictly increasing list")
        return edges


class TrackingParams(ParamsModel):
    uri: str = "sqlite:///mlflow.db"
    """MLflow tracking URI; a relative sqlite path is resolved against the repository root."""
    enabled: bool = True
    """Log runs to MLflow (false: stages still write every file output)."""
    ui_url: str = "http://127.0.0.1:5000"
    """Address of the MLflow UI the dashboard links runs to (`<ui_url>/#/runs/<run_id>`); the default is
    where a local `mlflow ui` listens."""
    series_points: int = Field(30, ge=2)
    """Most points per logged curve (means over equal runs of steps, each at its last step); the full curves are each run's `curves.parquet` artifact. 30 keeps the default DAG's store well under 50 MB (50 gave 50.5 MB)."""
    keep_runs: int = Field(1, ge=1)
    """Runs of a stage kept in the store: a stage run that finishes hard-deletes the older runs of its stage and DVC experiment (and their children; other `dvc exp` experiments keep theirs); `dlab runs prune` does it for every stage."""


class ProjectParams(ParamsModel):
    repo: str = "."
    """The repository (its `stages/` and `src/`) relative to this params file's folder: `.` for the
    embedded default, `../..` for `experiments/<name>/`. The DAG is written once, in the root
    `dvc.yaml` (each experiment's `dvc.yaml` is a link to it), and finds the stage scripts and the
    code it depends on through this key, so it must be spelled out in every params.yaml."""

    @field_validator("repo")
    @classmethod
    def _relative(cls, repo: str) -> str:
        if not repo or Path(repo).is_absolute():
            raise ValueError("give the repository relative to this params file's folder, e.g. `.` or `../..`")
        return repo


class CascadeNoise(ParamsModel):
    seeds: int = Field(5, ge=1)
    """Verifier seeds per cascade (0 .. seeds-1, the same common random numbers every study's seed k
    sees); each is a point, their spread and the bootstrap over seeds x items give the interval.
    The verifier itself is `evaluation.verifier`."""
    max_length: int = Field(4, ge=2)
    """Most solvers in one cost-ordered cascade. 4 keeps every cascade of the default DAG's 3 solvers
    (and of any set of up to 4); the search's time grows linearly with it."""
    beam: int = Field(16, ge=1)
    """Above `frontier.exhaustive_limit`: prefixes kept per cascade length and extended by every more
    expensive solver, the best by Pareto layer of (cost, accuracy) of the cascade that stops at its
    last member on `search_split` (non-dominated first, spread along cost within a layer). At most
    beam x solvers x (max_length - 1) cascades are tried."""
    search_split: Literal["ability", "train", "test"] = "train"
    """Split the cascade search scores its candidates on (above `frontier.exhaustive_limit`); the
    cascades it keeps (those not dominated there) are then measured on `frontier.split`. It must not
    be `frontier.split` (an error): the best of many cascades chosen on the items it is reported on
    would flatter the reported points. `train` by default: labeled for every solver, disjoint from
    the held-out `test`, the items every study learns on (what a deployer chooses with), and larger
    than `ability` (the ability map's sample). Its solvers must be those of `frontier.split`."""


class FrontierParams(ParamsModel):
    split: Literal["ability", "train", "test"] = "test"
    """Split every point of the frontier is measured on (held-out items)."""
    mixture_points: int = Field(9, ge=0)
    """Random-mixture operating points between two solvers (p = 1/(k+1) ... k/(k+1)): on every pair
    while the frontier is exhaustive, else on the segments of the singles' efficient convex hull only."""
    cascade: CascadeNoise = CascadeNoise()
    """Cheap-to-expensive cascades that escalate when the shared verifier rejects an answer."""
    exhaustive_limit: int = Field(64, ge=0)
    """While the cost-ordered cascades of up to `cascade.max_length` solvers number at most this (with
    max_length 4: 3 solvers 4 cascades, 6 solvers 50, 7 solvers 91), the frontier is built in full on `split`: every cascade, random
    mixtures of every pair of solvers, an interval on every point. Above it: cascades searched on
    `cascade.search_split` (`cascade.beam`), mixtures only on the efficient hull's segments, intervals
    only on the Pareto set and each method's best point (others null)."""
    cpt_levels: list[float] = [0.5, 0.8]
    """PGR levels for RouteLLM's call-performance thresholds CPT(x)."""

    @model_validator(mode="after")
    def _search_elsewhere(self) -> FrontierParams:
        if self.cascade.search_split == self.split:
            raise ValueError(f"cascade.search_split {self.split!r} is frontier.split too: cascades chosen on the items "
                             "they are reported on look better than they are; set frontier.cascade.search_split to another split")
        return self


class PortfolioParams(ParamsModel):
    max_k: int = Field(5, ge=1)
    """Largest portfolio: for k = 1 .. max_k the k models (and their arrangement) are chosen."""
    beam: int = Field(16, ge=1)
    """(k-1)-model portfolios kept, by Pareto layer of (cost, accuracy) on `select_split`, and each
    extended by every other model to make the k-model candidates (a greedy beam: at most
    beam x models cascades per k, never every subset)."""
    select_split: Literal["ability", "train", "test"] = "train"
    """Split the portfolios are chosen on; they are reported on `frontier.split`, which it must not be
    (an error): the best of many portfolios chosen on the items it is reported on would flatter it."""
    router: Literal["knn"] | None = "knn"
    """Router tried as an arrangement of every k-set the cascade beam shortlists (k >= 2), at each cost
    weight of its `routers` sweep, with the routers study's settings (`routers.knn`); it reads the
    `embed` stage's vectors of both splits. kNN only: its predictions for k models are the k columns of
    one fit on all models, so no k-set is fitted on its own. null = singles and cascades only."""
    router_folds: int = Field(5, ge=2)
    """Folds of `select_split` (by a hash of item_id): there each item is routed by the router fitted on
    the other folds, so routers are chosen on the cascades' items but never on their own training
    items; on `frontier.split` the router is fitted on the whole `select_split`."""
    cv_folds: int = Field(5, ge=2)
    """Cross-validation folds of `select_split` that choose k (items ranked by a hash of item_id, dealt
    round robin; at most its item count): the selection is rerun on all folds but one and each k's
    pick scored on that one. The `cross_validation` choice is the smallest k whose held-out accuracy
    (less `model_penalty`) is within one standard error (over items) of the best k's (docs/portfolio.md);
    it is reported beside the greedy one (the most accurate chosen portfolio on the whole split),
    which overfits it."""
    model_penalty: float = Field(0.0, ge=0.0, le=1.0)
    """Accuracy charged per model beyond the first when k is chosen by cross-validation (0.01: each
    added model must buy one point of held-out accuracy), for a deployer who prices each model's
    upkeep; 0: the one standard error rule alone."""


class LimitsParams(ParamsModel):
    """Bounds on what params may ask of the studies, checked when params load (`work_size`)."""

    max_memory: str = "8GiB"
    """Most memory any study's params may need (`8GiB`, `512MiB`, ...): coordinator, market, credit,
    redref, margent, routers, frontier and the evaluation intervals are each estimated from the keys
    that size them (seeds, episodes, rounds, iterations, resamples, items; docs/scaling.md) and refused
    above it, naming the keys and the estimate, before any array is allocated (the committed
    params.yaml: ~5.6 GiB at most, the market study). history_game has its own bound,
    `history_game.iql.max_memory`."""
    max_work: int = Field(100_000_000_000, ge=1)
    """Most work units any study's params may ask for (lane steps, rollout samples x epochs, item x
    resample cells, ...: docs/scaling.md), so that a seeds or episodes count off by orders of magnitude
    is refused instead of running for days."""

    @field_validator("max_memory")
    @classmethod
    def _size(cls, text: str) -> str:
        parse_size(text)  # InputError is a ValueError: pydantic names the key
        return text


# --------------------------------------------------------------------------------------------
# root


class Params(ParamsModel):
    project: ProjectParams = ProjectParams()
    """Where this project's folder sits in the repository (the one DAG's stage scripts)."""
    data: DataParams = DataParams()
    """Datasets and splits (stage `prepare`)."""
    solvers: dict[str, SolverParams]
    """Frozen solvers by name (stage `solve` answers every item with each, one answer cache per solver)."""
    label: LabelParams
    """Offline correctness labels (stage `label`)."""
    ability_map: AbilityMapParams = AbilityMapParams()
    """Per-solver success by difficulty bucket (stage `ability_map`)."""
    tracking: TrackingParams = TrackingParams()
    """MLflow tracking."""
    frontier: FrontierParams = FrontierParams()
    """The shared cost-accuracy frontier (stage `frontier`)."""
    portfolio: PortfolioParams = PortfolioParams()
    """Which k models, in which arrangement, to deploy (stage `portfolio`, `dlab portfolio`)."""
    evaluation: EvaluationParams = EvaluationParams()
    """One evaluation protocol for every method: the shared verifier and the intervals (every study and the frontier)."""
    history_game: HistoryGameParams = HistoryGameParams()
    """History-dependent equilibria and virtual money transfer, History Matters §2.3-§3.3 (stage `history_game`)."""
    margent: MargentParams = MargentParams()
    """MARGENT (seed 001): interventional collection, distillation, learned delegate-or-commit manager (stages `margent_*`)."""
    redref: RedrefParams = RedrefParams()
    """REDEREF (seed 003): training-free belief-guided delegation (stage `redref`)."""
    market: MarketParams = MarketParams()
    """Sequential-auction markets, seed 004 (stage `market`)."""
    coordinator: CoordinatorParams = CoordinatorParams()
    """DQN coordinator under management and delegation rules, History Matters §3.1-3.2 (stage `coordinator`)."""
    credit: CreditParams = CreditParams()
    """SHARP (seed 002): Shapley credit for planner-worker teams, agent-normalised GRPO, the p-sweep (stage `credit`)."""
    embed: EmbedParams = EmbedParams()
    """Question embeddings and text features of every item (stage `embed`)."""
    routers: RoutersParams = RoutersParams()
    """The field's routers, every one registered in `routers.ROUTERS` (kNN, MLP, MF, cluster, threshold,
    learned cascade, RouterDC, Avengers-Pro, ...; stage `routers`), routing among every solver in
    `solvers`, however many (no count is refused)."""
    limits: LimitsParams = LimitsParams()
    """Memory and work bounds every study's params are checked against when they load (docs/scaling.md)."""

    @field_validator("solvers")
    @classmethod
    def _names(cls, solvers: dict[str, SolverParams]) -> dict[str, SolverParams]:
        if not solvers:
            raise ValueError("at least one solver is needed")
        for name in solvers:
            if not _SOLVER_NAME.match(name):
                raise ValueError(f"solver name {name!r}: use a letter then letters, digits, '_' or '-', at most 32 characters")
        return solvers

    @model_validator(mode="after")
    def _portfolio_elsewhere(self) -> Params:
        if self.portfolio.select_split == self.frontier.split:
            raise ValueError(f"portfolio.select_split {self.frontier.split!r} is frontier.split too: portfolios chosen on the "
                             "items they are reported on look better than they are; set portfolio.select_split to another split")
        return self

    @model_validator(mode="after")
    def _solver_sets(self) -> Params:
        """Every study's solver subset against `solvers`, and the limits the methods need (one line each)."""
        solvers = list(self.solvers)
        problems = []
        if self.coordinator.enabled:
            problems += self.coordinator.solver_set_problems(solvers)
        if self.market.enabled and self.market.answers.enabled:
            problems += subset_problems("market.answers.solvers", self.market.answers.solvers, solvers, least=1)
        if self.redref.enabled and self.redref.cached.enabled:
            problems += subset_problems("redref.cached.solvers", self.redref.cached.solvers, solvers, least=2)
        if self.routers.enabled:
            for key in ("strong", "weak"):
                name = getattr(self.routers.threshold, key)
                problems += subset_problems(f"routers.threshold.{key}", None if name is None else [name], solvers, least=1)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @model_validator(mode="after")
    def _work_fits(self) -> Params:
        """Every study's size against `limits` (one line each), before any stage allocates it; after the
        solver-set checks (pydantic runs these in order), which a size of an impossible set would hide."""
        problems = work_size.problems(self)
        if problems:
            raise ValueError("\n".join(problems))
        return self


def subset_problems(key: str, names: list[str] | None, solvers: list[str], least: int) -> list[str]:
    """A study's named subset of `solvers` (null = all of them): known names, distinct, at least `least`."""
    if names is None:
        return []
    unknown = [s for s in names if s not in solvers]
    if unknown:
        return [f"{key}: unknown solver(s) {unknown}; params `solvers` defines {solvers}"]
    if len(set(names)) != len(names):
        return [f"{key}: names repeat in {names}"]
    if len(names) < least:
        return [f"{key}: needs at least {least} solvers, got {names}"]
    return []


# --------------------------------------------------------------------------------------------
# loading


def _valid_keys(model: type, loc: tuple[Any, ...]) -> list[str] | None:
    """Field names of the model that sits at `loc` (the parent of an unknown key)."""
    current: Any = model
    for part in loc:
        origin = get_origin(current)
        if origin is dict:
            current = get_args(current)[1]
            continue
        if origin is not None:  # Optional[...] / unions: take the model member
            members = [a for a in get_args(current) if isinstance(a, type) and issubclass(a, ParamsModel)]
            current = members[0] if members else None
        if not (isinstance(current, type) and issubclass(current, ParamsModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        current = field.annotation
    origin = get_origin(current)
    if origin is not None:
        members = [a for a in get_args(current) if isinstance(a, type) and issubclass(a, ParamsModel)]
        current = members[0] if members else None
    if isinstance(current, type) and issubclass(current, ParamsModel):
        return list(current.model_fields)
    return None


def explain(error: ValidationError, model: type = Params) -> list[str]:
    problems = []
    for err in error.errors():
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            keys = _valid_keys(model, loc[:-1])
            hint = f"; valid keys here: {', '.join(keys)}" if keys else ""
            problems.append(f"{dotted(loc)}: unknown key{hint}")
        elif err["type"] == "missing":
            problems.append(f"{dotted(loc)}: required key is missing")
        elif err["type"] == "value_error" and not loc:  # Params' cross-section checks name their keys, one line each
            problems += str(err["ctx"]["error"]).splitlines()
        elif err["type"] == "value_error" and isinstance(err.get("input"), dict):  # a section's own check names its keys
            problems.append(f"{dotted(loc)}: {err['msg'].removeprefix('Value error, ')}")
        elif not loc:  # another check across sections: its message names the keys; the input is the whole file
            problems.append(err["msg"].removeprefix("Value error, "))
        else:
            problems.append(f"{dotted(loc)}: {err['msg']} (got {short_repr(err.get('input'))})")
    return problems


def parse_params(raw: Any, source: str = "params.yaml") -> Params:
    if not isinstance(raw, dict):
        raise ConfigError(source, ["(top level): expected a mapping of sections"])
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(source, explain(e)) from None


def read_yaml(path: Path) -> Any:
    text = read_config_text(path)
    try:
        return load_yaml(text)
    except YAMLRefused as e:
        raise ConfigError(str(path), [str(e)]) from None


def load_params(path: str | Path = "params.yaml") -> Params:
    path = Path(path)
    return parse_params(read_yaml(path), str(path))


def deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out
