"""OpenAI's chat-completions wire format, as far as `dlab serve` reads and writes it: the request
body (validated, so a malformed one is a 400 naming the field), the error JSON, the completion."""

from __future__ import annotations

import time
from typing import Any, Literal

from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from delegation_lab.solvers.storable_text import clean_text  # noqa: F401 - the one text check, shared with solve

class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: str
    text: str | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")  # name, tool_call_id... are accepted and not forwarded

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[ContentPart]

    def text(self) -> str:
        """The message's text (a list of parts joined); only text parts are served."""
        if isinstance(self.content, str):
            return clean_text(self.content) or ""
        bad = [p.type for p in self.content if p.type != "text" or p.text is None]
        if bad:
            raise ValueError(f"only text content parts are served (got {', '.join(bad)})")
        return clean_text("".join(p.text or "" for p in self.content)) or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")

    include_usage: bool = False


class ChatRequest(BaseModel):
    """The fields dlab serve uses; the others (temperature, max_tokens...) are accepted and ignored:
    a policy answers with the decoding its solvers were evaluated with (solvers.<name>.decoding)."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    metadata: dict[str, str] | None = None

    @field_validator("messages")
    @classmethod
    def _ends_with_user(cls, messages: list[Message]) -> list[Message]:
        for m in messages:
            m.text()
        if messages[-1].role != "user":
            raise ValueError("the last message must be the user's")
        return messages

    def conversation(self) -> list[dict[str, str]]:
        return [{"role": m.role, "content": m.text()} for m in self.messages]

    def gold(self) -> str | None:
        """The client's `metadata.gold`, stored as UTF-8 can hold it."""
        return clean_text((self.metadata or {}).get("gold"))


def validation_message(e: ValidationError) -> tuple[str, str | None]:
    """The first problem of a request body, and its field path as OpenAI's `param` spells it."""
    first = e.errors()[0]
    param = ".".join(str(p) for p in first["loc"]) or None
    return f"{param}: {first['msg']}" if param else first["msg"], param


def error_response(status: int, message: str, type_: str, code: str | None = None, param: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """OpenAI's error body: {"error": {"message", "type", "param", "code"}}."""
    return JSONResponse({"error": {"message": message, "type": type_, "param": param, "code": code}},
                        status_code=status, headers=headers)


def completion(request_id: str, model: str, text: str, finish_reason: str, usage: dict[str, int],
               dlab: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion body, with what dlab decided in `dlab` (who answered, what it cost)."""
    return {
        "id": f"chatcmpl-{request_id}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason,
                     "logprobs": None}],
        "usage": usage, "dlab": dlab,
    }
