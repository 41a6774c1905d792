"""Cross-benchmark generalisation of the routers (`dlab transfer SOURCE TARGET`, `dlab transfer-table`).

Every router the target project lists (`routers.routers`, the target's `routers` params and seeds)
is fitted twice on the solvers both projects name (by solver name): on the source project's train
split (calibrated on the dev split carved from it) and, beside it, on the target's own train split
(in domain). Both are evaluated on the target's test split with the target's verifier, and compared
item by item with the target's bootstrap (`evaluation.intervals`, the frontier's `ItemBootstrap`):

- `best`: each fit at its own most accurate operating point on the target test split (as
  metrics/routers.json's `best_accuracy` picks it);
- `same_point`: both at the operating point (position in the sweep) that is best in domain: the
  same knob, so only what the router learnt differs.

Both projects' tables are read with the routers stage's own reader (`routers.study.load_routing_data`).
Several directions share one file: a run adds or replaces its `source -> target` entry.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from delegation_lab.errors import InputError
from delegation_lab.evaluation import ItemBootstrap, Verifier, build_verifier, paired_bootstrap
from delegation_lab.evaluation.params import TieParams
from delegation_lab.params.root import Params, load_params
from delegation_lab.pipeline.layout import Layout
from delegation_lab.pipeline.schemas import SPLITS
from delegation_lab.pipeline.tables import write_json_atomic
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.report import singles_and_oracle
from delegation_lab.routers.study import RoutingData, StudyRun, fit_router, load_routing_data, router_seed

METRICS = "transfer"


@dataclass(frozen=True)
class Project:
    layout: Layout
    params: Params

    @property
    def name(self) -> str:
        return self.layout.root.resolve().name


def missing(root: Path, path: Path) -> InputError:
    return InputError(f"{path}: not found; make it with `cd {root} && dvc repro`")


def open_project(root: Path) -> Project:
    """A project whose labeled answers, items and embeddings exist; else one line naming the first
    missing file and the command that makes it."""
    layout = Layout(Path(root))
    if not layout.params_file.exists():
        raise InputError(f"{layout.params_file}: not found; {root} is not a project folder")
    params = load_params(layout.params_file)
    for path in (layout.labels, *(layout.items(s) for s in SPLITS)):
        if not path.exists():
            raise missing(root, path)
    if not any(layout.embeddings_dir.glob("*.parquet")):
        raise missing(root, layout.embeddings_dir / "<embedder>.parquet")
    # read_labeled_answers reads the answers of every labeled solver
    for solver in pl.read_parquet(layout.labels, columns=["solver"])["solver"].unique().sort():
        if not layout.answers(solver).exists():
            raise missing(root, layout.answers(solver))
    return Project(layout, params)


def shared_solvers(source: Project, target: Project) -> list[str]:
    """The solvers both projects name, in the target's order."""
    shared = [s for s in target.params.solvers if s in source.params.solvers]
    if len(shared) < 2:
        raise InputError(f"{source.layout.params_file} and {target.layout.params_file} share {len(shared)} solver(s) "
                         f"({', '.join(shared) or 'none'}); routing needs at least 2")
    return shared


def load_project_data(project: Project, solvers: list[str], params: RoutersParams) -> RoutingData:
    """The routers stage's table of `project` on `solvers`; its errors name the project."""
    try:
        return load_routing_data(project.layout, solvers, params)
    except InputError as e:
        raise InputError(f"{project.layout.root}: {e}") from None


def check_embeddings(source: RoutingData, target: RoutingData, names: tuple[str, str]) -> None:
    ds, dt = source.inputs.embedding.shape[1], target.inputs.embedding.shape[1]
    if source.embedder != target.embedder or ds != dt:
        raise InputError(f"embeddings differ: {names[0]} has {source.embedder} ({ds} dims), {names[1]} {target.embedder} "
                         f"({dt} dims); set embed.embedder alike in both params.yaml and rerun `dvc repro embed`")


@dataclass
class Scored:
    """One fit (all seeds) of one router evaluated on the target test split, per operating point in
    sweep order: its label (seed 0's), correctness and cost, each [seeds, n_test]."""

    labels: list[str]
    correct: list[np.ndarray]
    cost: list[np.ndarray]


def fit_and_score(name: str, params: RoutersParams, fit_on: RoutingData, target: RoutingData, verifier: Verifier) -> Scored:
    """Fit router `name` on `fit_on`'s train minus dev (calibrated on its dev), seed by seed as the
    routers stage does, and evaluate every operating point on `target`'s test rows."""
    rows = target.rows("test")
    x, ids, correct, cost = target.inputs.take(rows), target.item_ids[rows], target.correct[rows], target.cost[rows]
    per_seed = []
    for s in range(params.seeds):
        router = fit_router(name, params, fit_on, router_seed(params, s))
        per_seed.append([(label, router.evaluate(x, ids, correct, cost, knob, verifier, s)) for label, knob in router.knobs.items()])
    return Scored([label for label, _ in per_seed[0]],
                  [np.stack([seed[i][1].correct for seed in per_seed]) for i in range(len(per_seed[0]))],
                  [np.stack([seed[i][1].cost for seed in per_seed]) for i in range(len(per_seed[0]))])


