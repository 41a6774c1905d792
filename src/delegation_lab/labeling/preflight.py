"""Answers the label stage would refuse, found from params and the replay caches alone (`dlab params
check`), before `dvc repro` runs prepare and every solve stage to reach them.

The label stage gives each answer our verdict against the item's gold, or the correctness the
replayed cache brings (`labeling.labels.build_labels`). Under `data.dataset: replay` an item's gold
is the matching GSM8K question's or the cache's own `gold`, and may be unknown (a correctness-only
cache: RouterBench, LLMRouter, RouteLLM labels); then a replayed solver whose cache has no row for
the item, or a row with no correctness and no score, leaves the answer without a label, and the
stage stops (`N answers get no label`). With `label.method: judge` the judge labels every answer and
nothing is checked here; other datasets give every item a gold.
"""

from __future__ import annotations

from delegation_lab.errors import InputError
from delegation_lab.params.root import Params
from delegation_lab.solvers.replay.cache import load_cache, normalise_question

EXAMPLES = 3
"""Items named per refused solver."""


def unlabelled_problems(params: Params) -> list[str]:
    """One line per replayed solver whose answers would get no label (paths relative to the working
    folder, as the stages read them); a cache that cannot be read is a line too."""
    if params.label.method != "programmatic" or params.data.dataset != "replay":
        return []
    from delegation_lab.data.replay import replay_items

    try:
        items = replay_items(params.data)
    except InputError as e:
        return [f"data.replay: {e}"]
    no_gold = [i for i in items if i.gold is None]
    if not no_gold:
        return []
    problems = []
    for name, solver in params.solvers.items():
        if solver.backend != "replay":
            continue
        replay = solver.replay
        try:
            index = load_cache(replay.path, replay.format, replay.fields, replay.trust_pickle,
                               replay.score_threshold).index(replay.source_model)
        except InputError as e:
            problems.append(f"solvers.{name}.replay: {e}")
            continue
        absent, unscored = [], []
        for item in no_gold:
            row = index.rows.get(normalise_question(item.question))
            if row is None:
                absent.append(item)
            elif row["correct"] is None:
                unscored.append(item)
        if absent or unscored:
            problems.append(_line(name, replay.path, replay.source_model, absent, unscored, len(no_gold)))
    return problems


def _line(name: str, path: str, model: str, absent: list, unscored: list, n_no_gold: int) -> str:
    parts = []
    if unscored:
        shown = ", ".join(f"source index {i.source_id}" for i in unscored[:EXAMPLES])
        parts.append(f"{len(unscored)} row(s) with no correctness or score (e.g. {shown})")
    if absent:
        shown = ", ".join(f"source index {i.source_id}" for i in absent[:EXAMPLES])
        parts.append(f"no row for {len(absent)} item(s) (e.g. {shown})")
    return (f"solvers.{name}.replay: cache {path}, model {model!r}: {' and '.join(parts)}, among the {n_no_gold} "
            "item(s) with no gold; the label stage cannot label these answers. Re-import a cache that scores "
            f"them, remove those questions from data.replay's cache, drop solver {name}, or use label.method: judge")
