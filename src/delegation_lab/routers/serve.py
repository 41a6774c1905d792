"""Route new questions with a saved router (`dlab route`, `dlab serve`): embed them with the embedder
the router was fitted on, compute the same text features (difficulty unknown: the dataset's single
bucket, 1), and apply the operating point's knob."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from delegation_lab.embeddings import Embedder, embedder_for, text_features
from delegation_lab.errors import InputError
from delegation_lab.routers import Inputs, Router
from delegation_lab.routers.artifact import load_router


@dataclass(frozen=True)
class Routed:
    """One question's decision: the chosen solver, every solver's predicted score, the expected cost."""

    solver: str
    scores: dict[str, float]
    expected_cost_usd: float


class SavedRouter:
    """A router the `routers` stage saved, at one operating point, with the embedder it was fitted on."""

    def __init__(self, path: Path, op: str | None = None):
        self.router, self.header = load_router(path)
        self.router: Router
        if not self.router.knobs:
            raise InputError(f"{path}: the saved router has no operating points")
        self.op = op or next(iter(self.router.knobs))
        if self.op not in self.router.knobs:
            raise InputError(f"{path}: no operating point {self.op!r}; saved: {', '.join(self.router.knobs)}")
        self.embedder: Embedder = embedder_for(self.header["embedder"])

    @property
    def solvers(self) -> list[str]:
        return self.router.solvers

    def inputs(self, questions: list[str], embedding: np.ndarray | None = None) -> Inputs:
        """The router's inputs; `embedding` when the questions are embedded already."""
        if embedding is None:
            embedding = np.asarray(self.embedder.encode(list(questions)), dtype=np.float32)
        return Inputs(embedding, text_features(list(questions), [None] * len(questions)))

    def route(self, x: Inputs) -> list[Routed]:
        chosen, scores, cost = self.router.route(x, self.router.knobs[self.op])
        names = self.router.solvers if scores.shape[1] == len(self.router.solvers) else ["p_strong_wins"]
        return [Routed(self.router.solvers[int(c)], {n: float(v) for n, v in zip(names, row, strict=False)}, float(e))
                for c, row, e in zip(chosen, scores, cost, strict=True)]

    def describe(self) -> dict[str, Any]:
        return {"router": self.router.name, "operating_point": self.op, "embedder": self.header["embedder"]}


def route_questions(path: Path, op: str | None, questions: list[str]) -> str:
    """A printable table: per question the chosen solver, the predicted scores and the expected cost."""
    saved = SavedRouter(path, op)
    lines = [f"router {saved.router.name} at {saved.op} ({saved.header['embedder']} embeddings)"]
    for q, routed in zip(questions, saved.route(saved.inputs(questions)), strict=True):
        shown = ", ".join(f"{n}={v:.3f}" for n, v in routed.scores.items())
        lines.append(f"{routed.solver}\tscores: {shown}\texpected cost ${routed.expected_cost_usd:.6f}\t{q[:60]}")
    return "\n".join(lines) + "\n"
