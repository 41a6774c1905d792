"""The field's standard routers (RouterBench, RouteLLM, LLMRouterBench, RouterArena, Avengers-Pro,
FrugalGPT) on our cached answers: one module per router, `params` for their typed knobs, `study` for
fitting on train, calibrating on dev and evaluating once on test.

`ROUTERS` names each router's class, and is the one place a router's name is written: the params'
list of valid names (`routers.params.RouterName`), the default `routers.routers`, `LEARNED`, the
work-size estimate and `dlab route --help` are all read from it. A router module (and torch, which
the learned ones need) is imported on first lookup, so `routers.params`, which every stage's params
import reaches, stays light (docs/registries.md: adding one).
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
ROUTERS.register("routerdc", "delegation_lab.routers.routerdc:RouterDcRouter")
ROUTERS.register("avengers_pro", "delegation_lab.routers.avengers_pro:AvengersProRouter")
ROUTERS.register("irt", "delegation_lab.routers.irt:IrtRouter")
ROUTERS.register("frugalgpt", "delegation_lab.routers.frugalgpt:FrugalGptRouter")
ROUTERS.register("best_single", "delegation_lab.routers.reference:BestSingleRouter")
ROUTERS.register("random", "delegation_lab.routers.reference:RandomRouter")



def learned_routers() -> tuple[str, ...]:
    """The registered routers that learn from the training items (`Router.learns`; the rest are
    references), in registration order. Imports every router module."""
    return tuple(name for name in ROUTERS.names() if ROUTERS.get(name).learns)


def build_router(name: str, params: Any, solvers: list[str]) -> Router:
    """A fresh router `name` configured by its section of the `routers` params (`routers.<name>`)."""
    return ROUTERS.get(name)(name, getattr(params, name, None), solvers)


def __getattr__(name: str) -> Any:
    # Not a dispatch: the shared router types re-exported lazily, as importing them imports torch;
    # `LEARNED` is `learned_routers()`, read from the router classes on first use.
    if name in ("Inputs", "Outcome", "Router"):
        from delegation_lab.routers import base

        return getattr(base, name)
    if name == "LEARNED":
        return learned_routers()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["LEARNED", "ROUTERS", "Inputs", "Outcome", "Router", "build_router", "learned_routers"]
