"""A Pydantic AI agent whose conversation is an inboxlog log, steered mid-run, resumed
after its worker was killed.

    pip install "./python[pydantic-ai]"
    python examples/pydantic_ai_steering.py [DIR]     (default: a fresh temporary DIR)

No API key needed: the agent's model is Pydantic AI's ``FunctionModel`` answering from a
script (swap in a real one, e.g. ``Agent("openai:gpt-5.2", ...)``, and nothing else
changes). It shows:

1. a run as one inboxlog turn: its prompt claimed by step 1, a tool call, the answer;
2. steering: while the tool runs, another process posts a message to the session's
   ``next-step`` with ``store.post``; the second model request carries it;
3. a worker killed (SIGKILL) during its model request: the next open closes its turn
   ``interrupted``, and a run without a prompt continues from exactly the history the
   log committed;
4. the conversation itself in the log (``store.messages``): each response, each tool
   call and its result, as any reader of the log sees it, not only Pydantic AI; stored
   once: the records of Pydantic AI's requests cite the prompts and tool results those
   events hold, by seq, rather than repeat them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import inboxlog
from inboxlog.integrations.pydantic_ai import MESSAGES, REF, InboxlogCapability, fold_messages
from pydantic_ai import Agent
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

# -- a scripted model: what a real one would answer, without the network -------------


class Script:
    """Answers the n-th model request with the n-th response; prints what it carries."""

    def __init__(self, *replies: ModelResponse) -> None:
        self.replies = list(replies)
        self.requests = 0

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests += 1
        print(f"request {self.requests} sees: {describe(messages[-1])}")
        return self.replies.pop(0)


def describe(message: ModelMessage) -> str:
    said = []
    for part in message.parts:
        if isinstance(part, UserPromptPart):
            said.append(f"user {part.content!r}")
        elif isinstance(part, ToolReturnPart):
            said.append(f"tool-return {part.tool_name}")
    return ", ".join(said) if isinstance(message, ModelRequest) else "a response"


def forecaster(
    model: FunctionModel, store: inboxlog.Store, root: Path, steer: bool
) -> Agent[None, str]:
    """The agent; with ``steer``, its first tool call has another process post steering."""
    agent: Agent[None, str] = Agent(
        model, instructions="Be brief.", capabilities=[InboxlogCapability(store)]
    )
    posted: list[str] = []

    @agent.tool_plain
    async def weather(city: str) -> str:
        """The current weather in a city."""
        if steer and not posted:  # the steering lands while the tool runs
            await post_steering(root)
            posted.append("p1")
        return f"sunny, 22 C in {city}"

    return agent


POSTER = """
import inboxlog, sys
message = {"id": "p1", "role": "user", "content": "Answer in Fahrenheit."}
inboxlog.Store(sys.argv[1]).post("chat", "next-step", message)
"""


async def post_steering(root: Path) -> None:
    """Another process (a web server, a user's terminal) posts to the session."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", POSTER, str(root))
    assert await proc.wait() == 0, "the poster failed"
    print("steering posted from another process while the tool runs: p1 -> next-step")


# -- a worker that gets killed ------------------------------------------------------------


async def worker(root: str, ready: str) -> None:
    """Runs turn 2 until its second model request, then blocks there to be killed."""

    async def block(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) < 7:  # the first request of the turn: call the tool
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Rome"})])
        await asyncio.to_thread(Path(ready).write_text, "calling")
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    agent = forecaster(FunctionModel(block), inboxlog.Store(root), Path(root), steer=False)
    await agent.run("And in Rome?", conversation_id="chat")


def kill_a_worker(root: Path) -> None:
    ready = root / "worker-ready"
    with subprocess.Popen([sys.executable, __file__, "--worker", str(root), str(ready)]) as proc:
        deadline = time.monotonic() + 120
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the worker never reached its model request")
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        print(f"worker killed during its model request (exit {proc.wait()})")


# -- the story ------------------------------------------------------------------------


def print_turns(events: list[inboxlog.types.Event]) -> None:
    step = (0, 0)
    for event in events:
        data = event["data"]
        if event["type"] == "step/start":
            step = (data["turn"], data["step"])
        elif event["type"] == "user/message":
            print(f"turn {step[0]}: step {step[1]} took {data['id']}")
        elif event["type"] == "turn/end":
            print(f"turn {data['turn']} ended: {data['reason']['kind']}")


async def main(root: Path) -> None:
    store = inboxlog.Store(root)
    script = Script(
        ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"})]),
        ModelResponse(parts=[TextPart("It is 72 F and sunny in Paris.")]),
    )
    result = await forecaster(FunctionModel(script), store, root, steer=True).run(
        "What is the weather in Paris?", conversation_id="chat"
    )
    print(f"answer: {result.output}")
    print_turns(store.inspect("chat")[1])

    kill_a_worker(root)
    events = store.inspect("chat")[1]
    committed = fold_messages(events)
    with store.open("chat") as session:  # opening for writing repairs the turn
        end = session.events()[-1]["data"]
        print(f"reopened: turn {end['turn']} ended {end['reason']['kind']}")

    async def resume(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        print(f"resumed: request sees {len(messages)} committed messages")
        assert len(messages) == len(committed)
        return ModelResponse(parts=[TextPart("Sunny in Rome too.")])

    agent = forecaster(FunctionModel(resume), store, root, steer=False)
    resumed = await agent.run(conversation_id="chat")
    print(f"answer: {resumed.output}")
    print_turns(store.inspect("chat")[1][len(events) :])
    print_transcript(store.messages("chat"))
    print_records(store.inspect("chat")[1])
    print(f"log: {root / 'chat.jsonl'}")


def print_records(events: Sequence[Mapping[str, Any]]) -> None:
    """What Pydantic AI's request records hold of the conversation: each prompt and tool
    result a reference to the event holding it, so it is stored once."""
    kinds = {e["seq"]: e["type"] for e in events}
    for event in events:
        if event["type"] == MESSAGES:
            for message in event["data"]["messages"]:
                for part in message.get("parts", []):
                    if REF in part:
                        shown = f"cites event {part[REF]} ({kinds[part[REF]]})"
                    else:
                        shown = f"holds a {part['part_kind']} part"
                    print(f"record {event['seq']}: {shown}")


def print_transcript(messages: list[dict[str, Any]]) -> None:
    """The conversation as the log's surface holds it, what any reader of the log sees:
    each response, each tool call and its result, each message that entered."""
    print("transcript:")
    for message in messages:
        content = message.get("content") or []  # none: the marker a resumed run enters
        if isinstance(content, str):  # an inbox message's own text
            content = [{"type": "text", "text": content}]
        for block in content:
            kind = block.get("type")
            if kind == "tool-call":
                shown = f"calls {block['name']}({block['arguments']})"
            elif kind == "tool-result":
                shown = "result: " + " ".join(b.get("text", "") for b in block["content"])
            else:
                shown = repr(block.get("text", ""))
            print(f"  {message.get('role', 'user')}: {shown}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        asyncio.run(worker(sys.argv[2], sys.argv[3]))
    else:
        target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "s"
        os.makedirs(target, exist_ok=True)
        asyncio.run(main(target))
