"""The `replay` backend: each request is answered with the cache's answer of `source_model` to the
same (normalised) question, with provenance; no model is called. Where the layout parsed the reply
itself (a `parsed_answer` column: zeroeval) that answer is the parsed answer, a null one meaning the
reply holds none (never re-parsed by the prompt template); where it brings a
score (`score`), answers.extra keeps it as `imported_score` beside `imported_correct`. A reasoning model's
hidden tokens (`replay.hidden_reasoning`) are added to the reply's output tokens and flagged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.params import SCORE_THRESHOLD, Price, ReplayParams, SolverParams
from delegation_lab.solvers.pricing import estimate_tokens, messages_tokens
from delegation_lab.solvers.replay.cache import ModelIndex, ReplayCache, load_cache, normalise_question
from delegation_lab.solvers.replay.records import ReplayError


class ReplayBackend:
    """Answers each request with the cache's answer of `source_model` to the same question."""

    @classmethod
    def from_params(cls, name: str, params: SolverParams) -> ReplayBackend:
        """The backend of solver `name` (`solvers.BACKENDS` builds every backend this way)."""
        return cls(params.replay, params.price)

    def __init__(self, params: ReplayParams, price: Price):
        if params is None:
            raise ReplayError("backend is 'replay' but the solver has no `replay:` section (path, format, source_model)")
        self.params = params
        self.price = price
        self.path = Path(params.path)

    def cache(self) -> ReplayCache:
        return load_cache(self.params.path, self.params.format, self.params.fields, self.params.trust_pickle,
                          self.params.score_threshold)

    def fingerprint(self) -> dict[str, Any]:
        out = {
            "format": self.params.format,
            "source_model": self.params.source_model,
            "sha256": self.cache().sha256,
        }
        if self.params.score_threshold != SCORE_THRESHOLD:  # only then: today's request hashes stay as they are
            out["score_threshold"] = self.params.score_threshold
        if self.params.hidden_reasoning is not None:
            out["hidden_reasoning_tokens"] = self.params.hidden_reasoning.tokens_per_item
        return out

    def generate(self, requests: list[Request]) -> list[Generation]:
        index = self.cache().index(self.params.source_model)
        return [self._generation(r, index) for r in requests]

    def _generation(self, request: Request, index: ModelIndex) -> Generation:
        row = index.rows.get(normalise_question(request.item.question))
        if row is None:
            return Generation(text=None, error=f"no answer in replay cache {self.path} for this question")
        extra: dict[str, Any] = {
            "replay_source_index": row["source_index"],
            # provenance: which file (and which bytes) the answer came from, whose it is, and the price's source
            "replay_source_file": row["source_file"],
            "replay_source_sha256": row["source_sha256"],
            "replay_source_model": row["model"],
            "price_source": self.price.source,
        }
        if row["correct"] is not None:
            extra["imported_correct"] = bool(row["correct"])
        if row.get("score") is not None:  # the source's own score in [0, 1] (LLMRouter's F1, pass rate)
            extra["imported_score"] = float(row["score"])
        response = row["response"]
        if response is None:
            return Generation(
                text=None, extra=extra,
                error=f"replay cache {self.path} has no response of {self.params.source_model} for this question",
            )
        tokens_in, tokens_out = row["tokens_in"], row["tokens_out"]
        if tokens_in is None or tokens_out is None:
            extra["tokens_estimated"] = True
            if tokens_in is None:
                tokens_in = messages_tokens(request.messages)
            if tokens_out is None:
                tokens_out = estimate_tokens(response)
        cost = row["cost_usd"]
        hidden = self.params.hidden_reasoning
        if hidden is not None:  # billed as output, beside the visible reply the file holds (solvers/reasoning.py)
            tokens_out += hidden.tokens_per_item
            if cost is not None:
                cost += hidden.tokens_per_item * self.price.output_usd_per_mtok / 1e6
            extra.update(reasoning_tokens=hidden.tokens_per_item, reasoning_tokens_estimated=True,
                         reasoning_tokens_source=hidden.source)
        return Generation(
            text=response, tokens_in=int(tokens_in), tokens_out=int(tokens_out),
            cost_usd=cost, parsed_answer=row.get("parsed_answer"), source_parsed="parsed_answer" in row,
            extra=extra,
        )


def missing_answers_advice(name: str, params: ReplayParams, count: int, examples: list[str] = ()) -> str:
    """What to do about `count` error rows of replayed solver `name`: the cache holds no answer for those
    items (no row for the question, or a row with no reply), so `--retry-errors` would read the same
    cache again and `data.dataset: replay` changes nothing either."""
    shown = f" (e.g. item {', '.join(examples[:3])})" if examples else ""
    return (f"replay cache {params.path} has no answer of {params.source_model!r} for {count} item(s){shown}; they count "
            "as wrong (rerunning reads the same cache): re-import a cache that answers them, leave those questions "
            f"out of the dataset, or drop solver {name}")
