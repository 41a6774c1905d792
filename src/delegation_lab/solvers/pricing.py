"""Token prices -> dollars, and the documented token estimate for caches without counts."""

from __future__ import annotations

import math

from delegation_lab.config import Price

CHARS_PER_TOKEN = 4.0
"""Estimate used when a backend or an imported cache gives no token counts: ~4 characters per
token, the usual rule of thumb for English BPE vocabularies (OpenAI's tokenizer guide)."""


def cost_usd(tokens_in: int, tokens_out: int, price: Price) -> float:
    return (tokens_in * price.input_usd_per_mtok + tokens_out * price.output_usd_per_mtok) / 1e6


def estimate_tokens(text: str | None) -> int:
    if not text:
        return 0
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def messages_tokens(messages: list[dict[str, str]]) -> int:
    """Estimated prompt tokens of a chat: content plus ~4 tokens of framing per message."""
    return sum(estimate_tokens(m.get("content", "")) + 4 for m in messages)
