"""The typed shape of an OpenAI-compatible chat completion reply, as real servers send it.

Accepted: `content` as a string, as null, or as a list of parts (`{"type": "text", "text": ...}`,
other part types ignored); `usage` missing, null, not an object (`"n/a"`), or with null / missing /
non-integer counts — those counts are estimated instead; `tool_calls` (or the legacy
`function_call`) is recorded so the backend can refuse a reply that only calls a tool. Refused,
with a message that says why: anything that is not a JSON object with at least one choice holding
a message (`MalformedReply`, worth a retry), and negative token counts (`InvalidUsage`: the server
did answer, but its bill is nonsense, so the row becomes an error rather than a negative cost).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class MalformedReply(ValueError):
    """The body is not a chat completion (not JSON, no choices, no message)."""


class InvalidUsage(ValueError):
    """The reply is a completion but its token counts are impossible."""


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Lenient):
    type: str = "text"
    text: str | None = None


class Message(_Lenient):
    content: str | list[ContentPart] | None = None
    tool_calls: list[Any] | None = None
    function_call: Any = None  # the legacy single tool call

    @field_validator("tool_calls", mode="before")
    @classmethod
    def _list_or_nothing(cls, v: Any) -> Any:
        return v if isinstance(v, list) else None

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text or "" for p in self.content if p.type in ("text", "output_text"))
        return self.content or ""


class Choice(_Lenient):
    message: Message
    finish_reason: str | None = None

    @field_validator("finish_reason", mode="before")
    @classmethod
    def _any_reason(cls, v: Any) -> str | None:
        return None if v is None else str(v)


def _count(v: Any) -> int | None:
    """A token count as an int; anything that is not a whole number means "unknown" (estimated)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return None


class Usage(_Lenient):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @field_validator("prompt_tokens", "completion_tokens", mode="before")
    @classmethod
    def _whole_number_or_unknown(cls, v: Any) -> int | None:
        return _count(v)


class ChatCompletion(_Lenient):
    choices: list[Choice] = Field(min_length=1)
    usage: Usage | None = None

    @field_validator("usage", mode="before")
    @classmethod
    def _usage_object_or_nothing(cls, v: Any) -> Any:
        return v if isinstance(v, dict) else None

    @property
    def text(self) -> str:
        return self.choices[0].message.text

    @property
    def calls_a_tool(self) -> bool:
        """The model called a tool (`tool_calls` or the legacy `function_call`)."""
        message = self.choices[0].message
        return bool(message.tool_calls) or message.function_call is not None

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason

    def tokens(self) -> tuple[int | None, int | None]:
        """(prompt, completion) tokens the server reported; None where it did not say."""
        usage = self.usage or Usage()
        for name in ("prompt_tokens", "completion_tokens"):
            value = getattr(usage, name)
            if value is not None and value < 0:
                raise InvalidUsage(f"negative token count in reply: usage.{name} = {value}")
        return usage.prompt_tokens, usage.completion_tokens


def parse_chat_completion(body: bytes | str) -> ChatCompletion:
    """The reply as a ChatCompletion, or MalformedReply naming what is wrong with it."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise MalformedReply(f"not JSON ({type(e).__name__} at char {getattr(e, 'pos', '?')})") from None
    if not isinstance(data, dict):
        raise MalformedReply(f"a JSON {type(data).__name__}, not an object")
    try:
        return ChatCompletion.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "reply"
        raise MalformedReply(f"{where}: {first['msg']}") from None
