"""Does a rerun reproduce the committed headlines? Every metric that carries an interval (a key
`<name>_ci` = [low, high] beside `<name>`, or a frontier method's `accuracy_ci` / `cost_ci` beside its
`best_accuracy` / `best_accuracy_cost_per_item_usd`) is checked: is the rerun's value inside the
committed interval? `dlab repro check` runs it on `metrics/` against a git revision.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from delegation_lab.flatten import flatten
from delegation_lab.pipeline.layout import Layout

FRONTIER_PAIRS = {"accuracy_ci": "best_accuracy", "cost_ci": "best_accuracy_cost_per_item_usd"}


@dataclass(frozen=True)
class Check:
    file: str
    key: str
    committed: float
    low: float
    high: float
    rerun: float | None

    @property
    def inside(self) -> bool:
        """Inside the interval, up to the rounding of the numbers written into the metrics file."""
        if self.rerun is None:
            return False
        slack = 1e-6 * max(abs(self.low), abs(self.high)) + 1e-12
        return self.low - slack <= self.rerun <= self.high + slack


def _interval(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list) and len(value) == 2 and all(isinstance(x, int | float) for x in value):
        return float(value[0]), float(value[1])
    return None


def compare(file: str, committed: dict, rerun: dict) -> list[Check]:
    """Every (value, interval) pair of the committed metrics, with the rerun's value."""
    old, new = flatten(committed), flatten(rerun)
    checks = []
    for key, value in old.items():
        ci = _interval(value)
        if ci is None:
            continue
        parent, _, leaf = key.rpartition(".")
        if leaf in FRONTIER_PAIRS:
            target = f"{parent}.{FRONTIER_PAIRS[leaf]}" if parent else FRONTIER_PAIRS[leaf]
        elif leaf.endswith("_ci"):
            target = key[: -len("_ci")]
        else:
            continue
        if not isinstance(old.get(target), int | float):
            continue
        fresh = new.get(target)
        checks.append(Check(file, target, float(old[target]), *ci, float(fresh) if isinstance(fresh, int | float) else None))
    return checks


def committed_metrics(root: Path, rev: str, name: str) -> dict | None:
    try:
        text = subprocess.run(["git", "show", f"{rev}:metrics/{name}"], cwd=root, capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError:
        return None
    return json.loads(text)


def check_tree(root: Path, rev: str = "HEAD") -> list[Check]:
    checks = []
    for path in sorted(Layout(root).metrics_dir.glob("*.json")):
        old = committed_metrics(root, rev, path.name)
        if old is not None:
            checks.extend(compare(path.name, old, json.loads(path.read_text())))
    return checks