def point(scored: Scored, i: int, boot: ItemBootstrap) -> dict:
    acc, cost = scored.correct[i].astype(float), scored.cost[i]
    return {"operating_point": scored.labels[i], "accuracy": float(acc.mean()), "accuracy_ci": list(boot.interval(acc)),
            "cost_per_item_usd": float(cost.mean()), "cost_ci": list(boot.interval(cost))}


def best_index(points: list[dict]) -> int:
    """The most accurate operating point, the cheapest of equals (metrics/routers.json's `best_accuracy`)."""
    return max(range(len(points)), key=lambda i: (points[i]["accuracy"], -points[i]["cost_per_item_usd"]))


def compare(name: str, transfer: Scored, in_domain: Scored, boot: ItemBootstrap, ties: TieParams = TieParams()) -> dict:
    """Each fit's operating points and the paired differences transfer - in domain (`tie` within `evaluation.ties`)."""
    if len(transfer.labels) != len(in_domain.labels):
        raise InputError(f"routers.{name}: {len(transfer.labels)} operating points after the transfer fit, "
                         f"{len(in_domain.labels)} in domain; their sweeps must match")
    fits = {"transfer": transfer, "in_domain": in_domain}
    points = {k: [point(s, i, boot) for i in range(len(s.labels))] for k, s in fits.items()}
    best = {k: best_index(p) for k, p in points.items()}

    def paired(i: int, j: int) -> dict:
        return {"accuracy": paired_bootstrap(boot, transfer.correct[i].astype(float), in_domain.correct[j].astype(float),
                                             ties.accuracy(boot.n_items)),
                "cost_per_item_usd": paired_bootstrap(boot, transfer.cost[i], in_domain.cost[j], ties.cost_usd)}

    same = best["in_domain"]
    return {
        "transfer": {"best": points["transfer"][best["transfer"]], "operating_points": points["transfer"]},
        "in_domain": {"best": points["in_domain"][same], "operating_points": points["in_domain"]},
        "best": {"transfer_point": transfer.labels[best["transfer"]], "in_domain_point": in_domain.labels[same],
                 **paired(best["transfer"], same)},
        "same_point": {"operating_point": in_domain.labels[same], "transfer": points["transfer"][same], **paired(same, same)},
    }


def references(target: RoutingData, boot: ItemBootstrap) -> dict:
    """The best single shared solver (most accurate on the target test split, cheapest of equals) and
    the oracle (the cheapest right shared solver per item) on the target test split."""
    singles, (oracle_cost, oracle_acc) = singles_and_oracle(StudyRun(target))
    best = max(singles, key=lambda s: (singles[s][1], -singles[s][0]))
    rows, j = target.rows("test"), target.solvers.index(best)
    acc, cost = target.correct[rows, j].astype(float), target.cost[rows, j]
    return {"best_single": {"solver": best, "accuracy": float(acc.mean()), "accuracy_ci": list(boot.interval(acc)),
                            "cost_per_item_usd": float(cost.mean()), "cost_ci": list(boot.interval(cost))},
            "oracle": {"accuracy": oracle_acc, "cost_per_item_usd": oracle_cost}}


def run_transfer(source: Project, target: Project, progress: bool = False) -> dict:
    """One direction's metrics: every router fitted on the source and on the target, scored on the
    target test split (the module docstring)."""
    from delegation_lab.pipeline.torch_runtime import deterministic_torch

    start = time.perf_counter()
    params = target.params.routers
    solvers = shared_solvers(source, target)
    src, tgt = (load_project_data(p, solvers, params) for p in (source, target))
    check_embeddings(src, tgt, (str(source.layout.root), str(target.layout.root)))
    verifier = build_verifier(target.params.evaluation.verifier, target.layout.root)
    intervals = target.params.evaluation.intervals
    boot = ItemBootstrap(tgt.rows("test").size, intervals.resamples, intervals.confidence, intervals.seed)
    routers = {}
    with deterministic_torch(params.torch_threads):
        for name in params.routers:
            routers[name] = compare(name, fit_and_score(name, params, src, tgt, verifier),
                                    fit_and_score(name, params, tgt, tgt, verifier), boot, target.params.evaluation.ties)
            if progress:
                r = routers[name]
                print(f"transfer: {name}: accuracy {r['transfer']['best']['accuracy']:.3f} fitted on {source.name}, "
                      f"{r['in_domain']['best']['accuracy']:.3f} on {target.name}")
    return {
        "source": str(source.layout.root), "target": str(target.layout.root), "solvers": solvers,
        "source_only": [s for s in source.params.solvers if s not in solvers],
        "target_only": [s for s in target.params.solvers if s not in solvers],
        "embedding": {"name": tgt.embedder, "dim": int(tgt.inputs.embedding.shape[1])},
        "split_sizes": {"source_fit": int(src.rows("train").size), "source_dev": int(src.rows("dev").size),
                        "target_fit": int(tgt.rows("train").size), "target_dev": int(tgt.rows("dev").size),
                        "target_test": int(tgt.rows("test").size)},
        "seeds": params.seeds, "verifier": verifier.describe(), **references(tgt, boot), "routers": routers,
        "intervals": {"confidence": intervals.confidence, "resamples": intervals.resamples, "kind": "item bootstrap, seeds resampled, paired"},
        "runtime_s": round(time.perf_counter() - start, 1),
    }


