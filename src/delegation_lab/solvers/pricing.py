"""Token prices -> dollars, the documented token estimate for caches without counts, and the one
log-normal token-count draw every simulated backend uses (solvers, REDEREF, MARGENT)."""

from __future__ import annotations

import math

import numpy as np

from delegation_lab.solvers.params import Price

CHARS_PER_TOKEN = 4.0
"""Estimate used when a backend or an imported cache gives no token counts: ~4 characters per
token, the usual rule of thumb for English BPE vocabularies (OpenAI's tokenizer guide)."""

MAX_CHARS_PER_TOKEN = 32.0
"""The most characters a reported token count may stand for on average: BPE vocabularies' longest
common tokens (runs of spaces, repeated punctuation) are about this long, so a count implying more
(a 200 MB answer billed as 1 token) is the server's mistake and is replaced by the estimate."""


def cost_usd(tokens_in: int, tokens_out: int, price: Price) -> float:
    return (tokens_in * price.input_usd_per_mtok + tokens_out * price.output_usd_per_mtok) / 1e6


def estimate_tokens(text: str | None) -> int:
    if not text:
        return 0
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


def messages_tokens(messages: list[dict[str, str]]) -> int:
    """Estimated prompt tokens of a chat: content plus ~4 tokens of framing per message."""
    return sum(estimate_tokens(m.get("content", "")) + 4 for m in messages)


def lognormal_tokens(rng: np.random.Generator, mean: float | np.ndarray, cv: float) -> np.ndarray:
    """Token counts drawn log-normal with the given mean and coefficient of variation, rounded to
    whole tokens, at least 1 (cv 0: the rounded mean). One draw per element of `mean`, from `rng`."""
    mean = np.asarray(mean, dtype=np.float64)
    if cv == 0:
        return np.maximum(1.0, np.round(mean))
    mu, sigma = _lognormal_params(mean, cv)
    return np.maximum(1.0, np.round(rng.lognormal(mu, sigma)))


def lognormal_tokens_from_normals(z: np.ndarray, mean: float, cv: float) -> np.ndarray:
    """The same distribution from given standard normals `z` (keyed draws instead of a generator)."""
    if cv == 0:
        return np.full(np.shape(z), max(1.0, float(np.round(mean))))
    mu, sigma = _lognormal_params(np.float64(mean), cv)
    return np.maximum(1.0, np.round(np.exp(mu + sigma * np.asarray(z))))


def _lognormal_params(mean: np.ndarray, cv: float) -> tuple[np.ndarray, float]:
    """mu, sigma of the log so that E[X] = mean and sd(X) / E[X] = cv."""
    sigma2 = math.log1p(cv * cv)
    return np.log(mean) - sigma2 / 2, math.sqrt(sigma2)
