"""A scripted ADK model for the tests and the example: a real ``BaseLlm`` that answers the
n-th call with the n-th reply and records what each call saw, no network."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import PrivateAttr

Seen = list[tuple[str, str]]


@dataclass
class Reply:
    """A weather ``tool`` call, a ``text`` (``length``: cut at the token limit), an
    ``error`` to raise or ``hang`` until cancelled; ``before`` runs inside the call."""

    tool: str | None = None
    text: str = ""
    length: bool = False
    error: BaseException | None = None
    hang: bool = False
    before: Callable[[], None] | None = None
    usage: tuple[int, int] | None = None
    """The (prompt, answer) tokens the response reports."""


def seen_of(request: LlmRequest) -> Seen:
    """What a call saw, as (role, text) pairs; tool calls left out."""
    out: Seen = []
    for content in request.contents:
        for part in content.parts or ():
            if part.text is not None:
                out.append(("user" if content.role == "user" else "assistant", part.text))
            elif part.function_response is not None:
                # ADK answers a call {"result": ...}, or {"error": ...} when it failed.
                response = part.function_response.response or {}
                out.append(("tool", str(response.get("result", response.get("error")))))
    return out


class ScriptedLlm(BaseLlm):
    """Answers call n with reply n; ``seen`` holds what each call saw."""

    model: str = "scripted"
    _replies: list[Reply] = PrivateAttr(default_factory=list)
    _seen: list[Seen] = PrivateAttr(default_factory=list)
    _calling: asyncio.Event | None = PrivateAttr(default=None)

    def __init__(self, *replies: Reply, **data: Any) -> None:
        super().__init__(**data)
        self._replies = list(replies)

    @property
    def seen(self) -> list[Seen]:
        return self._seen

    def hanging(self) -> asyncio.Event:
        """An event set when a ``hang`` reply starts waiting (make it on the run's loop)."""
        self._calling = asyncio.Event()
        return self._calling

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self._seen.append(seen_of(llm_request))
        assert self._replies, f"no reply left for call {len(self._seen)}"
        reply = self._replies.pop(0)
        if reply.before is not None:
            reply.before()
        if reply.error is not None:
            raise reply.error
        if reply.hang:
            if self._calling is not None:
                self._calling.set()
            await asyncio.Event().wait()
        usage = None
        if reply.usage is not None:
            usage = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=reply.usage[0], candidates_token_count=reply.usage[1]
            )
        if reply.tool is not None:
            call = types.FunctionCall(name="weather", args={"city": reply.tool})
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)]),
                usage_metadata=usage,
            )
            return
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text=reply.text)]),
            finish_reason=types.FinishReason.MAX_TOKENS
            if reply.length
            else types.FinishReason.STOP,
            usage_metadata=usage,
        )
