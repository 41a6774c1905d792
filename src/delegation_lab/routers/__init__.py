"""The field's standard routers (RouterBench, RouteLLM, LLMRouterBench, RouterArena, Avengers-Pro,
FrugalGPT) on our cached answers: one module per router, `params` for their typed knobs, `study` for
fitting on train, calibrating on dev and evaluating once on test."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

LEARNED = ("knn", "mlp", "mf", "cluster", "threshold", "learned_cascade")

if TYPE_CHECKING:
    from delegation_lab.routers.base import Inputs, Outcome, Router


def _registry() -> dict[str, type]:
    from delegation_lab.routers.cluster import ClusterRouter
    from delegation_lab.routers.knn import KnnRouter
    from delegation_lab.routers.learned_cascade import LearnedCascadeRouter
    from delegation_lab.routers.mf import MfRouter
    from delegation_lab.routers.mlp import MlpRouter
    from delegation_lab.routers.reference import BestSingleRouter, RandomRouter
    from delegation_lab.routers.threshold import ThresholdRouter

    return {cls.name: cls for cls in (
        KnnRouter, MlpRouter, MfRouter, ClusterRouter, ThresholdRouter, LearnedCascadeRouter, BestSingleRouter, RandomRouter)}


def __getattr__(name: str) -> Any:
    """The routers (and torch, which they need) load on first use: `delegation_lab.routers.params`,
    which every stage's params import reaches, must not pay torch's import (~1.7 s per process)."""
    if name == "ROUTERS":
        return globals().setdefault("ROUTERS", _registry())
    if name in ("Inputs", "Outcome", "Router"):
        from delegation_lab.routers import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_router(name: str, params: Any, solvers: list[str]) -> Router:
    """A fresh router `name` configured by the `routers` params section."""
    section = getattr(params, name, None)
    routers = globals().get("ROUTERS") or __getattr__("ROUTERS")
    return routers[name](section, solvers)


__all__ = ["LEARNED", "ROUTERS", "Inputs", "Outcome", "Router", "build_router"]
