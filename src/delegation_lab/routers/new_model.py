"""A new model with n labelled answers (`dlab new-model PROJECT`): how well the `irt` router routes
to a model it was not trained on, once it has seen n of that model's answers (docs/new_model.md).

For each held-out model h (the `top` most accurate on the fitting items and `random` others drawn
with the project's seed) and each seed of `routers.seeds`:

1. `base`: the `irt` router fitted (and calibrated) on the project's train split without h;
2. for each n in `answers`: a copy of `base` given h's labelled answers to n fitting items (a seeded
   draw; smaller n are prefixes of larger) through `IrtRouter.add_model`, which fits h's ability
   only; h's expected cost is its mean fitting cost for every n (a price is known before any answer);
3. `retrained`: the router fitted from scratch on every model with all the fitting labels.

Each is scored on the test split at each lambda of `lambdas` by the shared decision rule: accuracy
and cost of the routed answers, the share of items sent to h, and the recall of h where h is the
utility-best (the oracle at that lambda: argmax of gold correctness - lambda * cost / reference cost,
ties to the cheaper, as `utility_choice`). Intervals: the project's item bootstrap
(`evaluation.intervals`) with held-out model x seed resampled as seeds; `retrained - n` is paired.
Correctness is gold: a question-only router reads no answer, so no verifier enters.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, replace

import numpy as np

from delegation_lab.errors import InputError
from delegation_lab.evaluation import ItemBootstrap, paired_bootstrap
from delegation_lab.evaluation.params import IntervalParams
from delegation_lab.pipeline.torch_runtime import deterministic_torch
from delegation_lab.routers.base import utility_choice
from delegation_lab.routers.irt import IrtRouter
from delegation_lab.routers.params import RoutersParams
from delegation_lab.routers.study import RoutingData, fit_router, router_seed
from delegation_lab.routers.transfer import Project, load_project_data

ROUTER = "irt"
ANSWERS = (0, 5, 10, 20, 50, 100)
LAMBDAS = (0.0, 0.4)


@dataclass
class Scored:
    """Per test item: correctness and cost of the routed answer, whether h was chosen, whether h was
    the utility-best, and the router's predicted P(h right)."""

    correct: np.ndarray
    cost: np.ndarray
    chose_new: np.ndarray
    new_best: np.ndarray
    predicted: np.ndarray


def without(data: RoutingData, j: int) -> RoutingData:
    keep = [k for k in range(len(data.solvers)) if k != j]
    return replace(data, correct=data.correct[:, keep], cost=data.cost[:, keep], solvers=[data.solvers[k] for k in keep])


def held_out_models(data: RoutingData, top: int, random: int, seed: int) -> list[int]:
    """The `top` most accurate solvers on the fitting items (then the cheaper), and `random` of the rest."""
    fit = data.rows("train")
    acc, cost = data.correct[fit].mean(axis=0), data.cost[fit].mean(axis=0)
    order = [int(j) for j in np.lexsort((cost, -acc))]
    rest = order[top:]
    drawn = np.random.default_rng([seed, len(data.solvers)]).choice(len(rest), size=min(random, len(rest)), replace=False)
    return order[:top] + sorted(rest[k] for k in drawn)


def score(router: IrtRouter, data: RoutingData, new: int, lam: float) -> Scored:
    """Route the test split with `router` (whose solvers are `data.solvers` in any order) at `lam`."""
    rows = data.rows("test")
    columns = [data.solvers.index(s) for s in router.solvers]
    correct, cost = data.correct[rows][:, columns], data.cost[rows][:, columns]
    chosen, predicted, _ = router.route(data.inputs.take(rows), lam)
    new_col = router.solvers.index(data.solvers[new])
    best = utility_choice(correct.astype(float), cost, lam, router.reference_cost)
    picked = np.arange(len(rows))
    return Scored(correct[picked, chosen].astype(float), cost[picked, chosen], chosen == new_col, best == new_col,
                  predicted[:, new_col])


