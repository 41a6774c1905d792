"""Route new questions with a saved router (`dlab route`): embed them with the embedder the router
was fitted on, compute the same text features (difficulty unknown: the dataset's single bucket,
1), and apply the operating point's knob."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from delegation_lab.embeddings import embedder_for, text_features
from delegation_lab.errors import InputError
from delegation_lab.routers import Inputs
from delegation_lab.routers.artifact import load_router


def route_questions(path: Path, op: str | None, questions: list[str]) -> str:
    """A printable table: per question the chosen solver, the predicted scores and the expected cost."""
    router, header = load_router(path)
    if not router.knobs:
        raise InputError(f"{path}: the saved router has no operating points")
    label = op or next(iter(router.knobs))
    if label not in router.knobs:
        raise InputError(f"{path}: no operating point {label!r}; saved: {', '.join(router.knobs)}")
    emb = np.asarray(embedder_for(header["embedder"]).encode(list(questions)), dtype=np.float32)
    x = Inputs(emb, text_features(list(questions), [None] * len(questions)))
    chosen, scores, cost = router.route(x, router.knobs[label])
    names = router.solvers if scores.shape[1] == len(router.solvers) else ["p_strong_wins"]
    lines = [f"router {router.name} at {label} ({header['embedder']} embeddings)"]
    for q, c, row, e in zip(questions, chosen, scores, cost, strict=True):
        shown = ", ".join(f"{n}={v:.3f}" for n, v in zip(names, row, strict=False))
        lines.append(f"{router.solvers[int(c)]}\tscores: {shown}\texpected cost ${e:.6f}\t{q[:60]}")
    return "\n".join(lines) + "\n"
