"""Solver backends behind one protocol (`Solver.solve(items, role)`), pricing and the answer cache."""

from __future__ import annotations

from delegation_lab.config import SolverParams
from delegation_lab.solvers.base import Answer, Backend, Generation, Request, Solver

__all__ = ["Answer", "Backend", "Generation", "Request", "Solver", "build_backend", "build_solver"]


def build_backend(name: str, params: SolverParams) -> Backend:
    """The backend for a solver's params; heavy libraries are imported only when used."""
    kind = params.backend
    if kind == "simulated":
        from delegation_lab.solvers.simulated import SimulatedBackend

        return SimulatedBackend(name, params.simulated)
    if kind == "openai_compat":
        from delegation_lab.solvers.openai_compat import OpenAICompatBackend

        return OpenAICompatBackend(params.model, params.openai_compat, params.decoding)
    if kind == "vllm":
        from delegation_lab.solvers.vllm_backend import VllmBackend

        return VllmBackend(params.model, params.vllm, params.decoding)
    if kind == "transformers":
        from delegation_lab.solvers.transformers_backend import TransformersBackend

        return TransformersBackend(params.model, params.transformers, params.decoding)
    if kind == "llamacpp":
        from delegation_lab.solvers.llamacpp import LlamaCppBackend

        return LlamaCppBackend(params.model, params.llamacpp, params.decoding)
    if kind == "replay":
        from delegation_lab.solvers.replay import ReplayBackend

        return ReplayBackend(params.replay, params.price)
    raise ValueError(f"unknown backend {kind!r}")


def build_solver(name: str, params: SolverParams) -> Solver:
    return Solver(name, params, build_backend(name, params))
