"""A worker for test_approvals_langgraph.py, run as a child process and killed with
SIGKILL where it waits: argv LOCATION SCHEMA MODE STAGE READY TESTS.

STAGE ``run``: the run stops for approval, the worker waits before letting the thread go
(nothing asked yet); ``ask``: it waits where it parks (asked, not parked); ``parked``: it
parks and waits; ``resume``: it resumes the run and waits inside the allowed tool."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

location, schema, mode, stage, ready, tests = sys.argv[1:7]
sys.path.insert(0, tests)

from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import HumanInTheLoopMiddleware  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from lg_scripted import ScriptedChatModel, call, say  # noqa: E402

import inboxlog  # noqa: E402
from inboxlog.integrations._driver import Turn  # noqa: E402
from inboxlog.integrations.langgraph import InboxlogMiddleware, InboxlogSaver  # noqa: E402


def wait() -> None:
    Path(ready).write_text(stage)
    time.sleep(3600)


@tool
def book(city: str) -> str:
    """Books a hotel in a city."""
    Path(ready).with_name("ran").open("a").write(city + "\n")
    if stage == "resume":
        wait()
    return f"booked {city}"


if stage == "ask":
    Turn.park = lambda self, state=None: wait()  # type: ignore[method-assign]

store = inboxlog.Store.open(location, "sync", schema=schema or None)  # type: ignore[arg-type]
saver = InboxlogSaver(store)
hitl = HumanInTheLoopMiddleware({"book": True}, interrupt_mode=mode)  # type: ignore[arg-type]
model = ScriptedChatModel(replies=[call("book", city="Paris"), say("Booked.")])
agent = create_agent(
    model, [book], middleware=[InboxlogMiddleware(saver), hitl], checkpointer=saver
)
config: Any = {"configurable": {"thread_id": "job"}}
if stage == "resume":
    agent.invoke(None, config)
else:
    agent.invoke({"messages": [{"role": "user", "content": "Book Paris."}]}, config)
    if stage == "run":
        wait()
    saver.close()
    wait()
