"""inboxlog.integrations.adk's plugin with the real ADK ``Runner`` and a scripted
``BaseLlm`` (``adk_scripted.py``), no network: one invocation is one turn, each model
call one step claimed at ``before_model_callback``."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from adk_scripted import Reply, ScriptedLlm
from conftest import PG_URL, sql, turn_ends
from conftest import entered as entered_ids
from google.adk.agents import LlmAgent
from google.adk.apps import App
from google.adk.runners import Runner
from google.genai import types

import inboxlog
from inboxlog.integrations.adk import InboxlogPlugin, InboxlogSessionService, StepRejectedError

HERE = Path(__file__).parent
LOG = "adks.app.u.chat"
Q = "Weather in Paris?"
PARIS = "sunny, 22 C in Paris"


def user(text: str) -> tuple[str, str]:
    return ("user", text)


class Agent:
    """A runner on ``store`` with the plugin, the scripted model and a weather tool that
    runs ``during_tool`` first."""

    def __init__(
        self,
        store: inboxlog.Store,
        *replies: Reply,
        during_tool: Callable[[], None] | None = None,
        plugins: Any = (),
    ) -> None:
        self.store = store
        self.service = InboxlogSessionService(store)
        self.llm = ScriptedLlm(*replies)

        def weather(city: str) -> str:
            """The weather in a city."""
            if during_tool is not None:
                during_tool()
            return f"sunny, 22 C in {city}"

        agent = LlmAgent(name="assistant", model=self.llm, tools=[weather])
        app = App(
            name="app", root_agent=agent, plugins=[InboxlogPlugin(self.service, plugins=plugins)]
        )
        self.runner = Runner(app=app, session_service=self.service)

    async def session(self) -> None:
        got = await self.service.get_session(app_name="app", user_id="u", session_id="chat")
        if got is None:
            await self.service.create_session(app_name="app", user_id="u", session_id="chat")

    async def run(self, text: str = Q) -> list[Any]:
        await self.session()
        message = types.Content(role="user", parts=[types.Part(text=text)])
        return [
            e
            async for e in self.runner.run_async(
                user_id="u", session_id="chat", new_message=message
            )
        ]


def events_of(store: inboxlog.Store) -> list[dict[str, Any]]:
    return store.inspect(LOG)[1]


def entered(events: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    """(turn, step, message id) of every user/message; the run's own input as ``input``."""
    return entered_ids(events, lambda id: id.startswith("input-"))