def run_new_model(project: Project, answers: tuple[int, ...] = ANSWERS, lambdas: tuple[float, ...] = LAMBDAS,
                  top: int = 5, random: int = 5, progress: bool = False) -> dict:
    """The experiment of the module docstring on `project`'s labelled answers; a JSON-able dict."""
    params = project.params.routers
    data = load_project_data(project, list(project.params.solvers), params)
    return {"project": str(project.layout.root),
            **new_model_experiment(data, params, project.params.evaluation.intervals, answers, lambdas, top, random, progress)}


def new_model_experiment(data: RoutingData, params: RoutersParams, iv: IntervalParams, answers: tuple[int, ...] = ANSWERS,
                         lambdas: tuple[float, ...] = LAMBDAS, top: int = 5, random: int = 5, progress: bool = False) -> dict:
    """The experiment on one routing table (`routers.study.RoutingData`) with the project's router params and intervals."""
    start = time.perf_counter()
    fit = data.rows("train")
    if not answers or min(answers) < 0 or max(answers) > fit.size:
        raise InputError(f"--answers {list(answers)}: each n must lie in [0, {fit.size}] (the project's fitting items)")
    if not lambdas or min(lambdas) < 0:
        raise InputError(f"--lambda {list(lambdas)}: cost weights must be >= 0")
    held = held_out_models(data, top, random, params.seed)
    # scores[(h, key, lam)] -> one Scored per seed; key is n or "retrained"
    scores: dict[tuple[int, object, float], list[Scored]] = {}
    with deterministic_torch(params.torch_threads):
        for s in range(params.seeds):
            seed = router_seed(params, s)
            retrained = fit_router(ROUTER, params, data, seed)
            for h in held:
                for lam in lambdas:
                    scores.setdefault((h, "retrained", lam), []).append(score(retrained, data, h, lam))
                base = fit_router(ROUTER, params, without(data, h), seed)
                order = np.random.default_rng([params.seed, s, h]).permutation(fit)
                for n in answers:
                    router = copy.deepcopy(base)
                    rows = order[:n]
                    router.add_model(data.solvers[h], data.inputs.take(rows), data.correct[rows, h], float(data.cost[fit, h].mean()))
                    for lam in lambdas:
                        scores.setdefault((h, n, lam), []).append(score(router, data, h, lam))
            if progress:
                print(f"new-model: seed {s + 1} of {params.seeds} done ({time.perf_counter() - start:.1f} s)")
    boot = ItemBootstrap(data.rows("test").size, iv.resamples, iv.confidence, iv.seed)
    return {
        "router": ROUTER, "params": params.irt.model_dump(),
        "solvers": len(data.solvers), "fitting_items": int(fit.size), "test_items": int(data.rows("test").size),
        "seeds": params.seeds, "embedding": data.embedder,
        "held_out": [data.solvers[h] for h in held],
        "summary": {f"{lam:g}": summary(scores, held, answers, lam, boot, data.correct[data.rows("test")].mean(axis=0))
                    for lam in lambdas},
        "per_model": per_model(scores, data, held, answers, lambdas[0]),
        "intervals": {"confidence": iv.confidence, "resamples": iv.resamples,
                      "kind": "item bootstrap, held-out model x seed resampled as seeds, retrained - n paired"},
        "runtime_s": round(time.perf_counter() - start, 1),
    }


def _stack(scores: dict, held: list[int], key: object, lam: float, field: str) -> np.ndarray:
    """[held-out model x seed, test items] of one field."""
    return np.stack([getattr(sc, field) for h in held for sc in scores[(h, key, lam)]]).astype(float)


def _recall(scores: dict, held: list[int], key: object, lam: float) -> float | None:
    chose, best = _stack(scores, held, key, lam, "chose_new"), _stack(scores, held, key, lam, "new_best")
    return float(chose[best > 0].mean()) if best.any() else None


