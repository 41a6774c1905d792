"""What the market study reads before any market runs, every check that can fail done here."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from delegation_lab.errors import InputError
from delegation_lab.evaluation.params import VerifierParams
from delegation_lab.evaluation.verifier import Verifier, build_verifier
from delegation_lab.pipeline.layout import Layout
from delegation_lab.market.answers import SplitMatrix, solver_matrices
from delegation_lab.market.params import MarketParams
from delegation_lab.pipeline.tables import read_labeled_answers


@dataclass
class MarketInputs:
    solvers: list[str]  # the answers market's agents
    matrices: dict[str, SplitMatrix] | None = None  # train / test correctness and cost; None: answers off
    n_buckets: int = 0  # difficulty buckets of the answers domain
    verifier: Verifier | None = None  # the shared `evaluation.verifier` (answers only)


def load_inputs(params: MarketParams, solver_names: list[str], verifier: VerifierParams, layout: Layout) -> MarketInputs:
    """The device checked, the answers market's solvers and their labeled answers (when it is on)."""
    device = params.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"market.device: {device!r} requested but CUDA is not available on this machine; use `cpu`")
    try:
        torch.device(device)
    except RuntimeError as e:
        raise InputError(f"market.device: {device!r} is not a torch device ({e})") from None
    solvers = list(params.answers.solvers or solver_names)
    unknown = [s for s in solvers if s not in solver_names]
    if unknown:
        raise InputError(f"market.answers.solvers: unknown solver(s) {unknown}; params `solvers` defines {sorted(solver_names)}")
    if not params.answers.enabled:
        return MarketInputs(solvers)
    matrices, n_buckets = solver_matrices(read_labeled_answers(layout), solvers)
    return MarketInputs(solvers, matrices, n_buckets, build_verifier(verifier, layout.root))