def history(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The texts of the ADK events stored, by author."""
    out = []
    for e in events:
        if e["type"] == "adk/event":
            event = e["data"]["event"]
            for part in (event.get("content") or {}).get("parts") or ():
                if "text" in part:
                    out.append((event["author"], part["text"]))
    return out


def post(store: inboxlog.Store, target: str, id: str, text: str) -> Callable[[], None]:
    return lambda: store.post(LOG, target, {"id": id, "content": text})  # type: ignore[arg-type]


def test_a_tool_call_then_an_answer_is_one_turn_and_steering_reaches_the_next_call(
    store: inboxlog.Store,
) -> None:
    agent = Agent(
        store,
        Reply(tool="Paris"),
        Reply(text="Sunny."),
        during_tool=post(store, "next-step", "s1", "In Fahrenheit."),
    )
    asyncio.run(agent.session())
    post(store, "next-turn", "p1", "First this.")()
    asyncio.run(agent.run())
    assert agent.llm.seen == [
        [user("First this."), user(Q)],
        [user("First this."), user(Q), ("tool", PARIS), user("In Fahrenheit.")],
    ]
    events = events_of(store)
    assert entered(events) == [(1, 1, "p1"), (1, 1, "input"), (1, 2, "s1")]
    assert turn_ends(events) == [{"kind": "completed"}]
    # Each entered message is in ADK's history once, in claim order; the answer is
    # stored inside its turn.
    assert history(events) == [
        ("user", "First this."),
        ("user", Q),
        ("user", "In Fahrenheit."),
        ("assistant", "Sunny."),
    ]
    assert [e["type"] for e in events][-3:] == ["adk/event", "step/end", "turn/end"]


POSTER = (
    "import inboxlog, sys; inboxlog.Store(sys.argv[1]).post(sys.argv[2], 'next-step', "
    "{'id': 'p1', 'content': 'In Fahrenheit.'})"
)


def test_the_conversation_is_written_as_it_happens(store: inboxlog.Store) -> None:
    # SPEC §15.5: each model response one assistant/message, each tool run a tool/call
    # in the log before the tool runs, then its tool/result.
    logged: list[list[str]] = []
    agent = Agent(
        store,
        Reply(tool="Paris", usage=(12, 3)),
        Reply(text="Sunny."),
        during_tool=lambda: logged.append([e["type"] for e in events_of(store)]),
    )
    asyncio.run(agent.run())
    events = events_of(store)
    kinds = [e["type"] for e in events if e["type"].split("/")[0] in ("user", "assistant", "tool")]
    assert kinds == [
        "user/message",
        "assistant/message",
        "tool/call",
        "tool/result",
        "assistant/message",
    ]
    assert logged[0][-1] == "tool/call", "the call is in the log before the tool runs"
    first, call, result, answer = (
        e for e in events if e["type"] in ("assistant/message", "tool/call", "tool/result")
    )
    [block] = first["data"]["message"]["content"]
    assert block["type"] == "tool-call" and block["name"] == "weather"
    assert json.loads(block["arguments"]) == {"city": "Paris"}
    assert first["data"]["usage"] == {"inputTokens": 12, "outputTokens": 3}
    assert first["data"]["message"]["source"]["model"] == "scripted"
    assert (call["data"]["callId"], call["data"]["name"]) == (block["id"], "weather")
    assert json.loads(call["data"]["arguments"]) == {"city": "Paris"}
    [tool_result] = result["data"]["message"]["content"]
    assert tool_result["toolCallId"] == block["id"]
    assert tool_result["content"] == [{"type": "text", "text": PARIS}]
    assert answer["data"]["message"]["content"] == [{"type": "text", "text": "Sunny."}]
    assert [(e["data"]["turn"], e["data"]["step"]) for e in (first, call, result, answer)] == [
        (1, 1),
        (1, 1),
        (1, 1),
        (1, 2),
    ]
    assert [m["role"] for m in store.messages(LOG)] == ["user", "assistant", "user", "assistant"]


def test_a_failing_tool_is_answered_as_an_error_before_the_turn_ends(
    store: inboxlog.Store,
) -> None:
    def broken() -> None:
        raise ConnectionError("the weather service is down")

    agent = Agent(store, Reply(tool="Paris"), during_tool=broken)
    with pytest.raises(ConnectionError):
        asyncio.run(agent.run())
    events = events_of(store)
    [result] = [e for e in events if e["type"] == "tool/result"]
    assert result["data"]["error"] == {"name": "ConnectionError", "code": "TOOL_ERROR"}
    [block] = result["data"]["message"]["content"]
    assert block["isError"] is True
    assert "the weather service is down" in block["content"][0]["text"]
    assert turn_ends(events)[-1]["kind"] == "error"
    assert store.verify(LOG)["pendingToolCalls"] == 0


def test_a_long_running_tool_is_left_for_its_later_answer(store: inboxlog.Store) -> None:
    # ADK waits for a long-running tool's answer from elsewhere: the log has its call,
    # and no answer made up for it, now or when the session is next taken.
    from google.adk.tools.long_running_tool import LongRunningFunctionTool

    def weather(city: str) -> None:
        """Starts looking up the weather in a city."""

    service = InboxlogSessionService(store)
    llm = ScriptedLlm(Reply(tool="Paris"), Reply(text="Hi."))
    agent = LlmAgent(name="assistant", model=llm, tools=[LongRunningFunctionTool(weather)])
    app = App(name="app", root_agent=agent, plugins=[InboxlogPlugin(service)])
    runner = Runner(app=app, session_service=service)

    async def run(text: str) -> None:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="u", session_id="chat", new_message=message):
            pass

    asyncio.run(service.create_session(app_name="app", user_id="u", session_id="chat"))
    asyncio.run(run(Q))
    asyncio.run(run("Hello?"))
    events = events_of(store)
    assert [e["data"]["name"] for e in events if e["type"] == "tool/call"] == ["weather"]
    assert [e for e in events if e["type"] == "tool/result"] == []
    assert "function_response" not in json.dumps([e for e in events if e["type"] == "adk/event"])


def test_steering_posted_elsewhere_during_the_final_call_gets_one_more_call(
    tmp_path: Path,
) -> None:
    store = inboxlog.Store(tmp_path / "logs", durability="none")

    def elsewhere() -> None:
        subprocess.run(
            [sys.executable, "-P", "-c", POSTER, str(tmp_path / "logs"), LOG],
            check=True,
            timeout=60,
        )

    agent = Agent(store, Reply(text="Sunny.", before=elsewhere), Reply(text="72 F."))
    events = asyncio.run(agent.run())
    assert agent.llm.seen == [[user(Q)], [user(Q), ("assistant", "Sunny."), user("In Fahrenheit.")]]
    assert events[-1].content.parts[0].text == "72 F."  # what ADK yields last
    log = events_of(store)
    assert entered(log) == [(1, 1, "input"), (1, 2, "p1")]
    assert turn_ends(log) == [{"kind": "completed"}]
    assert history(log) == [
        ("user", Q),
        ("assistant", "Sunny."),
        ("user", "In Fahrenheit."),
        ("assistant", "72 F."),
    ]
    # The history a later call sees is the same one.
    again = Agent(store, Reply(text="Bye."))
    asyncio.run(again.run("Thanks!"))
    assert again.llm.seen[0] == [
        user(Q),
        ("assistant", "Sunny."),
        user("In Fahrenheit."),
        ("assistant", "72 F."),
        user("Thanks!"),
    ]


def test_a_length_stop_ends_max_tokens_even_after_one_more_call(store: inboxlog.Store) -> None:
    agent = Agent(
        store,
        Reply(text="Sunny and", length=True, before=post(store, "next-step", "s1", "Shorter.")),
        Reply(text="Sunny."),
    )
    asyncio.run(agent.run())
    assert len(agent.llm.seen) == 2
    assert turn_ends(events_of(store)) == [{"kind": "max-tokens"}]
    alone = Agent(inboxlog.Store.memory(), Reply(text="Sunny and", length=True))
    asyncio.run(alone.run())
    assert turn_ends(events_of(alone.store)) == [{"kind": "max-tokens"}]


def test_a_model_error_ends_the_turn_error_and_propagates(store: inboxlog.Store) -> None:
    agent = Agent(store, Reply(tool="Paris"), Reply(error=RuntimeError("model down")))
    with pytest.raises(RuntimeError, match="model down"):
        asyncio.run(agent.run())
    events = events_of(store)
    assert turn_ends(events) == [
        {"kind": "error", "error": {"message": "model down", "code": "RuntimeError"}}
    ]
    assert [e["type"] for e in events][-2:] == ["step/end", "turn/end"]
    # The session was let go: another service (a worker) runs the next turn.
    other = Agent(store, Reply(text="Hi."))
    asyncio.run(other.run("Again?"))
    assert turn_ends(events_of(store))[-1] == {"kind": "completed"}


def test_a_rejecting_plugin_blocks_the_turn_before_the_model(store: inboxlog.Store) -> None:
    agent = Agent(store, plugins=[lambda proposal, next: {"kind": "reject"}])
    with pytest.raises(RuntimeError, match="blocked") as raised:  # ADK wraps a plugin's error
        asyncio.run(agent.run())
    assert isinstance(raised.value.__cause__, StepRejectedError)
    assert agent.llm.seen == []
    assert [r["kind"] for r in turn_ends(events_of(store))] == ["blocked"]
    assert history(events_of(store)) == []  # the rejected input never reached ADK's history


def test_a_cancelled_run_ends_the_turn_aborted(store: inboxlog.Store) -> None:
    agent = Agent(store, Reply(hang=True))

    async def cancel() -> None:
        hanging = agent.llm.hanging()
        task = asyncio.create_task(agent.run())
        await hanging.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    events = events_of(store)
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    assert [e["type"] for e in events][-2:] == ["step/end", "turn/end"]
    other = Agent(store, Reply(text="Hi."))  # let go: another worker may run it
    asyncio.run(other.run("Again?"))


def test_a_run_cancelled_in_a_task_that_lives_on_is_aborted_when_the_next_run_starts(
    store: inboxlog.Store,
) -> None:
    agent = Agent(store, Reply(hang=True), Reply(text="Hi."))

    async def both() -> None:
        hanging = agent.llm.hanging()

        # asyncio.timeout cancels the run inside this task, which goes on: no ADK
        # callback and no task end tells the plugin, so the turn stays open until the
        # session's next run here starts.
        async def run_until_it_hangs() -> None:
            async with asyncio.timeout(None) as deadline:

                async def expire() -> None:
                    await hanging.wait()
                    deadline.reschedule(asyncio.get_running_loop().time())

                expiring = asyncio.create_task(expire())
                try:
                    await agent.run()
                finally:
                    await expiring

        with pytest.raises(TimeoutError):
            await run_until_it_hangs()
        assert turn_ends(events_of(store)) == []
        await agent.run("Again?")

    asyncio.run(both())
    assert turn_ends(events_of(store)) == [
        {"kind": "aborted", "reason": {"kind": "user"}},
        {"kind": "completed"},
    ]


def test_an_event_stream_closed_early_ends_the_turn_aborted(store: inboxlog.Store) -> None:
    agent = Agent(store, Reply(tool="Paris"), Reply(text="Sunny."))

    async def close_early() -> None:
        await agent.session()
        message = types.Content(role="user", parts=[types.Part(text=Q)])
        stream = agent.runner.run_async(user_id="u", session_id="chat", new_message=message)
        async for _ in stream:
            break  # the caller stops listening after the first event
        await stream.aclose()

    asyncio.run(close_early())
    assert len(agent.llm.seen) == 1
    events = events_of(store)
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    # The call the model made, whose tool never started, is answered before the turn ends.
    [result] = [e for e in events if e["type"] == "tool/result"]
    assert result["data"]["error"]["code"] == "TOOL_NOT_STARTED"
    assert store.verify(LOG)["pendingToolCalls"] == 0


def test_the_sync_runner_on_its_own_thread_and_loop(store: inboxlog.Store) -> None:
    agent = Agent(store, Reply(tool="Paris"), Reply(text="Sunny."), Reply(text="Hi."))
    asyncio.run(agent.session())
    message = types.Content(role="user", parts=[types.Part(text=Q)])
    done: list[Any] = []
    thread = threading.Thread(
        target=lambda: done.extend(
            agent.runner.run(user_id="u", session_id="chat", new_message=message)
        )
    )
    thread.start()
    thread.join()
    assert done and done[-1].content.parts[0].text == "Sunny."
    asyncio.run(agent.run("Thanks!"))  # the same runner and service, from another loop
    assert turn_ends(events_of(store)) == [{"kind": "completed"}] * 2
    assert entered(events_of(store)) == [(1, 1, "input"), (2, 1, "input")]


WORKER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, sys.argv[2])
    import inboxlog
    from adk_scripted import Reply
    from test_adk_plugin import Agent

    def stuck():
        print("in tool", flush=True)
        import time
        while True:
            time.sleep(1)

    agent = Agent(inboxlog.Store(sys.argv[1], durability="sync"), Reply(tool="Paris"),
                  during_tool=stuck)
    asyncio.run(agent.run())
    """
)


