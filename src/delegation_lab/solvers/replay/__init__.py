"""The `replay` backend: answers imported from another benchmark's cache, so every policy can run on
real model outputs without calling a model.

Each cache layout (`format`) is one module here, registered below in `FORMATS`: its `CacheFormat`
reads one file into the normalised frame (`records.CACHE_COLUMNS`, plus extra columns a source has,
such as RouterBench's `eval_name`), one row per (question, model). A cache (`path`) is one file, a
folder (every file of the format inside it, recursively) or a glob; each row records its
`source_file`, that file's `source_sha256`, and a `domain`: what the layout says (RouterArena's
dataset prefix, LLMRouterBench's dataset folder, RouterBench's eval_name, LLMRouter's task), else
the file's stem when the cache has several files, else "replay". Items find their row by
`cache.normalise_question(question)`.

Modules: `records` (what every reader shares), `cache` (loading, provenance, the question key),
`backend` (`ReplayBackend`), `import_report` and `relabel` (`dlab import`: our labeler beside the
cache's labels), `json_reply` (the answer of a reply asked for a JSON block), `routerbench` (the
wide frame both RouterBench formats read), and one per format. A score that is not a boolean
counts as correct when it is >= `score_threshold` (0.5 unless a replay section or `dlab import
--score-threshold` says otherwise); the raw score is kept in a `score` column. Adding a format:
docs/registries.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from delegation_lab.registry import Registry

if TYPE_CHECKING:
    from delegation_lab.solvers.replay.records import CacheFormat

FORMATS: Registry[CacheFormat] = Registry("replay format", "replay.format")
FORMATS.register("routellm_csv", "delegation_lab.solvers.replay.routellm_csv:ROUTELLM_CSV")
FORMATS.register("routellm_mt_bench", "delegation_lab.solvers.replay.routellm_mt_bench:ROUTELLM_MT_BENCH")
FORMATS.register("routerbench_pickle", "delegation_lab.solvers.replay.routerbench_pickle:ROUTERBENCH_PICKLE")
FORMATS.register("routerbench_csv", "delegation_lab.solvers.replay.routerbench_csv:ROUTERBENCH_CSV")
FORMATS.register("llmrouterbench_json", "delegation_lab.solvers.replay.llmrouterbench_json:LLMROUTERBENCH_JSON")
FORMATS.register("routerarena_jsonl", "delegation_lab.solvers.replay.routerarena_jsonl:ROUTERARENA_JSONL")
FORMATS.register("long_table", "delegation_lab.solvers.replay.long_table:LONG_TABLE")
FORMATS.register("parquet", "delegation_lab.solvers.replay.parquet:PARQUET")
FORMATS.register("zeroeval", "delegation_lab.solvers.replay.zeroeval:ZEROEVAL")
FORMATS.register("llmrouter", "delegation_lab.solvers.replay.llmrouter:LLMROUTER")

__all__ = ["FORMATS"]
