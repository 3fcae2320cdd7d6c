"""A LangChain ``create_agent`` agent on an inboxlog session: steered from another
process mid-run, killed, and resumed by another worker.

    pip install "./python[langgraph]"
    python examples/langgraph_steering.py [DIR]     (default: a fresh temporary DIR)

No API key needed: the model is a scripted chat model that supports tools (swap in a
real one, e.g. ``create_agent("openai:gpt-4.1", ...)``, and nothing else changes). It
shows:

1. worker 1 runs the agent with ``InboxlogMiddleware`` and ``InboxlogSaver`` sharing the
   thread's session: the run is turn 1, its input is claimed by step 1, the model calls
   a tool;
2. while the tool runs, another process posts a steering message with ``store.post``;
   the second model call sees it;
3. worker 1 is killed (SIGKILL) during that call; worker 2 opens the session (the turn
   is closed ``interrupted``) and invokes with no new input: the model sees exactly the
   committed conversation, steering included, and answers;
4. the log, event by event.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import inboxlog
from inboxlog.integrations.langgraph import InboxlogMiddleware, InboxlogSaver
from inboxlog.types import Event
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

THREAD = {"configurable": {"thread_id": "trip"}}
POSTER = (
    "import inboxlog, sys; inboxlog.Store(sys.argv[1]).post("
    "'trip', 'next-step', {'id': 's1', 'content': 'Answer in Fahrenheit.'})"
)

# -- a scripted chat model: what a real one would answer, without the network -------


class ScriptedChatModel(BaseChatModel):
    """Answers the n-th call with the n-th reply (a message, or a function making one)
    and prints what each call sees."""

    replies: list[Any] = Field(default_factory=list)
    calls: int = 0
    name_: str = ""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.calls += 1
        print(
            f"{self.name_}model call {self.calls} sees: {describe(messages)}",
            flush=True,
        )
        reply = self.replies.pop(0)
        message: AIMessage = reply() if callable(reply) else reply
        return ChatResult(generations=[ChatGeneration(message=message)])


def describe(messages: Sequence[BaseMessage]) -> str:
    parts = []
    for m in messages:
        if isinstance(m, AIMessage) and m.tool_calls:
            parts.append("ai " + ", ".join(f"{c['name']}()" for c in m.tool_calls))
        else:
            parts.append(f"{m.type} {m.content!r}")
    return ", ".join(parts)


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    # A user types while the tool runs: a web server posts it to the session.
    root = os.environ["TRIP_STORE"]
    subprocess.run([sys.executable, "-c", POSTER, root], check=True)
    print("steering posted from another process while the tool runs: s1 'Answer in Fahrenheit.'")
    return f"sunny, 22 C in {city}"


def agent_on(saver: InboxlogSaver, model: BaseChatModel) -> Any:
    return create_agent(
        model, [weather], middleware=[InboxlogMiddleware(saver)], checkpointer=saver
    )


# -- worker 1: runs until it is killed during its second model call -------------------


def worker_1(root: str, ready: str) -> None:
    def hang() -> AIMessage:
        Path(ready).write_text("calling")
        time.sleep(3600)  # a stuck model; the process is killed here
        raise AssertionError("unreachable")

    call_weather = AIMessage(
        content="",
        tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_1"}],
    )
    model = ScriptedChatModel(replies=[call_weather, hang])
    saver = InboxlogSaver(inboxlog.Store(root))
    agent_on(saver, model).invoke(
        {"messages": [{"role": "user", "content": "What is the weather in Paris?"}]},
        THREAD,
    )


def run_worker_1(root: Path) -> None:
    ready = root / ".ready"
    env = {**os.environ, "TRIP_STORE": str(root)}
    args = [sys.executable, __file__, "--worker-1", str(root), str(ready)]
    with subprocess.Popen(args, env=env) as worker:
        while not ready.exists():
            if worker.poll() is not None:
                raise SystemExit(f"worker 1 exited early with status {worker.returncode}")
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    ready.unlink()
    print("worker 1 killed during model call 2")


# -- worker 2: resumes the thread from the log ---------------------------------------


def worker_2(root: Path) -> None:
    store = inboxlog.Store(root)
    with InboxlogSaver(store) as saver:
        turn_1 = turn_ends(saver.session("trip").events())
        print(f"worker 2 resumes: turn 1 ended {turn_1[0]['kind']}")
        model = ScriptedChatModel(replies=[AIMessage(content="It is 72 F and sunny in Paris.")])
        model.name_ = "worker 2: "
        final = agent_on(saver, model).invoke({"messages": []}, THREAD)
        print(f"answer: {final['messages'][-1].content}")
        print(f"turn 2 ended: {turn_ends(saver.session('trip').events())[1]['kind']}")


def turn_ends(events: Sequence[Event]) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


def print_log(store: inboxlog.Store) -> None:
    _, events = store.inspect("trip")
    print(f"\nthe log of session 'trip' ({len(events)} events):")
    summaries: dict[str, Callable[[Any], str]] = {
        "user/message": lambda d: f"{d['id']}: {d.get('content')!r}",
        "langchain/messages": lambda d: describe_dicts(d["messages"]),
        "langgraph/checkpoint": lambda d: f"checkpoint, new values of {sorted(d['values'])}",
        "langgraph/writes": lambda d: f"writes of task {d['task'][:8]}",
        "agent/inbox/spliced": lambda d: (
            f"{d['target']}: -{d.get('removedCount', 0)} "
            f"+{[m['id'][:8] for m in d['inserted']]}" + (" (posted)" if d.get("post") else "")
        ),
    }
    for e in events:
        summary = summaries.get(e["type"], lambda d: str(d))(e["data"])
        print(f"  {e['seq']:3} {e['type']:22} {summary}")


def describe_dicts(messages: list[dict[str, Any]]) -> str:
    from langchain_core.messages import messages_from_dict

    return describe(messages_from_dict(messages))


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker-1":
        worker_1(sys.argv[2], sys.argv[3])
        return
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp()) / "sessions"
    root.mkdir(parents=True, exist_ok=True)
    run_worker_1(root)
    worker_2(root)
    print_log(inboxlog.Store(root))


if __name__ == "__main__":
    main()
