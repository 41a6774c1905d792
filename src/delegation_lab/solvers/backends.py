"""`BACKENDS`: each backend's class by name, and `build_backend`. Its own module (re-exported by the
package) so the params (`solvers.params`, which validates `backend` against it) need not import the
package's `__init__`, which builds solvers from those params."""

from __future__ import annotations

from typing import TYPE_CHECKING

from delegation_lab.registry import Registry

if TYPE_CHECKING:
    from delegation_lab.solvers.base import Backend
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
