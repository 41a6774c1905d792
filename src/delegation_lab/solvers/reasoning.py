"""Reasoning models' hidden tokens: models that think before they answer (OpenAI's o1 / o3 / o4-mini,
DeepSeek-R1, QwQ) bill their hidden reasoning as output tokens, and a published answer file holds only
the visible reply. A replayed reasoning model must therefore say how its hidden tokens are priced
(`solvers.<name>.replay.hidden_reasoning`: the upstream's own counts where a format carries them, else
an estimate per item with its source), so that it never looks cheaper than it was. Every answer whose
cost includes such an estimate is flagged (`reasoning_tokens_estimated`), and so is every frontier
point whose cost rests on one (metrics/frontier.json, `cost_rests_on_estimated_tokens`).
"""

from __future__ import annotations

import re

REASONING_MODEL = re.compile(r"(?:^|[/_\-])(?:o1|o3|o4)(?:$|[-_])|deepseek[-_]?r1|qwq", re.I)
"""Model names of reasoning models whose hidden tokens are billed but not published: OpenAI's o-series
(`o1-mini-2024-09-12`, `o1-preview`, `o3-mini`, `o4-mini`, `openai/o1`), DeepSeek-R1 and QwQ."""


def is_reasoning_model(name: str) -> bool:
    """True for a model that bills hidden reasoning tokens (see `REASONING_MODEL`)."""
    return REASONING_MODEL.search(name) is not None
