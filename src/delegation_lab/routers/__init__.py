"""The field's standard routers (RouterBench, RouteLLM, LLMRouterBench, RouterArena, Avengers-Pro,
FrugalGPT) on our cached answers: one module per router, `params` for their typed knobs, `study` for
fitting on train, calibrating on dev and evaluating once on test."""

from __future__ import annotations

from typing import Any

from delegation_lab.routers.base import Inputs, Outcome, Router
from delegation_lab.routers.cluster import ClusterRouter
from delegation_lab.routers.knn import KnnRouter
from delegation_lab.routers.learned_cascade import LearnedCascadeRouter
from delegation_lab.routers.mf import MfRouter
from delegation_lab.routers.mlp import MlpRouter
from delegation_lab.routers.reference import BestSingleRouter, RandomRouter
from delegation_lab.routers.threshold import ThresholdRouter

ROUTERS: dict[str, type[Router]] = {cls.name: cls for cls in (
    KnnRouter, MlpRouter, MfRouter, ClusterRouter, ThresholdRouter, LearnedCascadeRouter, BestSingleRouter, RandomRouter)}
LEARNED = ("knn", "mlp", "mf", "cluster", "threshold", "learned_cascade")


def build_router(name: str, params: Any, solvers: list[str]) -> Router:
    """A fresh router `name` configured by the `routers` params section."""
    section = getattr(params, name, None)
    return ROUTERS[name](section, solvers)


__all__ = ["LEARNED", "ROUTERS", "Inputs", "Outcome", "Router", "build_router"]
