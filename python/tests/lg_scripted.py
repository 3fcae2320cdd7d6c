"""A scripted LangChain chat model that supports tools, for tests and the example: no
network, each call answers with the next reply."""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

Reply = AIMessage | BaseException | Callable[[], AIMessage] | Callable[[], Awaitable[AIMessage]]


class ScriptedChatModel(BaseChatModel):
    """Answers each call with the next reply: an ``AIMessage``, an exception to raise,
    or a function (sync, or async on the async path) returning one. Records every
    input."""

    replies: list[Any] = Field(default_factory=list)
    inputs: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _next(self, messages: list[BaseMessage]) -> Any:
        self.inputs.append(copy.deepcopy(messages))
        if not self.replies:
            raise AssertionError("the scripted model has no reply left")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        reply = self._next(messages)
        message = reply() if callable(reply) else reply
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self, messages: list[BaseMessage], *args: Any, **kwargs: Any
    ) -> ChatResult:
        reply = self._next(messages)
        message = reply() if callable(reply) else reply
        if isinstance(message, Awaitable):
            message = await message
        return ChatResult(generations=[ChatGeneration(message=message)])


def say(text: str, **metadata: Any) -> AIMessage:
    """A final answer."""
    return AIMessage(content=text, response_metadata=metadata)


def call(tool: str, call_id: str = "call_1", **args: Any) -> AIMessage:
    """A tool call."""
    return AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": call_id}])
