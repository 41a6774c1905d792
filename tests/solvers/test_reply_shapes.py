"""Chat completion replies in the shapes real OpenAI-compatible servers send, and the ones they
should not: every reply becomes an answer or an error row with a reason, never an exception."""

from __future__ import annotations

import json

import pytest

from delegation_lab.data.arith import generate
from delegation_lab.data.params import ArithParams
from delegation_lab.solvers.chat_reply import InvalidUsage, MalformedReply, parse_chat_completion

from tests.solvers.test_backend_openai_compat import expected_answer, make_solver, server  # noqa: F401 - `server` is a fixture


@pytest.fixture(scope="module")
def items():
    return generate(ArithParams(min_steps=1, max_steps=3), 3, seed=11)


def _parts(text: str) -> list[dict]:
    head, tail = text.split("####")
    return [{"type": "text", "text": head}, {"type": "image_url", "image_url": {"url": "x"}},
            {"type": "text", "text": "####" + tail}]


@pytest.mark.parametrize(
    ("setting", "estimated"),
    [
        ({"content": _parts}, False),                     # content as a list of parts
        ({"reply_extra": {"usage": "n/a"}}, True),        # usage that is not an object
        ({"reply_extra": {"usage": None}}, True),
        ({"reply_extra": {"usage": {"prompt_tokens": None, "completion_tokens": None}}}, True),
        ({"reply_extra": {"usage": {"total_tokens": 12}}}, True),
        ({"mode": "no_usage"}, True),                     # usage missing
    ],
    ids=["content_parts", "usage_na", "usage_null", "null_counts", "no_counts", "no_usage"],
)
def test_real_server_shapes_are_answers(server, items, setting, estimated):
    for name, value in setting.items():
        setattr(server, name, value)
    solver = make_solver(server.url, max_retries=0)
    answers = solver.solve(items)
    for item, answer in zip(items, answers, strict=True):
        assert answer.error is None, answer.error
        assert answer.parsed_answer == expected_answer(solver.request(item).messages)
        assert answer.tokens_in > 0 and answer.tokens_out > 0 and answer.cost_usd > 0
        assert (answer.extra is not None and json.loads(answer.extra).get("tokens_estimated") is True) == estimated


def test_null_content_is_an_empty_answer(server, items):
    server.content = None
    server.reply_extra = {"choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}
    answer = make_solver(server.url, max_retries=0).solve(items[:1])[0]
    assert answer.error is None and answer.answer_text == "" and answer.parsed_answer is None


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"<html>502 Bad Gateway</html>", "not JSON"),
        (b'["choices"]', "not an object"),
        (b'{"choices": []}', "choices"),
        (b'{"choices": [{"text": "legacy completion"}]}', "message"),
        (b'{"choices": [{"message": {"content": 42}}]}', "content"),
        (b"", "not JSON"),
    ],
    ids=["html", "json_list", "no_choice", "no_message", "content_number", "empty"],
)
def test_other_shapes_are_error_rows_with_a_reason(server, items, body, reason):
    server.raw = (200, body)
    answers = make_solver(server.url, max_retries=1).solve(items[:2])
    assert server.calls == 2 * 2  # retried once each: a malformed reply may be transient
    for a in answers:
        assert a.error is not None and "malformed reply" in a.error and reason in a.error, a.error
        assert a.answer_text is None and a.cost_usd == 0.0


@pytest.mark.parametrize("usage", [{"prompt_tokens": -5, "completion_tokens": 7}, {"prompt_tokens": 5, "completion_tokens": -1}])
def test_negative_usage_is_estimated_and_flagged_not_a_negative_cost(server, items, usage):
    # the one boundary shared with dlab serve (solvers.usage, issue 42): an impossible count is the estimate
    server.reply_extra = {"usage": usage}
    answers = make_solver(server.url, max_retries=3).solve(items[:2])
    assert server.calls == 2  # the server answered; asking again would pay again for the same nonsense
    for a in answers:
        assert a.error is None and json.loads(a.extra)["tokens_estimated"] is True
        assert a.cost_usd > 0.0 and a.tokens_in > 0 and a.tokens_out > 0


def test_a_bad_reply_in_a_batch_costs_its_own_row_only(server):
    more = generate(ArithParams(), 8, seed=12)
    server.raw, server.raw_calls = (200, b"{not json"), {3}
    server.reply_extra = {"usage": "n/a"}
    answers = make_solver(server.url, max_retries=0, concurrency=1).solve(more)
    assert [a.error is None for a in answers] == [True, True, False, True, True, True, True, True]
    assert "malformed reply" in answers[2].error


def test_parse_chat_completion_unit():
    reply = parse_chat_completion(json.dumps({
        "choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                     "finish_reason": "length"}],
        "usage": {"prompt_tokens": 3.0, "completion_tokens": "7"},
    }))
    assert reply.text == "ab" and reply.finish_reason == "length"
    assert reply.tokens() == (3, None)  # a count given as text is not trusted: estimated instead
    with pytest.raises(InvalidUsage, match="usage.completion_tokens = -2"):
        parse_chat_completion(b'{"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": -2}}').tokens()
    with pytest.raises(MalformedReply, match="not JSON"):
        parse_chat_completion(b"\xff\xfe")