def summary(scores: dict, held: list[int], answers: tuple[int, ...], lam: float, boot: ItemBootstrap,
            actual: np.ndarray) -> list[dict]:
    """One row per n (then `retrained`): pooled over the held-out models and seeds; `actual`: each
    solver's test accuracy."""
    full = _stack(scores, held, "retrained", lam, "correct")
    rows = []
    for key in (*answers, "retrained"):
        acc, cost = _stack(scores, held, key, lam, "correct"), _stack(scores, held, key, lam, "cost")
        row = {"answers": key, "accuracy": float(acc.mean()), "accuracy_ci": list(boot.interval(acc)),
               "cost_per_item_usd": float(cost.mean()), "share_to_new": float(_stack(scores, held, key, lam, "chose_new").mean()),
               "recall_where_best": _recall(scores, held, key, lam), "ability_error": ability_error(scores, held, key, lam, actual)}
        if key != "retrained":
            row["vs_retrained"] = paired_bootstrap(boot, acc, full)
        rows.append(row)
    return rows


def ability_error(scores: dict, held: list[int], key: object, lam: float, actual: np.ndarray) -> float:
    """Mean over held-out models and seeds of |the router's mean predicted P(h right) - h's test accuracy|."""
    return float(np.mean([abs(sc.predicted.mean() - actual[h]) for h in held for sc in scores[(h, key, lam)]]))


def per_model(scores: dict, data: RoutingData, held: list[int], answers: tuple[int, ...], lam: float) -> dict[str, dict]:
    """Each held-out model's test accuracy and the router's mean predicted P(right) on the test items
    (mean over seeds) for every n and retrained: how well its answers place it."""
    test = data.rows("test")
    return {data.solvers[h]: {"test_accuracy": float(data.correct[test, h].mean()),
                              **{str(key): float(np.mean([sc.predicted.mean() for sc in scores[(h, key, lam)]]))
                                 for key in (*answers, "retrained")}} for h in held}


def new_model_markdown(result: dict) -> str:
    """The pooled table of `run_new_model` per lambda, then the per-model placement table."""
    from delegation_lab.tracking.compare import markdown_table

    out = [f"`{result['project']}`: {result['solvers']} models, {result['fitting_items']} fitting and "
           f"{result['test_items']} test items, {result['seeds']} seeds; held out: {', '.join(result['held_out'])} "
           f"({result['runtime_s']} s)\n"]
    for lam, rows in result["summary"].items():
        table = [{
            "answers n": r["answers"],
            "routed accuracy [95 % CI]": f"{r['accuracy']:.3f} [{r['accuracy_ci'][0]:.3f}, {r['accuracy_ci'][1]:.3f}]",
            "Δ vs retrained [95 % CI]": _difference(r.get("vs_retrained")),
            "cost / item, $": f"{r['cost_per_item_usd']:.5f}", "share to new model": f"{r['share_to_new']:.3f}",
            "recall where utility-best": "—" if r["recall_where_best"] is None else f"{r['recall_where_best']:.3f}",
            "abs. error of its accuracy": f"{r['ability_error']:.3f}",
        } for r in rows]
        out.append(f"\nλ = {lam}, pooled over the held-out models and seeds:\n\n" + markdown_table(table, list(table[0])))
    models = result["per_model"]
    keys = [k for k in next(iter(models.values())) if k != "test_accuracy"]
    columns = [f"n={k}" if k != "retrained" else k for k in keys]
    per = [{"held-out model": m, "test accuracy": f"{v['test_accuracy']:.3f}", **{c: f"{v[k]:.3f}" for c, k in zip(columns, keys, strict=True)}}
           for m, v in models.items()]
    out.append("\nThe router's mean predicted P(right) of each held-out model on the test items (mean over seeds):\n\n"
               + markdown_table(per, ["held-out model", "test accuracy", *columns]))
    return "".join(out)


def _difference(vs: dict | None) -> str:
    return "—" if vs is None else f"{vs['difference']:+.3f} [{vs['ci_low']:+.3f}, {vs['ci_high']:+.3f}]"
