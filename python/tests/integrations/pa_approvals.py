"""A Pydantic AI agent that stops for approval (SPEC §17.4), for
``test_approvals_pydantic_ai.py``: built in process, or run as a worker that is killed
with SIGKILL at a named point (``python -P pa_approvals.py POINT LOCATION SCHEMA RAN
READY``).

Its model (Pydantic AI's ``FunctionModel``, no network) answers a request without tool
results with three calls at once: ``delete`` (``requires_approval=True``), ``archive``
(raises ``ApprovalRequired`` with a reason until approved) and ``read`` (runs freely);
a request with tool results it answers with their texts. Each run of ``delete`` and
``archive`` appends the tool's name to the file ``ran``, so a count survives the worker.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ApprovalRequired, DeferredToolRequests, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import inboxlog
from inboxlog.integrations import _driver as driver
from inboxlog.integrations.pydantic_ai import InboxlogCapability

QUESTION = "Clean up a.txt"
CALLS = {"delete": "call-delete", "archive": "call-archive", "read": "call-read"}
REASON = "archiving moves the file off this machine"

Seen = list[list[tuple[str, str]]]


def ran(path: Path) -> list[str]:
    """The runs of the tools that need approval, in order."""
    return path.read_text().split() if path.exists() else []


def respond(seen: Seen) -> Callable[[list[ModelMessage], AgentInfo], ModelResponse]:
    """The model: three calls for a request without tool results, else the results'
    texts; what each call saw (user prompts and tool results) is added to ``seen``."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        saw = [
            ("user" if isinstance(p, UserPromptPart) else "tool", str(p.content))
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, (UserPromptPart, ToolReturnPart))
        ]
        seen.append(saw)
        last = messages[-1]
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns or len(seen) > 1:
            return ModelResponse(parts=[TextPart(" | ".join(str(p.content) for p in returns))])
        args = {"path": "a.txt"}
        return ModelResponse(parts=[ToolCallPart(n, args, c) for n, c in CALLS.items()])

    return model


def agent(
    store: inboxlog.Store | inboxlog.Session,
    ran_file: Path,
    seen: Seen | None = None,
    inside: Callable[[], None] | None = None,
    hold: Callable[[], Awaitable[None]] | None = None,
) -> Agent[None, str | DeferredToolRequests]:
    """The agent on ``store`` with the capability; ``inside`` runs inside ``delete``,
    then ``hold`` is awaited there."""
    capability = InboxlogCapability(store)
    model = FunctionModel(respond([] if seen is None else seen))
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        model, output_type=[str, DeferredToolRequests], capabilities=[capability]
    )

    def note(name: str) -> None:
        with ran_file.open("a") as f:
            f.write(name + "\n")

    @agent.tool_plain(requires_approval=True)
    async def delete(path: str) -> str:
        note("delete")
        if inside is not None:
            inside()
        if hold is not None:
            await hold()
        return f"deleted {path}"

    @agent.tool
    def archive(ctx: RunContext[None], path: str) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"reason": REASON})
        note("archive")
        return f"archived {path}"

    @agent.tool_plain
    def read(path: str) -> str:
        return f"contents of {path}"

    return agent


def main(point: str, location: str, schema: str, ran_file: Path, ready: Path) -> None:
    """Runs the agent on session ``job`` and waits at ``point`` (``ready`` written) to be
    killed: ``before-asked`` (the first call's ``tool/call`` durable, not its
    ``approval/asked``), ``after-asked`` (every ``asked`` durable, not parked),
    ``parked`` (the run returned, the turn parked), ``resumed`` (a resuming run, once
    ``turn/resumed`` is durable), ``in-tool`` (a resuming run, inside ``delete``)."""

    def wait(*_: Any, **__: Any) -> None:
        ready.write_text(point)
        time.sleep(600)

    if point == "before-asked":
        driver.Turn.ask = wait  # type: ignore[method-assign]
    elif point == "after-asked":
        driver.Turn.park = wait  # type: ignore[method-assign]
    elif point == "resumed":
        taken_up = driver.Turn.resume

        def resume(log: inboxlog.Session, *a: Any, **kw: Any) -> Any:
            resumed = taken_up(log, *a, **kw)
            if resumed is not None:
                wait()
            return resumed

        driver.Turn.resume = resume  # type: ignore[method-assign,assignment]
    store = inboxlog.Store.open(location, "sync", schema=schema or None)
    prompt = QUESTION if point in ("before-asked", "after-asked", "parked") else None
    inside = wait if point == "in-tool" else None
    asyncio.run(agent(store, ran_file, inside=inside).run(prompt, conversation_id="job"))
    if point == "parked":
        wait()  # a worker waiting in place for the decisions


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))