def test_a_worker_killed_mid_run_is_resumed_elsewhere_interrupted(tmp_path: Path) -> None:
    where = tmp_path / "logs"
    worker = subprocess.Popen(
        [sys.executable, "-P", "-c", WORKER, str(where), str(HERE)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
    )
    try:
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "in tool"
    finally:
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=60) == -signal.SIGKILL
        worker.stdout.close()
    store = inboxlog.Store(where, durability="none")
    agent = Agent(store, Reply(text="Sunny."))
    asyncio.run(agent.run("Still there?"))
    # The call the kill cut off is answered from the log (SPEC §15.4), as ADK's own
    # function response, and its tool is not run again.
    [[asked, (role, answer), still]] = agent.llm.seen
    assert (asked, role, still) == (user(Q), "tool", user("Still there?"))
    assert "unknown" in answer
    events = events_of(store)
    assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
    [result] = [e for e in events if e["type"] == "tool/result"]
    assert result["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"


RUNNER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, sys.argv[3])
    import inboxlog
    from adk_scripted import Reply
    from test_adk_plugin import Agent

    where, schema, who = sys.argv[1], sys.argv[2], sys.argv[4]
    store = (inboxlog.Store.postgres(where, schema=schema, durability="sync")
             if where.startswith("postgresql") else inboxlog.Store(where, durability="sync"))

    def wait():
        print("in tool", flush=True)
        sys.stdin.readline()

    agent = Agent(store, Reply(tool="Paris"), Reply(text=f"done by {who}"), during_tool=wait)
    try:
        asyncio.run(agent.run(f"from {who}"))
        print("completed", flush=True)
    except BaseException as error:
        cause = error if isinstance(error, inboxlog.InboxlogError) else error.__cause__
        print("refused", type(cause).__name__, flush=True)
    """
)


@pytest.fixture(params=["jsonl", "postgres"])
def shared(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[inboxlog.Store, str, str]]:
    """A store two processes open: (the store here, where they find it, schema)."""
    if request.param == "jsonl":
        yield inboxlog.Store(tmp_path / "logs", durability="none"), str(tmp_path / "logs"), "-"
        return
    schema = f"adk_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    try:
        store = inboxlog.Store.postgres(PG_URL, schema=schema, durability="none")
    except inboxlog.UnavailableError as e:  # pragma: no cover - CI has the server
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server at INBOXLOG_TEST_PG: {e}")
    yield store, PG_URL, schema
    del store
    sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_two_runners_in_two_processes_one_runs_the_other_is_refused_before_writing(
    shared: tuple[inboxlog.Store, str, str],
) -> None:
    store, where, schema = shared
    with subprocess.Popen(
        [sys.executable, "-P", "-c", RUNNER, where, schema, str(HERE), "A"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
    ) as first:
        assert first.stdout is not None and first.stdin is not None
        assert first.stdout.readline().strip() == "in tool"
        before = len(store.inspect(LOG)[1])
        second = subprocess.run(
            [sys.executable, "-P", "-c", RUNNER, where, schema, str(HERE), "B"],
            capture_output=True,
            text=True,
            cwd=HERE.parent,
            timeout=120,
            check=False,
        )
        assert second.stdout.split() == ["refused", "LockedError"], second.stderr
        assert len(store.inspect(LOG)[1]) == before  # B wrote nothing
        first.stdin.write("\n")
        first.stdin.flush()
        assert first.communicate(timeout=120)[0].split() == ["completed"]
    events = store.inspect(LOG)[1]
    assert history(events) == [("user", "from A"), ("assistant", "done by A")]
    assert turn_ends(events) == [{"kind": "completed"}]
