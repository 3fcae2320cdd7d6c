"""ADK's responses in the conversation's terms (SPEC §15.5), for
:class:`~inboxlog.integrations.adk.InboxlogPlugin`: a model response's parts as blocks,
who answered, token counts and tool results as text; user messages as inbox messages
and back."""

from __future__ import annotations

import json
from typing import Any

from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.models.llm_response import LlmResponse
from google.genai import types

from inboxlog.integrations._driver import input_id, text
from inboxlog.types import Message


def inbox_message(content: types.Content, id: str | None = None) -> Message:
    """An ADK user message as an inbox message: its text as ``content`` and the whole
    ``types.Content`` as JSON under ``adk``."""
    text = "".join(part.text or "" for part in content.parts or ())
    return {
        "id": id or input_id(),
        "role": "user",
        "content": text,
        "adk": content.model_dump(mode="json", exclude_none=True),
    }


def adk_content(message: Message) -> types.Content | None:
    """An inbox message as the ``types.Content`` the model sees (``None`` for the
    continuation marker, which carries no input): its ``adk`` JSON while that still says
    what its ``content`` says (a pre-step plugin may have rewritten it), else its text."""
    content = message.get("content")
    if "adk" in message:
        adk = types.Content.model_validate(message["adk"])
        if content is None or content == "".join(p.text or "" for p in adk.parts or ()):
            return adk
    if content is None:
        return None
    text = content if isinstance(content, str) else str(content)
    return types.Content(role="user", parts=[types.Part(text=text)])


def from_model(event: Event) -> bool:
    """Whether ``event`` is a whole model response (not a tool's, not a user's)."""
    content = event.content
    return (
        not event.partial
        and event.author != "user"
        and content is not None
        and content.role == "model"
        and bool(content.parts)
    )


def blocks(event: Event) -> list[dict[str, Any]]:
    """A model response's parts as the conversation's blocks: text, reasoning (a
    thought), tool calls (their arguments as JSON text); any other part kept whole
    under ``adk``, as ADK's JSON."""
    blocks: list[dict[str, Any]] = []
    for part in event.content.parts or () if event.content else ():
        asked = part.function_call
        if asked is not None:
            arguments = json.dumps(asked.args or {}, ensure_ascii=False, default=str)
            blocks.append(
                {"type": "tool-call", "id": asked.id, "name": asked.name, "arguments": arguments}
            )
        elif part.text is not None and not part.thought:
            blocks.append(text(part.text))
        elif part.text is not None:
            blocks.append({"type": "reasoning", "text": part.text})
        else:
            blocks.append({"type": "adk", "part": part.model_dump(mode="json", exclude_none=True)})
    return blocks


def source(context: InvocationContext, event: Event) -> tuple[str, str]:
    """Who answered: the provider and the model (the one the response names, else the
    agent's)."""
    model = getattr(context.agent, "canonical_model", None)
    name = event.model_version or str(getattr(model, "model", "") or "")
    if "/" in name:  # LiteLLM's "provider/model"
        provider, _, name = name.partition("/")
    elif name.startswith("gemini"):
        provider = "google"
    elif name.startswith("claude"):
        provider = "anthropic"
    else:
        provider = type(model).__name__
    return provider, name


def usage(metadata: types.GenerateContentResponseUsageMetadata | None) -> dict[str, int] | None:
    """ADK's token counts in the reference's keys."""
    if metadata is None:
        return None
    usage = {
        "inputTokens": metadata.prompt_token_count or 0,
        "outputTokens": metadata.candidates_token_count or 0,
    }
    for key, count in (
        ("cacheReadTokens", metadata.cached_content_token_count),
        ("reasoningTokens", metadata.thoughts_token_count),
    ):
        if count:
            usage[key] = count
    return usage


def result_text(result: Any) -> str:
    """A tool's result as text: a string as it is (also as ADK's ``{"result": ...}``),
    anything else as JSON."""
    if isinstance(result, dict) and set(result) == {"result"}:
        result = result["result"]
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False, default=str)


def calls_tools(response: LlmResponse) -> bool:
    return bool(
        response.content and any(part.function_call for part in response.content.parts or ())
    )


__all__ = [
    "adk_content",
    "blocks",
    "calls_tools",
    "from_model",
    "inbox_message",
    "result_text",
    "source",
    "usage",
]
