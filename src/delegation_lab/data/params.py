"""The `data` section of params.yaml: which dataset builds the items (a name registered in
`data.DATASETS`), its split sizes, and one sub-section per dataset."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from delegation_lab.data import DATASETS
from delegation_lab.params.model import ParamsModel
from delegation_lab.solvers.params import LongTableFields, ReplayFormat, score_threshold_field

DatasetName = DATASETS.choices()
"""Datasets `data.dataset` can name: the names registered in `data.DATASETS`."""


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


class ReplayDatasetParams(ParamsModel):
    path: str = ""
    """The cache: a file, a folder (every file of the format inside, recursively) or a glob such as `mmlu/*.csv`."""
    format: ReplayFormat = "routellm_csv"
    """Layout of the cache files."""
    fields: LongTableFields = LongTableFields()
    """Field names of a `long_table` cache, or the fields that stand in for a `zeroeval` task's own
    (refused by the other formats)."""
    difficulty_column: str | None = None
    """Cache column used as integer difficulty; null = GSM8K's difficulty where items match it, else buckets by domain."""
    gsm8k_path: str | None = None
    """GSM8K folder (train.jsonl, test.jsonl): replayed questions found there take its difficulty and gold; null = not used."""
    eval_name: str | None = None
    """RouterBench only: keep rows of this eval_name; null = all."""
    trust_pickle: bool = False
    """RouterBench only: allow unpickling the cache file. Unpickling runs arbitrary code: set it only
    for a pickle you trust (a routerbench_pickle is refused without it)."""
    score_threshold: float = score_threshold_field()
    """Where the cache grades an answer with a score rather than True/False: a score at or above this
    counts as correct (as `solvers.<name>.replay.score_threshold`; keep the two equal)."""


class ServedDatasetParams(ParamsModel):
    project: str = "."
    """Project folder whose `data/served/` `dlab serve --root` journalled into (relative to this project)."""
    gold_path: str | None = None
    """JSONL file of {"question": ..., "gold": ...} rows giving gold answers to served questions (wins over a
    client's `metadata.gold`); null = only the gold clients sent. Questions without gold are dropped unless
    `allow_missing_gold` (then they need a judge)."""


# pool item k and test item 10_000_000 + k must never meet; a million items is ~2 GB of Item objects
ARITH_MAX_ITEMS = 1_000_000


class DataParams(ParamsModel):
    dataset: DatasetName = "arith"
    """Which loader builds the items; its section below configures it."""
    seed: int = 0
    """Seed for generation and for the seeded split."""
    split: Literal["seeded", "as_published"] = "seeded"
    """How `data.dataset: replay` splits the cache's questions: `seeded` draws ability / train / test by
    `seed` and the sizes; `as_published` keeps the split the cache publishes (its `source_split`:
    LLMRouter's and LLMRouterBench's split files and folders, a `split` column): its test questions are
    the test split (`test_size` of them, drawn by `seed`, or all), ability and train are drawn from its
    train questions. `dlab params check` refuses a cache that publishes no split."""
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
    """A solver-answer cache standing as its own dataset (gold from GSM8K or from the cache where it brings one, else labels imported)."""
    served: ServedDatasetParams = ServedDatasetParams()
    """The requests `dlab serve` answered (docs/serving.md): one item per conversation, the served answers adopted by solve."""
    allow_missing_gold: bool = False
    """jsonl / parquet / served: keep a row whose gold field is missing or null (its labels then need a
    judge or imported correctness); false = such a row fails naming the file and line. A table with
    `fields.gold: null` has no gold by design and needs no permission."""

    @model_validator(mode="after")
    def _published_split_is_replays(self) -> DataParams:
        if self.split == "as_published" and self.dataset != "replay":
            raise ValueError(
                f"data.split: as_published keeps a replayed cache's own split, but data.dataset is {self.dataset!r} "
                "(gsm8k and aqua_rat always test on their published test split; a jsonl / parquet table names its "
                "split column in data.table.fields.split)"
            )
        return self

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

    def split_sizes(self) -> dict[str, int | None]:
        """The keyword arguments of `items.take_splits` these params set."""
        return {"ability_size": self.ability_size, "train_size": self.train_size, "test_size": self.test_size,
                "seed": self.seed}
