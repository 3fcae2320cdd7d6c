"""One ADK worker of ``test_approvals_adk.py``: a real ``Runner`` on
``InboxlogSessionService`` with ``InboxlogPlugin``, a scripted model (``adapters``) and a
``weather`` tool that needs a person's confirmation and counts each run of its body in a
file, so every process sees how often it ran.

As a program it is a worker killed with SIGKILL where it stops::

    python -P adk_approval_worker.py LOCATION SCHEMA POINT READY COUNT

``POINT`` is where it stops (writing ``READY``, then waiting to be killed): ``asking``
(the call's ``tool/call`` written, its ``approval/asked`` not), ``asked`` (asked, not
parked), ``decided`` (a run on the parked, decided session, before it resumes) or
``resuming`` (resumed, inside the tool).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))  # run as a program, under -P
from adapters import Reply, Script, adk_model, say, tool

import inboxlog

ID = "chat"
"""The ADK session (and its log's id)."""


def open_store(location: str, schema: str | None) -> inboxlog.Store:
    """The store at ``location`` (a JSONL directory or a PostgreSQL URL and schema)."""
    return inboxlog.Store.open(location, "sync", schema=schema or None)  # type: ignore[arg-type]


def runs(count: Path) -> int:
    """How often the tool's body ran."""
    return len(count.read_text().splitlines()) if count.exists() else 0


async def run(
    store: inboxlog.Store,
    count: Path,
    replies: Sequence[Reply],
    message: Any = None,
    *,
    first: Sequence[Any] = (),
    last: Sequence[Any] = (),
    needs: Callable[..., bool] | None = None,
    during_tool: Callable[[], None] | None = None,
) -> Script:
    """One run on session :data:`ID` with ``message`` (``None``: ``CONTINUE``), answered
    by ``replies``; ``first`` / ``last``: ADK plugins before / after inboxlog's;
    ``needs``: the tool's ``require_confirmation`` (default ``True``). ADK re-raises a
    plugin callback's error as the cause of its ``RuntimeError``: the cause is raised."""
    from google.adk.agents import LlmAgent
    from google.adk.apps import App
    from google.adk.runners import Runner
    from google.adk.tools import FunctionTool

    from inboxlog.integrations.adk import CONTINUE, InboxlogPlugin, InboxlogSessionService

    script = Script(*replies)

    def weather(city: str) -> str:
        """The weather in a city."""
        with count.open("a") as f:
            f.write(city + "\n")
        if during_tool is not None:
            during_tool()
        return f"sunny in {city}"

    service = InboxlogSessionService(store, log_id=lambda app, user, session: session)
    plugins = [*first, InboxlogPlugin(service), *last]
    confirm = FunctionTool(weather, require_confirmation=needs or True)
    agent = LlmAgent(name="assistant", model=adk_model(script), tools=[confirm])
    runner = Runner(app=App(name="app", root_agent=agent, plugins=plugins), session_service=service)
    if await service.get_session(app_name="app", user_id="u", session_id=ID) is None:
        await service.create_session(app_name="app", user_id="u", session_id=ID)
    try:
        async for _ in runner.run_async(
            user_id="u", session_id=ID, new_message=message or CONTINUE
        ):
            pass
    except RuntimeError as error:
        if isinstance(error.__cause__, inboxlog.InboxlogError):
            raise error.__cause__ from None
        raise
    finally:
        await service.close()
    return script


def text(value: str) -> Any:
    from google.genai import types

    return types.Content(role="user", parts=[types.Part(text=value)])


def stop_here(ready: Path) -> None:
    """Says where it is, then waits to be killed."""
    ready.write_text("ready")
    time.sleep(600)
    raise SystemExit("never killed")


def main(location: str, schema: str, point: str, ready: Path, count: Path) -> None:
    from google.adk.plugins.base_plugin import BasePlugin

    from inboxlog.integrations.adk.approvals import requests

    class Stop(BasePlugin):
        async def on_event_callback(self, *, invocation_context: Any, event: Any) -> None:
            if point == "asked" and requests(event):
                stop_here(ready)

        async def before_run_callback(self, *, invocation_context: Any) -> None:
            if point == "decided":
                stop_here(ready)

    def needs(city: str) -> bool:
        if point == "asking":
            stop_here(ready)
        return True

    store = open_store(location, schema)
    stop = [Stop("stop")]
    if point in ("asking", "asked"):
        coro = run(store, count, [tool("Paris")], text("Paris?"), last=stop, needs=needs)
    elif point == "decided":
        coro = run(store, count, [say("Sunny.")], first=stop)
    else:
        coro = run(store, count, [say("Sunny.")], during_tool=lambda: stop_here(ready))
    asyncio.run(coro)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]))
