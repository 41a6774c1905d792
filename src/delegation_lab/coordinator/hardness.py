"""How `hardness_weight` of the simulated solvers sets the best achievable accuracy.

The weight is the share of each solver's probit noise that is the item's latent hardness, shared by
every solver: at 0 their errors are independent given the difficulty, at 1 they err on the same
items. Each solver's own accuracy does not move (the noise keeps unit variance), but the oracle's
— the share of items some solver gets right, what any router or coordinator can at best reach —
falls as the weight rises. `python -m delegation_lab.coordinator.hardness [params.yaml]` prints the
table quoted in docs/studies/coordinator.md for the params' simulated solvers on their arith items.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.params.root import Params, load_params
from delegation_lab.data.arith import generate
from delegation_lab.data.items import Item
from delegation_lab.solvers.simulated import SimulatedBackend

WEIGHTS = (0.5, 0.7, 0.9)


def correctness(params: Params, items: list[Item], weight: float) -> dict[str, np.ndarray]:
    """Per simulated solver, which items it answers right when every solver's hardness_weight is `weight`."""
    out = {}
    for name, solver in params.solvers.items():
        if solver.backend != "simulated":
            continue
        backend = SimulatedBackend(name, solver.simulated.model_copy(update={"hardness_weight": weight}))
        out[name] = np.array([backend.is_correct(item) for item in items])
    return out


def hardness_table(params: Params, items: list[Item], weights: tuple[float, ...] = WEIGHTS) -> pl.DataFrame:
    """One row per weight: each simulated solver's accuracy and the oracle's (some solver right)."""
    rows = []
    for w in weights:
        right = correctness(params, items, w)
        row = {"hardness_weight": w, **{f"accuracy_{s}": float(v.mean()) for s, v in right.items()}}
        row["oracle_accuracy"] = float(np.any(np.stack(list(right.values())), axis=0).mean())
        rows.append(row)
    return pl.DataFrame(rows)


def default_items(params: Params) -> list[Item]:
    """Every arith item of the params' data section (ability + train + test pool)."""
    d = params.data
    return generate(d.arith, d.ability_size + d.train_size + d.test_size, d.seed)


def markdown(table: pl.DataFrame) -> str:
    cols = table.columns
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table.iter_rows():
        lines.append("| " + " | ".join(f"{v:.1f}" if i == 0 else f"{v:.3f}" for i, v in enumerate(row)) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    p = load_params(Path(sys.argv[1] if len(sys.argv) > 1 else "params.yaml"))
    print(markdown(hardness_table(p, default_items(p))))
