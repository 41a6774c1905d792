"""The one boundary for what an endpoint says about a reply, shared by the solve stage
(`openai_compat`, every `Solver` row) and `dlab serve` (whole replies and streams): text that UTF-8
can store, and token counts that are whole, finite, non-negative and plausible for the text.

A count is implausible when it packs more than MAX_CHARS_PER_TOKEN characters into a token (a
200 MB answer billed as 1 token) or is more than the request could have taken (prompt tokens past
the prompt's UTF-8 bytes plus framing; completion tokens past the larger of `max_tokens` and the
reply's bytes, doubled: `usage.completion_tokens: 1e30` for the reply `#### 42`). It is replaced by
the estimate (`pricing.estimate_tokens`), the row flagged `tokens_estimated` with the reported value
kept in `extra`. A cost that is not a finite, non-negative number is dropped (priced from tokens)
and flagged `cost_estimated`. Valid counts pass unchanged, so nothing valid is priced differently.
"""

from __future__ import annotations

import math
from typing import Any

from delegation_lab.solvers.base import Generation, Request
from delegation_lab.solvers.storable_text import clean_text
from delegation_lab.solvers.pricing import MAX_CHARS_PER_TOKEN, estimate_tokens, messages_tokens

PROMPT_FRAMING_TOKENS = 4096
"""Tokens a server may add to a prompt beyond its text (chat template, a default system prompt)."""
INT64_MAX = 2**63 - 1


def token_count(value: Any) -> int | None:
    """A token count as reported: a non-negative whole number within int64, else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        return None
    return int(value) if 0 <= value <= INT64_MAX else None


def usage_limits(request: Request, text: str, max_tokens: int) -> dict[str, tuple[int, int]]:
    """(lowest, highest) plausible count of each of tokens_in / tokens_out for this request and reply."""
    prompt = [clean_text(m.get("content")) or "" for m in request.messages]
    prompt_chars = sum(len(p) for p in prompt)
    prompt_bytes = sum(len(p.encode()) for p in prompt)
    return {
        "tokens_in": (math.ceil(prompt_chars / MAX_CHARS_PER_TOKEN),
                      prompt_bytes + 64 * len(request.messages) + PROMPT_FRAMING_TOKENS),
        "tokens_out": (math.ceil(len(text) / MAX_CHARS_PER_TOKEN), 2 * max(max_tokens, len(text.encode())) + 64),
    }


def checked_generation(gen: Generation, request: Request, max_tokens: int) -> Generation:
    """`gen` with what an endpoint may say checked before anything is priced, stored or sent: text
    with lone surrogates replaced (flagged `text_replaced`); token counts that are missing (None),
    not whole, finite, non-negative numbers, or outside `usage_limits`, replaced by the estimate
    (0 on an error row), flagged `tokens_estimated` with the reported number kept; a cost that is
    not finite and non-negative dropped (priced from tokens) and flagged `cost_estimated`."""
    extra = dict(gen.extra)
    update: dict[str, Any] = {}
    for name in ("text", "error", "parsed_answer"):
        value = getattr(gen, name)
        cleaned = clean_text(value)
        if cleaned is not value:
            update[name] = cleaned
            extra["text_replaced"] = True
    text = update.get("text", gen.text) or ""
    limits = usage_limits(request, text, max_tokens)
    estimates = {"tokens_in": lambda: messages_tokens(request.messages), "tokens_out": lambda: estimate_tokens(text)}
    for name, (low, high) in limits.items():
        reported = getattr(gen, name)
        count = token_count(reported)
        if count is None or not low <= count <= high:
            update[name] = 0 if gen.error is not None else estimates[name]()
            extra["tokens_estimated"] = True
            if reported is not None:
                extra[f"reported_{name}"] = reported if count is not None else repr(reported)
        elif count is not reported:
            update[name] = count
    if gen.cost_usd is not None and not (isinstance(gen.cost_usd, (int, float)) and math.isfinite(gen.cost_usd)
                                         and gen.cost_usd >= 0):
        update["cost_usd"] = None
        extra.update(cost_estimated=True, reported_cost_usd=repr(gen.cost_usd))
    if not update and extra == gen.extra:
        return gen
    return gen.model_copy(update={**update, "extra": extra})