def direction_key(source: Project, target: Project) -> str:
    return f"{source.name} -> {target.name}"


def write_transfer(direction: dict, key: str, out: Path) -> dict:
    """Add (or replace) one direction in the metrics file `out`, written atomically; the whole file."""
    metrics: dict = {"directions": {}}
    if out.exists():
        try:
            metrics = json.loads(out.read_text())
            if not isinstance(metrics.get("directions"), dict):
                raise ValueError("no `directions` object")
        except (OSError, UnicodeDecodeError, ValueError, AttributeError) as e:
            raise InputError(f"{out}: not a transfer metrics file ({str(e)[:80]}); remove it or pass another --out") from None
    metrics["directions"][key] = direction
    write_json_atomic(metrics, out)
    return metrics


# ---------------------------------------------------------------------------------------------
# Markdown


def _ci(ci: list[float], fmt: str) -> str:
    return f"[{ci[0]:{fmt}}, {ci[1]:{fmt}}]"


def _diff(d: dict, fmt: str) -> str:
    return f"{d['difference']:+{fmt}} {_ci([d['ci_low'], d['ci_high']], fmt)}, p={d['p_value']:.2g}"


def transfer_markdown(metrics: dict) -> str:
    """Per direction, per router: in-domain and transfer accuracy and cost at their most accurate
    points, and the paired difference transfer - in domain there and at the in-domain point.
    KeyError / TypeError on a file of another shape."""
    from delegation_lab.tracking.compare import markdown_table

    parts = []
    for key, d in metrics["directions"].items():
        rows = []
        for name, r in d["routers"].items():
            ind, tra = r["in_domain"]["best"], r["transfer"]["best"]
            rows.append({
                "router": name,
                "in domain: accuracy": f"{ind['accuracy']:.3f} {_ci(ind['accuracy_ci'], '.3f')}",
                "in domain: cost / item (US$)": f"{ind['cost_per_item_usd']:.3g} ({ind['operating_point']})",
                "transfer: accuracy": f"{tra['accuracy']:.3f} {_ci(tra['accuracy_ci'], '.3f')}",
                "transfer: cost / item (US$)": f"{tra['cost_per_item_usd']:.3g} ({tra['operating_point']})",
                "Δ accuracy, best points": _diff(r["best"]["accuracy"], ".3f"),
                "Δ accuracy, in-domain point": _diff(r["same_point"]["accuracy"], ".3f"),
            })
        single, oracle, sizes = d["best_single"], d["oracle"], d["split_sizes"]
        parts.append(
            f"### {key}\n\n{len(d['solvers'])} shared solvers; fitted on {sizes['source_fit']} source / {sizes['target_fit']} target "
            f"items (calibrated on {sizes['source_dev']} / {sizes['target_dev']}), tested on the target's {sizes['target_test']} test items, "
            f"{d['seeds']} seeds, verifier {d['verifier'].get('name', '?')}; {round(100 * d['intervals']['confidence'])} % item-level "
            f"bootstrap intervals; Δ = transfer − in domain, paired on items and seeds. Best single shared solver: "
            f"{single['solver']} {single['accuracy']:.3f} {_ci(single['accuracy_ci'], '.3f')} at {single['cost_per_item_usd']:.3g} US$; "
            f"oracle {oracle['accuracy']:.3f} at {oracle['cost_per_item_usd']:.3g} US$.\n\n"
            + markdown_table(rows, ["router", "in domain: accuracy", "in domain: cost / item (US$)", "transfer: accuracy",
                                    "transfer: cost / item (US$)", "Δ accuracy, best points", "Δ accuracy, in-domain point"]))
    return "\n".join(parts)
