"""Solver backends behind one protocol (`Solver.solve(items, role)`), pricing and the answer cache.

Modules: `params` (the `solvers.<name>` section), `base` (the protocol: `Solver`, `Backend`,
`Request`, `Generation`, `Answer`), `cache` (the answer cache), one module per backend, `replay/`
(the replay formats). `BACKENDS` names each backend's class; its `from_params(name, params)` builds
it, importing heavy libraries (torch, vLLM, llama.cpp) only then (docs/registries.md: adding one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from delegation_lab.registry import Registry

if TYPE_CHECKING:
    from delegation_lab.solvers.base import Backend, Solver
    from delegation_lab.solvers.params import SolverParams

BACKENDS: Registry[type[Backend]] = Registry("backend", "solvers.<name>.backend")
BACKENDS.register("simulated", "delegation_lab.solvers.simulated:SimulatedBackend")
BACKENDS.register("openai_compat", "delegation_lab.solvers.openai_compat:OpenAICompatBackend")
BACKENDS.register("vllm", "delegation_lab.solvers.vllm_backend:VllmBackend")
BACKENDS.register("transformers", "delegation_lab.solvers.transformers_backend:TransformersBackend")
BACKENDS.register("llamacpp", "delegation_lab.solvers.llamacpp:LlamaCppBackend")
BACKENDS.register("replay", "delegation_lab.solvers.replay.backend:ReplayBackend")


def build_backend(name: str, params: SolverParams) -> Backend:
    """The backend of solver `name`; its module (and the libraries it needs) is imported only now."""
    return BACKENDS.get(params.backend).from_params(name, params)


def build_solver(name: str, params: SolverParams) -> Solver:
    from delegation_lab.solvers.base import Solver

    return Solver(name, params, build_backend(name, params))


__all__ = ["BACKENDS", "build_backend", "build_solver"]
