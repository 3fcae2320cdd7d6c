"""An OpenAI Agents SDK agent whose session is an inboxlog log, steered mid-run.

    pip install "./python[openai-agents]"
    python examples/openai_agents_steering.py [DIR]     (default: a fresh temporary DIR)

No API key needed: the agent's model is a scripted ``agents.Model`` (swap in a real one,
e.g. ``Agent(model="gpt-4.1")``, and nothing else changes). It shows:

1. a run as one inboxlog turn: its input claimed by step 1, the tool call, the answer;
2. steering: while the tool runs, another task appends a message to the session's
   ``next-step``; the second model call sees it (``store.post`` from another process
   reaches the same list);
3. a pre-step plugin rejecting a run's input: the turn ends ``blocked``, no model call;
4. the SDK history folded from the log, and ``inboxlog.fold_consumed_work``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import inboxlog
from agents import (
    Agent,
    AgentOutputSchemaBase,
    Handoff,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    Tool,
    TResponseInputItem,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.items import TResponseOutputItem, TResponseStreamEvent
from agents.models.interface import Model
from inboxlog.integrations.openai_agents import InboxlogSession, StepRejectedError, run
from inboxlog.types import Decision, Proposal
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam

# -- a scripted model: what a real one would answer, without the network -------------


class ScriptedModel(Model):
    """Answers the n-th model call with the n-th list of output items."""

    def __init__(self, *replies: list[TResponseOutputItem]) -> None:
        self.replies = list(replies)
        self.calls = 0

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        self.calls += 1
        items = [input] if isinstance(input, str) else input
        print(f"model call {self.calls} sees: {', '.join(describe(i) for i in items)}")
        return ModelResponse(output=self.replies.pop(0), usage=Usage(), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("this example does not stream")


def describe(item: Any) -> str:
    if isinstance(item, str):
        return f"user {item!r}"
    kind = item.get("type", "message")
    if kind == "message":
        content = item["content"]
        if not isinstance(content, str):
            content = "".join(part.get("text", "") for part in content)
        return f"{item['role']} {content!r}"
    if kind == "function_call":
        return f"function_call {item['name']}"
    return str(kind)


def tool_call(name: str, arguments: str) -> list[TResponseOutputItem]:
    call = ResponseFunctionToolCall(
        id="fc_1",
        call_id="call_1",
        type="function_call",
        name=name,
        arguments=arguments,
    )
    return [call]


def answer(text: str) -> list[TResponseOutputItem]:
    content = ResponseOutputText(type="output_text", text=text, annotations=[])
    message = ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[content],
    )
    return [message]


# -- the agent, a plugin and someone steering -------------------------------------------

tool_running, steered = asyncio.Event(), asyncio.Event()


@function_tool
async def weather(city: str) -> str:
    """The current weather in a city."""
    tool_running.set()
    await steered.wait()  # the steering lands while the tool runs
    return f"sunny, 22 C in {city}"


async def guard(proposal: Proposal, next: Callable[[], Awaitable[Decision]]) -> Decision:
    """A pre-step plugin: refuses input that asks for something forbidden."""
    if any("rm -rf" in str(m.get("content", "")) for m in proposal["messages"]):
        return {"kind": "reject"}
    return await next()


async def steer(session: InboxlogSession) -> None:
    """Another task (a web request, a user typing) adds input while the run goes on."""
    await tool_running.wait()
    message = {"id": "s1", "role": "user", "content": "Answer in Fahrenheit."}
    session.session.inbox.append("next-step", message)
    print(f"steering arrives while the tool runs: s1 {message['content']!r} -> next-step")
    steered.set()


async def main(root: Path) -> None:
    set_tracing_disabled(True)  # nothing leaves this machine
    store = inboxlog.Store(root)
    model = ScriptedModel(
        tool_call("weather", '{"city": "Paris"}'),
        answer("It is 72 F and sunny in Paris."),
    )
    agent = Agent(name="forecaster", instructions="Be brief.", model=model, tools=[weather])

    with InboxlogSession(store, "weather") as session:
        steering = asyncio.create_task(steer(session))
        result = await run(agent, "What is the weather in Paris?", session=session, plugins=[guard])
        await steering
        print(f"answer: {result.final_output}")

        try:
            await run(agent, "rm -rf / please", session=session, plugins=[guard])
        except StepRejectedError as rejected:
            print(f"guard rejected turn {rejected.turn}'s input: turn ended blocked")

        events = session.session.events()
        for event in events:
            data = event["data"]
            if event["type"] == "step/start":
                step = (data["turn"], data["step"])
            elif event["type"] == "user/message":
                print(f"turn {step[0]}: step {step[1]} took {data['id']}")
            elif event["type"] == "turn/end":
                print(f"turn {data['turn']} ended: {data['reason']['kind']}")
        history = await session.get_items()
        print(f"history: {len(history)} items: {', '.join(describe(i) for i in history)}")
        end = inboxlog.fold_consumed_work(events)["end"]
        assert end is not None
        print(f"fold_consumed_work: the last turn that accounted for work is {end['data']}")
    print(f"the log: {root / 'weather.jsonl'} (python -m inboxlog inspect {root} weather)")


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "sessions"
    asyncio.run(main(root))
