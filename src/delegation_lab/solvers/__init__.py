"""Solver backends behind one protocol (`Solver.solve(items, role)`), pricing and the answer cache.

Modules: `params` (the `solvers.<name>` section), `base` (the protocol: `Solver`, `Backend`,
`Request`, `Generation`, `Answer`), `cache` (the answer cache), one module per backend, `replay/`
(the replay formats). `BACKENDS` names each backend's class; its `from_params(name, params)` builds
it, importing heavy libraries (torch, vLLM, llama.cpp) only then (docs/registries.md: adding one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from delegation_lab.solvers.backends import BACKENDS, build_backend

if TYPE_CHECKING:
    from delegation_lab.solvers.base import Solver
    from delegation_lab.solvers.params import SolverParams


def build_solver(name: str, params: SolverParams) -> Solver:
    from delegation_lab.solvers.base import Solver

    return Solver(name, params, build_backend(name, params))


__all__ = ["BACKENDS", "build_backend", "build_solver"]
