"""The field's standard routers (RouterBench, RouteLLM, LLMRouterBench, RouterArena, Avengers-Pro,
FrugalGPT) on our cached answers: one module per router, `params` for their typed knobs, `study` for
fitting on train, calibrating on dev and evaluating once on test.

`ROUTERS` names each router's class; a router module (and torch, which the learned ones need) is
imported on first lookup, so `routers.params`, which every stage's params import reaches, stays
light (docs/registries.md: adding one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from delegation_lab.registry import Registry

if TYPE_CHECKING:
    from delegation_lab.routers.base import Inputs, Outcome, Router

ROUTERS: Registry[type[Router]] = Registry("router", "routers.routers")
ROUTERS.register("knn", "delegation_lab.routers.knn:KnnRouter")
ROUTERS.register("mlp", "delegation_lab.routers.mlp:MlpRouter")
ROUTERS.register("mf", "delegation_lab.routers.mf:MfRouter")
ROUTERS.register("cluster", "delegation_lab.routers.cluster:ClusterRouter")
ROUTERS.register("threshold", "delegation_lab.routers.threshold:ThresholdRouter")
ROUTERS.register("learned_cascade", "delegation_lab.routers.learned_cascade:LearnedCascadeRouter")
ROUTERS.register("best_single", "delegation_lab.routers.reference:BestSingleRouter")
ROUTERS.register("random", "delegation_lab.routers.reference:RandomRouter")

LEARNED = ("knn", "mlp", "mf", "cluster", "threshold", "learned_cascade")
"""The routers that learn from the training items (the rest are references)."""


def build_router(name: str, params: Any, solvers: list[str]) -> Router:
    """A fresh router `name` configured by the `routers` params section."""
    return ROUTERS.get(name)(getattr(params, name, None), solvers)


def __getattr__(name: str) -> Any:
    # Not a dispatch: the shared router types re-exported lazily, as importing them imports torch.
    if name in ("Inputs", "Outcome", "Router"):
        from delegation_lab.routers import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LEARNED", "ROUTERS", "Inputs", "Outcome", "Router", "build_router"]
