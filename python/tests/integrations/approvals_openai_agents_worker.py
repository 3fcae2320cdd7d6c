"""An agent whose one tool needs a person's approval, run through the OpenAI Agents SDK
integration, for ``test_approvals_openai_agents.py``: in process, and as the worker the
killed-worker cases run in a child process and kill at a chosen point::

    python -P approvals_openai_agents_worker.py LOCATION SCHEMA ID RUNS POINT

``POINT`` is where the worker dies (it sends itself SIGKILL, so no timing is involved):
``ask`` (the call dispatched, its approval not yet asked), ``park`` (asked, the turn not
yet parked), ``wait`` (parked: it prints ``parked`` and waits in place until killed),
``resumed`` (a resuming run, after ``turn/resumed``, before the tool) and ``tool`` (a
resuming run, inside the tool, after its side effect). ``RUNS`` is the file each run of
the tool appends one line to, so every process's runs are counted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from adapters import Script, openai_model, say, tool
from agents import Agent, RunResult, RunState, function_tool, set_tracing_disabled

import inboxlog
from inboxlog.integrations import openai_agents
from inboxlog.integrations._driver import Turn

Q = "Weather in Paris?"


def agent(script: Script, runs: Path) -> Agent[Any]:
    """An agent answered by ``script`` whose tool ``weather`` needs approval; each run of
    the tool appends its city to ``runs`` before the script's ``during_tool``."""

    def weather(city: str) -> str:
        """The weather in a city."""
        with runs.open("a") as f:
            f.write(city + "\n")
        return script.weather(city)

    set_tracing_disabled(True)
    tools = [function_tool(weather, name_override="weather", needs_approval=True)]
    return Agent(
        name="assistant", instructions="Be brief.", model=openai_model(script), tools=tools
    )


async def go(
    store: inboxlog.Store, id: str, input: str | None, script: Script, runs: Path
) -> RunResult:
    """One ``openai_agents.run`` on session ``id``, opened for the length of the run."""
    with openai_agents.InboxlogSession(store, id) as session:
        return await openai_agents.run(agent(script, runs), input, session=session)


def ran(runs: Path) -> list[str]:
    """The tool's runs so far, in every process."""
    return runs.read_text().splitlines() if runs.exists() else []


def die(*_args: Any, **_kw: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


async def die_async(*_args: Any, **_kw: Any) -> Any:
    die()


def main(location: str, schema: str, id: str, runs: Path, point: str) -> None:
    store = inboxlog.Store.open(location, "sync", schema=schema or None)  # type: ignore[arg-type]
    if point == "ask":
        Turn.ask = die  # type: ignore[method-assign]
    elif point == "park":
        Turn.park = die  # type: ignore[method-assign]
    elif point == "resumed":
        RunState.from_json = die_async  # type: ignore[method-assign]
    if point in ("ask", "park", "wait"):
        result = asyncio.run(go(store, id, Q, Script(tool("Paris")), runs))
        assert result.interruptions, "the run did not stop for approval"
        print("parked", flush=True)
        sys.stdin.read()  # waits in place until killed
    else:
        script = Script(say("Sunny."), during_tool=die if point == "tool" else None)
        asyncio.run(go(store, id, None, script, runs))
    raise SystemExit(f"the worker passed its kill point {point}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4]), sys.argv[5])
