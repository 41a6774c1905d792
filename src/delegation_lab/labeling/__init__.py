"""Offline correctness labels: programmatic matching (`matchers`), an LLM judge (`judge`), their
agreement report (`agreement`), and the labels table built from them (`labels.build_labels`).

`MATCHERS` names the programmatic matchers `label.matcher` and an item's `answer_format` pick from
(docs/registries.md: adding one); `auto` resolves per item (`matchers.matcher_for`).
"""

from __future__ import annotations

from delegation_lab.registry import Registry

AUTO = "auto"

MATCHERS: Registry = Registry("answer matcher", "label.matcher")
MATCHERS.register("numeric", "delegation_lab.labeling.matchers:match_numeric")
MATCHERS.register("choice", "delegation_lab.labeling.matchers:match_choice")
MATCHERS.register("math", "delegation_lab.labeling.matchers:match_math")
MATCHERS.register("grid", "delegation_lab.labeling.structured:match_grid")
MATCHERS.register("literal", "delegation_lab.labeling.structured:match_literal")
