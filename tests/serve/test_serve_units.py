"""`dlab serve`'s parts without a server: the policy names, the request body's validation, the bounded
queue, and the `chat` template's request hash (the same as `solve`'s for a served item)."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from delegation_lab.params.root import load_params
from delegation_lab.errors import ConfigError, InputError
from delegation_lab.pipeline.layout import Layout
from delegation_lab.serve.backpressure import Admission, QueueFull
from delegation_lab.serve.calls import ServedSolver, served_item
from delegation_lab.serve.policies import build_policies
from delegation_lab.serve.wire import ChatRequest, validation_message
from delegation_lab.solvers import build_solver

from tests.conftest import REPO


@pytest.fixture(scope="module")
def params():
    return load_params(REPO / "params.yaml")


def test_policy_names_are_checked_naming_the_model(params, tmp_path):
    layout = Layout(tmp_path)
    policies = build_policies(["solver:A", "solver:C"], params, layout)
    assert [p.kind for p in policies.values()] == ["solver", "solver"]
    assert policies["solver:A"].solvers is policies["solver:C"].solvers  # each solver built once, shared
    for bad, says in [("A", "expected solver:<name>"), ("solver:Z", "no solver 'Z'"), ("oracle:A", "unknown kind 'oracle'"),
                      ("cascade:A", "two or more distinct"), ("router:knn@lambda=0.5", "no saved router")]:
        with pytest.raises(InputError, match=says):
            build_policies([bad], params, layout)
    with pytest.raises(ConfigError, match="evaluation.verifier.kind: 'judge' cannot decide live requests"):
        build_policies(["cascade:C>A"], params, layout)


def test_a_served_plain_question_has_the_request_hash_solve_computes(params):
    conversation = [{"role": "user", "content": "What is 6 * 7?"}]
    item = served_item(conversation)
    served = ServedSolver("B", params.solvers["B"]).request(item, conversation)
    assert served.messages == conversation  # sent exactly as the client wrote it
    assert served.request_hash == build_solver("B", params.solvers["B"]).request(item).request_hash
    longer = [{"role": "system", "content": "Be brief."}, *conversation]
    other = ServedSolver("B", params.solvers["B"]).request(served_item(longer), longer)
    assert other.messages == longer and other.request_hash != served.request_hash
    assert served_item(longer).item_id != item.item_id


@pytest.mark.parametrize("body, param", [
    ({"model": "m", "messages": []}, "messages"),
    ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages.0.role"),
    ({"model": "m", "messages": [{"role": "user", "content": 3}]}, "messages.0.content"),
    ({"messages": [{"role": "user", "content": "x"}]}, "model"),
])
def test_malformed_bodies_name_the_field(body, param):
    with pytest.raises(ValidationError) as e:
        ChatRequest.model_validate(body)
    assert validation_message(e.value)[1].startswith(param)


def test_parts_of_text_are_joined():
    request = ChatRequest.model_validate({"model": "m", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})
    assert request.conversation() == [{"role": "user", "content": "ab"}]


def test_the_queue_admits_concurrency_plus_queue_size_then_refuses():
    async def scenario() -> tuple[int, int, int]:
        admission = Admission(concurrency=2, queue_size=1)
        release = asyncio.Event()
        refused: list[int] = []

        async def request() -> None:
            try:
                async with admission.slot():
                    await release.wait()
            except QueueFull as e:
                refused.append(e.retry_after_s)

        tasks = [asyncio.create_task(request()) for _ in range(4)]
        await asyncio.sleep(0.05)
        working, waiting = admission.working, admission.admitted - admission.working
        release.set()
        await asyncio.gather(*tasks)
        assert admission.admitted == 0 and admission.working == 0
        return working, waiting, len(refused) and refused[0]

    working, waiting, retry_after = asyncio.run(scenario())
    assert (working, waiting) == (2, 1) and retry_after >= 1
