"""A Google ADK agent whose sessions live in inboxlog, steered mid-run, resumed after its
worker was killed.

    pip install "./python[adk]"
    python examples/adk_steering.py [DIR]     (default: a fresh temporary DIR)

No API key needed: the agent's model is a scripted ``BaseLlm`` (swap in a real one, e.g.
``LlmAgent(model="gemini-2.5-flash", ...)``, and nothing else changes). It shows:

1. ADK's ``Runner`` on :class:`InboxlogSessionService`, with :class:`InboxlogPlugin`: a run
   is one inboxlog turn, each model call one step;
2. steering: while the tool runs, another process posts a message to the session's
   ``next-step`` with ``store.post``; the second model call carries it;
3. a worker killed (SIGKILL) during its tool: the next worker to take the session closes
   the turn ``interrupted``, answers the tool call it cut off (its outcome unknown: the
   tool is not run again) and continues from exactly the history the log committed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncGenerator
from pathlib import Path

import inboxlog
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types
from inboxlog.integrations.adk import InboxlogPlugin, InboxlogSessionService

APP, USER, SESSION = "weather", "alice", "chat"
"""The ADK session the example runs."""


def log_id(store: inboxlog.Store) -> str:
    """The inboxlog id the session service keeps that ADK session under."""
    return InboxlogSessionService(store).log_id(APP, USER, SESSION)


# -- a scripted model: what a real one would answer, without the network -------------


class ScriptedModel(BaseLlm):
    """Asks for the weather tool first, then answers with the last user text it saw."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        last = llm_request.contents[-1]
        print(f"model call sees {len(llm_request.contents)} contents, the last: {describe(last)}")
        if last.role == "user" and "Paris" in describe(last):
            call = types.FunctionCall(name="weather", args={"city": "Paris"})
            yield LlmResponse(
                content=types.Content(role="model", parts=[types.Part(function_call=call)])
            )
            return
        text = "It is 72 F and sunny in Paris." if "Fahrenheit" in describe(last) else "Sunny."
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def describe(content: types.Content) -> str:
    parts = []
    for part in content.parts or ():
        if part.text is not None:
            parts.append(f"{content.role} {part.text!r}")
        elif part.function_response is not None:
            parts.append(f"tool-return {part.function_response.name}")
    return ", ".join(parts)


# -- the agent ------------------------------------------------------------------------


def agent(store: inboxlog.Store, during_tool: str) -> tuple[Runner, InboxlogSessionService]:
    """A runner on ``store``; ``during_tool`` says what the tool does while it runs:
    ``post`` (steering from another process), ``hang`` (until killed) or ``none``."""

    def weather(city: str) -> str:
        """The weather in a city."""
        if during_tool == "post":
            poster = (
                "import inboxlog, sys; inboxlog.Store(sys.argv[1]).post(sys.argv[2], "
                "'next-step', {'id': 'p1', 'content': 'Answer in Fahrenheit.'})"
            )
            subprocess.run([sys.executable, "-c", poster, ROOT, log_id(store)], check=True)
            print("steering posted from another process while the tool runs: p1 -> next-step")
        elif during_tool == "hang":
            print("tool running; waiting to be killed", flush=True)
            signal.pause()
        return f"sunny, 22 C in {city}"

    service = InboxlogSessionService(store)
    llm_agent = LlmAgent(name="assistant", model=ScriptedModel(), tools=[weather])
    app = App(name=APP, root_agent=llm_agent, plugins=[InboxlogPlugin(service)])
    return Runner(app=app, session_service=service), service


async def ask(store: inboxlog.Store, text: str, during_tool: str = "none") -> str:
    runner, service = agent(store, during_tool)
    if await service.get_session(app_name=APP, user_id=USER, session_id=SESSION) is None:
        await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
    answer = ""
    message = types.Content(role="user", parts=[types.Part(text=text)])
    async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
        if event.content and event.content.parts and event.content.parts[0].text:
            answer = event.content.parts[0].text
    await service.close()
    return answer


def report(store: inboxlog.Store) -> None:
    step = (0, 0)
    for event in store.inspect(log_id(store))[1]:
        data = event["data"]
        if event["type"] == "step/start":
            step = (data["turn"], data["step"])
        elif event["type"] == "user/message":
            print(f"turn {step[0]}: step {step[1]} took {data['id']}")
        elif event["type"] == "turn/end":
            print(f"turn {data['turn']} ended: {data['reason']['kind']}")


ROOT = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "--worker" else ""


def main() -> None:
    global ROOT
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        ROOT = sys.argv[2]
        asyncio.run(ask(inboxlog.Store(ROOT), "Weather in Paris?", during_tool="hang"))
        return
    ROOT = ROOT or str(Path(tempfile.mkdtemp()) / "sessions")
    store = inboxlog.Store(ROOT)

    print("answer:", asyncio.run(ask(store, "What is the weather in Paris?", during_tool="post")))
    report(store)

    worker = subprocess.Popen(
        [sys.executable, __file__, "--worker", ROOT], stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    for line in worker.stdout:
        print(f"worker: {line.rstrip()}")
        if line.startswith("tool running"):
            break
    os.kill(worker.pid, signal.SIGKILL)
    print(f"worker killed during its tool (exit {worker.wait()})")
    worker.stdout.close()

    answer = asyncio.run(ask(store, "Still there?"))
    for event in store.inspect(log_id(store))[1]:
        if event["type"] == "tool/result" and "error" in event["data"]:
            print(f"cut-off call answered: {event['data']['error']['code']}")
    print("answer:", answer)
    ends = [
        e["data"]["reason"]["kind"]
        for e in store.inspect(log_id(store))[1]
        if e["type"] == "turn/end"
    ]
    print(f"turns ended: {', '.join(ends)}")


if __name__ == "__main__":
    main()
