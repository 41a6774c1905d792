"""The policies `dlab serve` lists as models: a single solver (`solver:A`), a saved router at one
operating point (`router:knn@lambda=0.5`, models/routers/knn.npz as the `routers` stage saved it),
and a cascade under the agreement verifier (`cascade:B>A`: B answers; the answer is kept when
`evaluation.verifier.models` other than B give the same final answer, else A answers).

A cascade's verifier is the one the frontier evaluated it with (`evaluation.verifier`, kind
`agreement`, compared by the label stage's matcher): the judge, gold and cached kinds decide on
answers that already have labels or verdicts, which a live request has not, so they are refused
for a cascade with the reason. Every call a policy makes is kept (`Served.calls`): usage and cost
add up all of them, and each is journalled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from delegation_lab.params.root import Params
from delegation_lab.data.items import Item
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.evaluation.agreement import agreement_verdicts
from delegation_lab.labeling.matchers import MatchSettings
from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.calls import ServedSolver
from delegation_lab.solvers.base import Answer

FORMS = "solver:<name>, router:<router>@<operating point>, cascade:<cheap>><strong>[>...]"


@dataclass
class Served:
    """What a policy did for one request: the kept answer, every call in order, its decision."""

    answer: Answer
    calls: list[Answer]
    decision: dict[str, Any] = field(default_factory=dict)

    @property
    def cost_usd(self) -> float:
        return sum(a.cost_usd for a in self.calls)

    def usage(self) -> dict[str, int]:
        tokens_in, tokens_out = sum(a.tokens_in for a in self.calls), sum(a.tokens_out for a in self.calls)
        return {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out}


class Policy:
    """Base: `name` (the model id clients send), `kind`, the solvers it may call."""

    kind = ""

    def __init__(self, name: str, solvers: dict[str, ServedSolver]):
        self.name = name
        self.solvers = solvers

    async def choose(self, item: Item) -> tuple[str | None, dict[str, Any]]:
        """The one solver that will answer (None: it depends on the answers) and the decision so far."""
        raise NotImplementedError

    async def run(self, item: Item, conversation: list[dict[str, str]]) -> Served:
        solver, decision = await self.choose(item)
        answer = await self.solvers[solver].answer(self.solvers[solver].request(item, conversation))
        return Served(answer, [answer], decision)


class SolverPolicy(Policy):
    kind = "solver"

    def __init__(self, name: str, solver: str, solvers: dict[str, ServedSolver]):
        super().__init__(name, solvers)
        self.solver = solver

    async def choose(self, item: Item) -> tuple[str | None, dict[str, Any]]:
        return self.solver, {"policy": "solver", "solver": self.solver}


class RouterPolicy(Policy):
    kind = "router"

    def __init__(self, name: str, router: Any, solvers: dict[str, ServedSolver]):
        super().__init__(name, solvers)
        self.router = router

    async def choose(self, item: Item) -> tuple[str | None, dict[str, Any]]:
        routed = (await asyncio.to_thread(lambda: self.router.route(self.router.inputs([item.question]))))[0]
        return routed.solver, {"policy": "router", **self.router.describe(), "solver": routed.solver,
                               "scores": routed.scores, "expected_cost_usd": routed.expected_cost_usd}


class CascadePolicy(Policy):
    kind = "cascade"

    def __init__(self, name: str, stages: list[str], params: Params, solvers: dict[str, ServedSolver]):
        super().__init__(name, solvers)
        self.stages = stages
        self.verifier = params.evaluation.verifier
        self.matcher = params.label.matcher
        self.settings = MatchSettings(params.label.numeric_tolerance, params.label.math_timeout_s)

    async def choose(self, item: Item) -> tuple[str | None, dict[str, Any]]:
        return None, {}

    async def run(self, item: Item, conversation: list[dict[str, str]]) -> Served:
        tasks: dict[str, asyncio.Task[Answer]] = {}

        def ask(solver: str) -> asyncio.Task[Answer]:  # each solver at most once per request
            if solver not in tasks:
                served = self.solvers[solver]
                tasks[solver] = asyncio.ensure_future(served.answer(served.request(item, conversation)))
            return tasks[solver]

        steps: list[dict[str, Any]] = []
        kept: Answer | None = None
        for i, solver in enumerate(self.stages):
            answer = await ask(solver)
            if i == len(self.stages) - 1:
                steps.append({"solver": solver, "accepted": answer.error is None, "last": True})
                kept = answer
                break
            if answer.error is not None:
                steps.append({"solver": solver, "accepted": False, "error": True})
                continue
            others = [m for m in self.verifier.models if m != solver]
            checks = await asyncio.gather(*(ask(m) for m in others))
            accepted = self._agrees(item, answer, checks)
            steps.append({"solver": solver, "accepted": accepted, "checked_by": others})
            if accepted:
                kept = answer
                break
        calls = [t.result() for t in tasks.values()]
        decision = {"policy": "cascade", "stages": self.stages, "verifier": f"agreement({','.join(self.verifier.models)})",
                    "min_agree": self.verifier.min_agree, "steps": steps, "solver": kept.solver}
        return Served(kept, calls, decision)

    def _agrees(self, item: Item, answer: Answer, checks: list[Answer]) -> bool:
        """The shared agreement verifier's verdict on `answer` (evaluation.agreement), no gold."""
        rows = [{"solver": a.solver, "item_id": item.item_id, "parsed_answer": a.parsed_answer, "answer_text": a.answer_text,
                 "error": a.error, "gold": None, "choices": None, "answer_format": None} for a in [answer, *checks]]
        frame = pl.DataFrame(rows, schema={"solver": pl.String, "item_id": pl.String, "parsed_answer": pl.String,
                                           "answer_text": pl.String, "error": pl.String, "gold": pl.String,
                                           "choices": pl.List(pl.String), "answer_format": pl.String})
        models = tuple(dict.fromkeys([*self.verifier.models, answer.solver]))
        verdicts = agreement_verdicts(frame, models, self.verifier.min_agree, self.matcher, self.settings)
        return verdicts[(answer.solver, item.item_id)]


