"""Does a rerun reproduce the committed headlines? Every metric that carries an interval (a key
`<name>_ci` = [low, high] beside `<name>`, or a frontier method's `accuracy_ci` / `cost_ci` beside its
`best_accuracy` / `best_accuracy_cost_per_item_usd`) is checked: is the rerun's value inside the
committed interval? `dlab repro check` runs it on `metrics/` against a git revision.

Beside the intervals it says whether the rerun is *bit-identical* (every figure but the timings
equal) and, when it is not, which figures moved and whether the rerun was computed under other
numerics than the committed files: another CPU vendor or vector width, other library versions,
other pins (each stage records them in metrics/timings/<stage>.json: `numerics.describe`).
"""

from __future__ import annotations

import json
import re
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


# A wall-clock figure differs on every run: never a reproduction failure (`seconds`, `fit_seconds`,
# `coalitions_per_second`, `runtime_s`, `branches_per_s`...).
TIMING_KEY = re.compile(r"seconds|per_second|(^|_)s$|per_s$")


def is_timing(key: str) -> bool:
    return any(TIMING_KEY.search(part) for part in key.split("."))


def moved_figures(committed: dict, rerun: dict) -> list[tuple[str, object, object]]:
    """(key, committed, rerun) of every figure but the timings that differs (or is missing on one side)."""
    old, new = flatten(committed), flatten(rerun)
    return [(k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new))
            if not is_timing(k) and old.get(k) != new.get(k)]


def numerics_differences(committed: dict | None, rerun: dict | None) -> list[str]:
    """What differs between two stages' recorded numerics (`numerics.describe`): CPU vendor, widest
    vector extension, library versions, pins. Empty when both are the same (the CPU's model name
    alone is not a difference: the pins make CPU models of one family compute alike)."""
    if not committed or not rerun:
        return ["no numerics recorded" + (" in the committed timings" if not committed else " in the rerun")]
    out = []
    for field in ("vendor", "widest_isa"):
        a, b = committed.get("cpu", {}).get(field), rerun.get("cpu", {}).get(field)
        if a != b:
            out.append(f"cpu {field} {a} -> {b}")
    for group in ("libraries", "pins"):
        a, b = committed.get(group, {}), rerun.get(group, {})
        out.extend(f"{group[:-1] if group == 'libraries' else 'pin'} {k} {a.get(k)} -> {b.get(k)}"
                   for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
    return out


@dataclass(frozen=True)
class Provenance:
    """Is the rerun bit-identical, and if not, what moved and under which numerics."""
    moved: dict[str, list[tuple[str, object, object]]]  # metrics file -> moved figures
    numerics: dict[str, list[str]]  # stage timings file -> numerics differences

    @property
    def identical(self) -> bool:
        return not any(self.moved.values())

    def verdict(self) -> str:
        if self.identical:
            return "bit-identical: every figure but the timings equals the committed one"
        n = sum(len(v) for v in self.moved.values())
        other = sorted({d for ds in self.numerics.values() for d in ds})
        where = (f"computed under other numerics ({'; '.join(other[:6])})" if other
                 else "computed under the same numerics (pins, library versions, CPU family): a code or data change, or a pin that does not hold")
        return f"{n} figures moved in {sum(bool(v) for v in self.moved.values())} files, {where}"


def provenance(root: Path, rev: str = "HEAD") -> Provenance:
    """Compare every metrics file (timings aside) and every stage's recorded numerics with `rev`."""
    layout = Layout(root)
    moved = {}
    for path in sorted(layout.metrics_dir.glob("*.json")):
        old = committed_metrics(root, rev, path.name)
        if old is not None:
            moved[path.name] = moved_figures(old, json.loads(path.read_text()))
    numerics = {}
    for path in sorted((layout.metrics_dir / "timings").glob("*.json")):
        old = committed_metrics(root, rev, f"timings/{path.name}")
        if old is not None:
            diff = numerics_differences(old.get("numerics"), json.loads(path.read_text()).get("numerics"))
            if diff:
                numerics[path.name] = diff
    return Provenance(moved, numerics)


def committed_metrics(root: Path, rev: str, name: str) -> dict | None:
    try:
        text = subprocess.run(["git", "show", f"{rev}:./metrics/{name}"], cwd=root, capture_output=True, text=True, check=True).stdout
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