def default_models(params: Params, layout: Layout) -> list[str]:
    """Every solver, and every saved router at each of its operating points."""
    from delegation_lab.routers.artifact import load_router

    names = [f"solver:{s}" for s in params.solvers]
    folder = layout.router("x").parent
    for path in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
        router, _ = load_router(path)
        names += [f"router:{path.stem}@{op}" for op in router.knobs]
    return names


def build_policies(names: list[str], params: Params, layout: Layout) -> dict[str, Policy]:
    """The policies named, each solver built once and shared; InputError / ConfigError naming the bad one."""
    from delegation_lab.routers.serve import SavedRouter

    solvers: dict[str, ServedSolver] = {}

    def solver(name: str, where: str) -> str:
        if name not in params.solvers:
            raise InputError(f"model {where!r}: no solver {name!r} in {layout.params_file} (solvers: {', '.join(params.solvers)})")
        if name not in solvers:
            solvers[name] = ServedSolver(name, params.solvers[name])
        return name

    policies: dict[str, Policy] = {}
    for name in names:
        kind, sep, rest = name.partition(":")
        if not sep or not rest:
            raise InputError(f"model {name!r}: expected {FORMS}")
        if kind == "solver":
            policies[name] = SolverPolicy(name, solver(rest, name), solvers)
        elif kind == "router":
            router_name, _, op = rest.partition("@")
            saved = SavedRouter(layout.router(router_name), op or None)
            for s in saved.solvers:
                solver(s, name)
            policies[name] = RouterPolicy(name, saved, solvers)
        elif kind == "cascade":
            stages = rest.split(">")
            if len(stages) < 2 or len(set(stages)) != len(stages):
                raise InputError(f"model {name!r}: a cascade names two or more distinct solvers, cheap first (cascade:B>A)")
            verifier = params.evaluation.verifier
            if verifier.kind != "agreement":
                raise ConfigError(str(layout.params_file), [
                    f"evaluation.verifier.kind: {verifier.kind!r} cannot decide live requests (model {name!r}): a served "
                    "cascade needs kind agreement with `models`, whose answers check each stage's answer"])
            for s in [*stages, *verifier.models]:
                solver(s, name)
            policies[name] = CascadePolicy(name, stages, params, solvers)
        else:
            raise InputError(f"model {name!r}: unknown kind {kind!r}; expected {FORMS}")
    return policies
