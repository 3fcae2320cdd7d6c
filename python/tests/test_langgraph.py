"""inboxlog.integrations.langgraph.InboxlogMiddleware with the real LangChain and
LangGraph packages and a scripted chat model (tests/lg_scripted.py): no network."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import inboxlog

if importlib.util.find_spec("langchain") is None:  # pragma: no cover - CI has the extra
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI must run these tests: install the langgraph extra (make venv)")
    pytest.skip(
        'the langchain package is not installed (pip install "./python[langgraph]")',
        allow_module_level=True,
    )

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from lg_scripted import ScriptedChatModel, call, say

from inboxlog.integrations.langgraph import (
    MESSAGES,
    InboxlogMiddleware,
    InboxlogSaver,
    StepRejectedError,
    TurnEndedError,
    conversation,
    inbox_message,
    langchain_message,
)

ROOT = Path(__file__).parents[2]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny, 22 C in {city}"


def thread(id: str = "chat") -> Any:
    return {"configurable": {"thread_id": id}}


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def shape(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    """Each message as (type, content or tool call names): what a model sees, ids aside."""
    out: list[tuple[str, Any]] = []
    for m in messages:
        if isinstance(m, AIMessage) and m.tool_calls:
            out.append(("ai", [c["name"] for c in m.tool_calls]))
        else:
            out.append((m.type, m.content))
    return out


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def turn_ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


def entered(events: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    """(turn, step, message id) of every user/message, with the step it entered."""
    out, where = [], (0, 0)
    for e in events:
        if e["type"] == "step/start":
            where = (e["data"]["turn"], e["data"]["step"])
        elif e["type"] == "user/message":
            out.append((*where, e["data"]["id"]))
    return out


def log_of(store: inboxlog.Store, id: str = "chat") -> list[dict[str, Any]]:
    return store.inspect(id)[1]


Mode = str
MODES = ["invoke", "ainvoke", "stream", "astream"]


async def drive(agent: Any, input: Any, config: Any, mode: Mode) -> dict[str, Any]:
    """Runs the agent once through ``mode``; returns its final state."""
    if mode == "invoke":
        result: dict[str, Any] = agent.invoke(input, config)
        return result
    if mode == "ainvoke":
        result = await agent.ainvoke(input, config)
        return result
    if mode == "stream":
        for _ in agent.stream(input, config):
            pass
    else:
        async for _ in agent.astream(input, config):
            pass
    state: dict[str, Any] = agent.get_state(config).values if agent.checkpointer else {}
    return state


# -- a run is a turn, a model call a step ------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_call_then_an_answer_is_one_turn_of_two_steps(
    store: inboxlog.Store, mode: Mode
) -> None:
    model = ScriptedChatModel(replies=[call("weather", city="Paris"), say("Sunny in Paris.")])
    agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(store)])
    if mode in ("stream", "astream"):
        agent = create_agent(
            model, [weather], middleware=[InboxlogMiddleware(store)], checkpointer=InMemorySaver()
        )
    state = await drive(agent, ask("Weather in Paris?"), thread(), mode)

    assert shape(model.inputs[0]) == [("human", "Weather in Paris?")]
    assert shape(model.inputs[1]) == [
        ("human", "Weather in Paris?"),
        ("ai", ["weather"]),
        ("tool", "sunny, 22 C in Paris"),
    ]
    assert shape(state["messages"])[-1] == ("ai", "Sunny in Paris.")
    events = log_of(store)
    assert types(events) == [
        "turn/start",
        "agent/inbox/spliced",  # the run's input joins next-turn
        "agent/inbox/spliced",  # claimed by step 1
        "step/start",
        "user/message",
        MESSAGES,  # the tool call
        MESSAGES,  # its result, recorded before the next step
        "step/end",
        "step/start",  # the second model call: a continuation step
        MESSAGES,  # the answer
        "step/end",
        "turn/end",
    ]
    input_id = state["messages"][0].id
    assert events[4]["data"] == {"id": input_id, "role": "user", "content": "Weather in Paris?"}
    assert turn_ends(events) == [{"kind": "completed"}]
    # The log holds the conversation the agent ended with, ids included.
    assert [(m.id, m.type) for m in conversation(events)] == [
        (m.id, m.type) for m in state["messages"]
    ]
    work = inboxlog.fold_consumed_work(events)
    assert work["end"] is not None and work["end"]["seq"] == events[-1]["seq"]


async def test_the_conversation_the_model_sees_is_rebuilt_from_the_log(
    store: inboxlog.Store,
) -> None:
    """No checkpointer: the state starts with the new input only, the log gives the rest."""
    model = ScriptedChatModel(replies=[say("Hello."), say("Still here.")])
    agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(store)])
    agent.invoke(ask("hi"), thread())
    final = agent.invoke(ask("still there?"), thread())
    assert shape(model.inputs[1]) == [
        ("human", "hi"),
        ("ai", "Hello."),
        ("human", "still there?"),
    ]
    assert shape(final["messages"]) == [*shape(model.inputs[1]), ("ai", "Still here.")]
    assert turn_ends(log_of(store)) == [{"kind": "completed"}] * 2


# -- steering ------------------------------------------------------------------------


async def test_steering_between_the_tool_call_and_the_answer_reaches_the_second_call(
    store: inboxlog.Store,
) -> None:
    middleware = InboxlogMiddleware(store)

    @tool
    def slow_weather(city: str) -> str:
        """The weather in a city, while the user types."""
        middleware_session(middleware).inbox.append(
            "next-step", {"id": "s1", "content": "Answer in Fahrenheit."}
        )
        return f"sunny, 22 C in {city}"

    model = ScriptedChatModel(replies=[call("slow_weather", city="Paris"), say("72 F in Paris.")])
    agent = create_agent(model, [slow_weather], middleware=[middleware])
    final = agent.invoke(ask("Weather in Paris?"), thread())

    assert ("human", "Answer in Fahrenheit.") not in shape(model.inputs[0])
    assert shape(model.inputs[1])[-1] == ("human", "Answer in Fahrenheit.")
    assert model.inputs[1][-1].id == "s1"  # the inbox id
    events = log_of(store)
    assert entered(events)[1:] == [(1, 2, "s1")]
    assert [m.id for m in final["messages"]].count("s1") == 1
    assert turn_ends(events) == [{"kind": "completed"}]


def middleware_session(middleware: InboxlogMiddleware) -> inboxlog.Session:
    (run,) = middleware._runs.values()
    return run.log


POSTER = (
    "import inboxlog, sys; inboxlog.Store(sys.argv[1]).post("
    "'chat', 'next-step', {'id': 'p1', 'content': 'Answer in Fahrenheit.'})"
)


async def test_steering_posted_from_another_process_reaches_the_next_model_call(
    tmp_path: Path,
) -> None:
    root = tmp_path / "fleet"
    store = inboxlog.Store(str(root))

    @tool
    async def slow_weather(city: str) -> str:
        """The weather in a city, while a web server posts."""
        # Not from python/, whose source package (without its native module) would
        # shadow the installed one for `python -c`.
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", POSTER, str(root), cwd=root.parent
        )
        assert await proc.wait() == 0
        return f"sunny, 22 C in {city}"

    model = ScriptedChatModel(replies=[call("slow_weather", city="Paris"), say("72 F in Paris.")])
    agent = create_agent(model, [slow_weather], middleware=[InboxlogMiddleware(store)])
    await agent.ainvoke(ask("Weather in Paris?"), thread())

    assert shape(model.inputs[1])[-1] == ("human", "Answer in Fahrenheit.")
    events = log_of(store)
    posted = [e for e in events if e["type"] == "agent/inbox/spliced" and e["data"].get("post")]
    assert [e["data"]["inserted"][0]["id"] for e in posted] == ["p1"]
    assert entered(events)[1:] == [(1, 2, "p1")]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_the_model_stopping_while_steering_is_pending_makes_one_more_call(
    store: inboxlog.Store, mode: Mode
) -> None:
    middleware = InboxlogMiddleware(store)

    def answer_while_steering_arrives() -> AIMessage:
        middleware_session(middleware).inbox.append(
            "next-step", {"id": "late", "content": "And tomorrow?"}
        )
        return say("Sunny today.")

    model = ScriptedChatModel(replies=[answer_while_steering_arrives, say("Rain tomorrow.")])
    agent = create_agent(model, [weather], middleware=[middleware])
    final = await drive(agent, ask("Weather?"), thread(), mode)

    assert shape(model.inputs[1]) == [
        ("human", "Weather?"),
        ("ai", "Sunny today."),
        ("human", "And tomorrow?"),
    ]
    assert shape(final["messages"])[-1] == ("ai", "Rain tomorrow.")
    events = log_of(store)
    assert entered(events)[1:] == [(1, 2, "late")]
    assert turn_ends(events) == [{"kind": "completed"}]
    assert [e["data"]["turn"] for e in events if e["type"] == "turn/start"] == [1]


async def test_next_turn_input_waits_for_the_next_invoke_whose_first_step_claims_it_all(
    store: inboxlog.Store,
) -> None:
    middleware = InboxlogMiddleware(store)

    def answer_while_a_prompt_arrives() -> AIMessage:
        middleware_session(middleware).inbox.append(
            "next-turn", {"id": "later", "content": "And Rome?"}
        )
        return say("Sunny in Paris.")

    model = ScriptedChatModel(
        replies=[answer_while_a_prompt_arrives, say("Sunny in Rome, and Oslo.")]
    )
    agent = create_agent(model, [weather], middleware=[middleware])
    agent.invoke(ask("Weather in Paris?"), thread())
    assert len(model.inputs) == 1
    assert [m["id"] for m in store.open("chat").inbox.next_turn] == ["later"]

    agent.invoke(ask("And Oslo?"), thread())
    # What was pending comes first, then the run's own input, all in the first step.
    assert shape(model.inputs[1])[-2:] == [("human", "And Rome?"), ("human", "And Oslo?")]
    events = log_of(store)
    assert [e[:2] for e in entered(events)[1:]] == [(2, 1), (2, 1)]
    assert entered(events)[1][2] == "later"
    assert turn_ends(events) == [{"kind": "completed"}] * 2
    # One claim took both: pure deletions, nothing canceled or discarded.
    removals = [
        e["data"]
        for e in events
        if e["type"] == "agent/inbox/spliced" and e["data"].get("removedCount")
    ]
    assert removals[-1] == {"target": "next-turn", "start": 0, "removedCount": 2, "inserted": []}
    assert not any(r.get("outcome") for r in removals)
    with store.open("chat") as log:
        assert not log.inbox.has_pending


async def test_an_invoke_with_no_new_input_takes_what_is_pending(store: inboxlog.Store) -> None:
    with store.create("chat") as log:
        log.inbox.append("next-turn", {"id": "queued", "content": "Weather in Oslo?"})
    model = ScriptedChatModel(replies=[say("Cold in Oslo.")])
    agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(store)])
    agent.invoke({"messages": []}, thread())
    assert shape(model.inputs[0]) == [("human", "Weather in Oslo?")]
    assert entered(log_of(store)) == [(1, 1, "queued")]


# -- pre-step plugins ------------------------------------------------------------------


def guard(proposal: Any, next: Any) -> Any:
    if any("rm -rf" in str(m.get("content")) for m in proposal["messages"]):
        return {"kind": "reject"}
    return next()


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_a_plugin_that_rejects_the_step_blocks_the_turn_before_the_model(
    store: inboxlog.Store, mode: Mode
) -> None:
    model = ScriptedChatModel(replies=[say("never")])
    agent = create_agent(model, [], middleware=[InboxlogMiddleware(store, plugins=[guard])])
    with pytest.raises(StepRejectedError) as raised:
        await drive(agent, ask("rm -rf / please"), thread(), mode)
    assert raised.value.reason == {"kind": "blocked"}
    assert model.inputs == []
    assert turn_ends(log_of(store)) == [{"kind": "blocked"}]
    # The run is over: the next one on the thread starts normally.
    model.replies.append(say("Hello."))
    await drive(agent, ask("hi"), thread(), mode)
    assert turn_ends(log_of(store))[-1] == {"kind": "completed"}


async def test_a_plugin_may_rewrite_the_input_the_model_sees(store: inboxlog.Store) -> None:
    async def add_context(proposal: Any, next: Any) -> Any:
        decision = await next()
        if proposal["step"] == 1:
            context = {"id": "ctx", "role": "system", "content": "The user is in Paris."}
            return {"kind": "enter", "messages": [context, *decision["messages"]]}
        return decision

    model = ScriptedChatModel(replies=[say("Sunny.")])
    agent = create_agent(model, [], middleware=[InboxlogMiddleware(store, plugins=[add_context])])
    await agent.ainvoke(ask("Weather here?"), thread())
    assert shape(model.inputs[0]) == [
        ("system", "The user is in Paris."),
        ("human", "Weather here?"),
    ]


async def test_a_plugin_that_enters_nothing_ends_the_turn_without_a_step(
    store: inboxlog.Store,
) -> None:
    model = ScriptedChatModel(replies=[say("never")])
    nothing = InboxlogMiddleware(store, plugins=[lambda p, n: {"kind": "enter", "messages": []}])
    agent = create_agent(model, [], middleware=[nothing])
    with pytest.raises(TurnEndedError) as raised:
        agent.invoke(ask("hi"), thread())
    assert not isinstance(raised.value, StepRejectedError)
    assert raised.value.reason == {"kind": "completed"}
    assert model.inputs == []


# -- how a turn ends -----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_an_exception_ends_the_turn_with_error_and_propagates(
    store: inboxlog.Store, mode: Mode
) -> None:
    model = ScriptedChatModel(
        replies=[call("weather", city="Paris"), RuntimeError("the model went away")]
    )
    agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(store)])
    with pytest.raises(RuntimeError, match="went away"):
        await drive(agent, ask("Weather?"), thread(), mode)
    events = log_of(store)
    assert types(events)[-2:] == ["step/end", "turn/end"]
    assert turn_ends(events) == [
        {"kind": "error", "error": {"message": "the model went away", "code": "RuntimeError"}}
    ]
    # What was recorded before the failure stays.
    assert shape(conversation(events)) == [
        ("human", "Weather?"),
        ("ai", ["weather"]),
        ("tool", "sunny, 22 C in Paris"),
    ]


async def test_a_tool_that_raises_ends_the_turn_with_error(store: inboxlog.Store) -> None:
    @tool
    def broken(city: str) -> str:
        """Always fails."""
        raise LookupError(f"no station in {city}")

    model = ScriptedChatModel(replies=[call("broken", city="Paris")])
    agent = create_agent(model, [broken], middleware=[InboxlogMiddleware(store)])
    with pytest.raises(LookupError):
        agent.invoke(ask("Weather?"), thread())
    assert turn_ends(log_of(store)) == [
        {"kind": "error", "error": {"message": "no station in Paris", "code": "LookupError"}}
    ]


async def test_an_interrupt_inside_a_tool_ends_the_turn_aborted(store: inboxlog.Store) -> None:
    @tool
    def interrupted(city: str) -> str:
        """The user pressed Ctrl-C."""
        raise KeyboardInterrupt

    model = ScriptedChatModel(replies=[call("interrupted", city="Paris")])
    agent = create_agent(model, [interrupted], middleware=[InboxlogMiddleware(store)])
    with pytest.raises(KeyboardInterrupt):
        agent.invoke(ask("Weather?"), thread())
    assert turn_ends(log_of(store)) == [{"kind": "aborted", "reason": {"kind": "user"}}]


@pytest.mark.parametrize("reason", [{"finish_reason": "length"}, {"stop_reason": "max_tokens"}])
async def test_a_length_stop_ends_the_turn_with_max_tokens(
    store: inboxlog.Store, reason: dict[str, str]
) -> None:
    model = ScriptedChatModel(replies=[say("Sunny in Par", **reason)])
    agent = create_agent(model, [], middleware=[InboxlogMiddleware(store)])
    agent.invoke(ask("Weather?"), thread())
    assert turn_ends(log_of(store)) == [{"kind": "max-tokens"}]


@pytest.mark.parametrize("keep", [False, True])
async def test_cancelling_the_run_ends_the_turn_aborted(store: inboxlog.Store, keep: bool) -> None:
    calling = asyncio.Event()

    async def hang() -> AIMessage:
        calling.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    middleware = InboxlogMiddleware(store, keep_inbox_on_cancel=keep)
    model = ScriptedChatModel(replies=[call("weather", city="Paris"), hang])
    agent = create_agent(model, [weather], middleware=[middleware])
    task = asyncio.create_task(agent.ainvoke(ask("Weather?"), thread()))
    await calling.wait()
    middleware_session(middleware).inbox.append("next-turn", {"id": "queued", "content": "x"})
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    events = log_of(store)
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    assert types(events)[-2:] == ["step/end", "turn/end"]
    assert middleware._runs == {}
    with store.open("chat") as log:
        assert [m["id"] for m in log.inbox.next_turn] == (["queued"] if keep else [])


async def test_a_second_concurrent_run_on_one_thread_is_refused(store: inboxlog.Store) -> None:
    calling, release = asyncio.Event(), asyncio.Event()

    async def wait() -> AIMessage:
        calling.set()
        await release.wait()
        return say("done")

    middleware = InboxlogMiddleware(store)
    model = ScriptedChatModel(replies=[wait, say("x")])
    agent = create_agent(model, [], middleware=[middleware])
    first = asyncio.create_task(agent.ainvoke(ask("one"), thread()))
    await calling.wait()
    with pytest.raises((inboxlog.ProtocolError, inboxlog.LockedError)):
        await agent.ainvoke(ask("two"), thread())
    release.set()
    assert shape((await first)["messages"])[-1] == ("ai", "done")
    events = log_of(store)
    assert [e["data"]["turn"] for e in events if e["type"] == "turn/start"] == [1]


def test_a_run_without_a_thread_id_is_refused(store: inboxlog.Store) -> None:
    agent = create_agent(ScriptedChatModel(), [], middleware=[InboxlogMiddleware(store)])
    with pytest.raises(ValueError, match="the run has no thread_id"):
        agent.invoke(ask("hi"))
    assert store.list() == []


def test_the_constructor_refuses_what_is_not_a_store_saver_or_session() -> None:
    with pytest.raises(TypeError, match=re.escape("expected an inboxlog.Store, InboxlogSaver or")):
        InboxlogMiddleware("logs")  # type: ignore[arg-type]


async def test_a_given_session_is_used_for_every_run_and_left_open(store: inboxlog.Store) -> None:
    log = store.create("mine")
    model = ScriptedChatModel(replies=[say("one"), say("two")])
    agent = create_agent(model, [], middleware=[InboxlogMiddleware(log)])
    agent.invoke(ask("a"))
    agent.invoke(ask("b"), thread("ignored"))
    assert not log.closed
    assert turn_ends(log.events()) == [{"kind": "completed"}] * 2
    assert shape(model.inputs[1]) == [("human", "a"), ("ai", "one"), ("human", "b")]
    log.close()


# -- with a checkpointer --------------------------------------------------------------


async def test_the_same_agent_with_in_memory_and_inboxlog_savers_ends_the_same(
    store: inboxlog.Store,
) -> None:
    def script() -> ScriptedChatModel:
        return ScriptedChatModel(
            replies=[call("weather", city="Paris"), say("Sunny in Paris."), say("You're welcome.")]
        )

    finals = []
    for kind in ("memory", "inboxlog"):
        model = script()
        if kind == "memory":
            saver: Any = InMemorySaver()
            middleware = InboxlogMiddleware(inboxlog.Store.memory())
        else:
            saver = InboxlogSaver(store)
            middleware = InboxlogMiddleware(saver)
        agent = create_agent(model, [weather], middleware=[middleware], checkpointer=saver)
        agent.invoke(ask("Weather in Paris?"), thread())
        final = agent.invoke(ask("Thanks!"), thread())
        state = agent.get_state(thread()).values
        finals.append((shape(final["messages"]), shape(state["messages"]), model.inputs))
        if kind == "inboxlog":
            # One session holds both: the checkpoints and the turns.
            events = saver.session("chat").events()
            assert {"langgraph/checkpoint", "turn/start", MESSAGES} <= set(types(events))
            assert [m.id for m in conversation(events)] == [m.id for m in state["messages"]]
            saver.close()
    assert finals[0][:2] == finals[1][:2]
    assert [shape(i) for i in finals[0][2]] == [shape(i) for i in finals[1][2]]


async def test_the_saver_and_middleware_hold_the_thread_as_one_writer(
    store: inboxlog.Store,
) -> None:
    saver = InboxlogSaver(store)
    model = ScriptedChatModel(replies=[say("Hello.")])
    agent = create_agent(model, [], middleware=[InboxlogMiddleware(saver)], checkpointer=saver)
    agent.invoke(ask("hi"), thread())
    other = InboxlogSaver(store)
    other_agent = create_agent(
        ScriptedChatModel(replies=[say("x")]),
        [],
        middleware=[InboxlogMiddleware(other)],
        checkpointer=other,
    )
    with pytest.raises(inboxlog.LockedError):
        other_agent.invoke(ask("me too"), thread())
    saver.close()
    other_agent.invoke(ask("me too"), thread())
    assert shape(other_agent.get_state(thread()).values["messages"]) == [
        ("human", "hi"),
        ("ai", "Hello."),
        ("human", "me too"),
        ("ai", "x"),
    ]
    other.close()


@tool
def ask_human(question: str) -> str:
    """Asks the user and waits for the answer."""
    answer: str = interrupt(question)
    return answer


@pytest.mark.parametrize("elsewhere", [False, True])
async def test_a_run_interrupted_for_a_human_goes_on_when_resumed(
    store: inboxlog.Store, elsewhere: bool
) -> None:
    model = ScriptedChatModel(replies=[call("ask_human", question="Which city?"), say("Oslo.")])
    saver = InboxlogSaver(store)
    agent = create_agent(
        model, [ask_human], middleware=[InboxlogMiddleware(saver)], checkpointer=saver
    )
    paused = agent.invoke(ask("Weather?"), thread())
    assert [i.value for i in paused["__interrupt__"]] == ["Which city?"]
    if elsewhere:  # another worker resumes: the open turn is closed when it opens the thread
        saver.close()
        saver = InboxlogSaver(store)
        agent = create_agent(
            model, [ask_human], middleware=[InboxlogMiddleware(saver)], checkpointer=saver
        )
    final = agent.invoke(Command(resume="Oslo"), thread())
    events = saver.session("chat").events()
    saver.close()
    assert shape(final["messages"]) == [
        ("human", "Weather?"),
        ("ai", ["ask_human"]),
        ("tool", "Oslo"),
        ("ai", "Oslo."),
    ]
    assert shape(model.inputs[1]) == shape(final["messages"])[:3]
    if elsewhere:
        assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
        assert entered(events)[-1] == (2, 1, "continue-turn-2")
    else:
        assert turn_ends(events) == [{"kind": "completed"}]
        assert [e[:2] for e in entered(events)] == [(1, 1)]


# -- a worker killed mid-run ------------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    sys.path.insert(0, sys.argv[3])
    import inboxlog
    from langchain.agents import create_agent
    from inboxlog.integrations.langgraph import InboxlogMiddleware, InboxlogSaver
    from lg_scripted import ScriptedChatModel, call
    from test_langgraph import weather

    def block_forever():
        Path(sys.argv[2]).write_text("calling")
        time.sleep(3600)

    saver = InboxlogSaver(inboxlog.Store(sys.argv[1], durability="sync"))
    model = ScriptedChatModel(replies=[call("weather", city="Paris"), block_forever])
    agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(saver)],
                         checkpointer=saver)
    agent.invoke({"messages": [{"role": "user", "content": "Weather in Paris?"}]},
                 {"configurable": {"thread_id": "job"}})
    """
)


def kill_worker_during_its_second_model_call(root: Path, cwd: Path) -> None:
    ready = cwd / "ready"
    with subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root), str(ready), str(Path(__file__).parent)],
        cwd=cwd,
        stderr=subprocess.PIPE,
        text=True,
    ) as worker:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            assert time.monotonic() < deadline, "the worker never reached its second model call"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL


@pytest.mark.parametrize("with_saver", [True, False])
async def test_a_worker_killed_mid_run_resumes_elsewhere_with_the_committed_conversation(
    tmp_path: Path, with_saver: bool
) -> None:
    root = tmp_path / "logs"
    kill_worker_during_its_second_model_call(root, tmp_path)

    store = inboxlog.Store(root)
    _, stored = store.inspect("job")
    protocol = [t for t in types(stored) if t.startswith(("step/", "turn/"))]
    assert protocol[-2:] == ["step/end", "step/start"]  # killed inside step 2
    committed = shape(conversation(stored))
    assert committed == [
        ("human", "Weather in Paris?"),
        ("ai", ["weather"]),
        ("tool", "sunny, 22 C in Paris"),
    ]
    model = ScriptedChatModel(replies=[say("Sunny in Paris.")])
    if with_saver:
        saver: Any = InboxlogSaver(store)
        agent = create_agent(
            model, [weather], middleware=[InboxlogMiddleware(saver)], checkpointer=saver
        )
    else:
        agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(store)])
    final = agent.invoke({"messages": []}, thread("job"))
    if with_saver:
        saver.close()
    assert shape(model.inputs[0]) == committed
    assert shape(final["messages"]) == [*committed, ("ai", "Sunny in Paris.")]
    events = log_of(store, "job")
    assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
    assert entered(events)[-1] == (2, 1, "continue-turn-2")


# -- message conversion -----------------------------------------------------------------


def test_inbox_messages_and_langchain_messages_convert_both_ways() -> None:
    human = HumanMessage(content="hi", id="h1")
    assert inbox_message(human) == {"id": "h1", "role": "user", "content": "hi"}
    assert langchain_message(inbox_message(human)) == human
    tool_result = ToolMessage(content="ok", tool_call_id="c1", id="t1")
    travelled = inbox_message(tool_result)
    assert travelled["id"] == "t1" and "langchain" in travelled
    assert langchain_message(travelled) == tool_result
    assert langchain_message({"id": "m", "content": "x", "role": "assistant"}) == AIMessage(
        content="x", id="m"
    )
    assert langchain_message({"id": "m", "continue": True}) is None
    assert inbox_message(HumanMessage(content="no id"))["id"].startswith("input-")


def test_a_message_entered_twice_appears_once_in_the_conversation() -> None:
    events = [
        {"type": "user/message", "seq": 0, "time": 0, "data": {"id": "a", "content": "hi"}},
        {"type": "user/message", "seq": 1, "time": 0, "data": {"id": "a", "content": "hi"}},
    ]
    assert shape(conversation(events)) == [("human", "hi")]


# -- packaging: optional, typed, documented, demonstrated ----------------------------------


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_import_inboxlog_does_not_import_langchain_or_langgraph(tmp_path: Path) -> None:
    done = run_python(
        "import sys, inboxlog, inboxlog.integrations; "
        "assert not [m for m in sys.modules if m.startswith(('langgraph', 'langchain'))]",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr


def test_without_langgraph_the_import_says_how_to_install_it(tmp_path: Path) -> None:
    done = run_python(
        "import sys; sys.modules['langgraph'] = None\nimport inboxlog.integrations.langgraph\n",
        tmp_path,
    )
    assert done.returncode != 0
    assert (
        "ImportError: inboxlog.integrations.langgraph needs the langchain and langgraph "
        'packages: pip install "inboxlog[langgraph]"'
    ) in done.stderr


def test_the_example_runs(tmp_path: Path) -> None:
    script = ROOT / "examples" / "langgraph_steering.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "sessions")],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in [
        "model call 1 sees: human 'What is the weather in Paris?'",
        "steering posted from another process while the tool runs: s1 'Answer in Fahrenheit.'",
        (
            "model call 2 sees: human 'What is the weather in Paris?', ai weather(), "
            "tool 'sunny, 22 C in Paris', human 'Answer in Fahrenheit.'"
        ),
        "worker 1 killed during model call 2",
        "worker 2 resumes: turn 1 ended interrupted",
        "answer: It is 72 F and sunny in Paris.",
        "turn 2 ended: completed",
    ]:
        assert line in done.stdout, done.stdout


def readme_section() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## With LangChain and LangGraph", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```py\n(.*?)```", section, re.DOTALL)
    return block


def test_the_readme_section_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy-paste start, run with the model swapped for a scripted one."""
    import langchain.chat_models

    model = ScriptedChatModel(replies=[call("weather", city="Paris"), say("Sunny in Paris.")])
    monkeypatch.setattr(langchain.chat_models, "init_chat_model", lambda *a, **k: model)
    monkeypatch.chdir(tmp_path)
    code = compile(readme_section(), "README.md (langgraph section)", "exec")
    exec(code, {"__name__": "__main__"})
    assert shape(model.inputs[0]) == [("human", "What's the weather in Paris?")]
    _, events = inboxlog.Store(tmp_path / "sessions").inspect("chat-1")
    assert turn_ends(events) == [{"kind": "completed"}]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_the_example_type_checks_against_langchains_types(tmp_path: Path) -> None:
    """``--strict`` against LangChain's own types (test_tooling checks the package, this
    integration included, the same way)."""
    example = ROOT / "examples" / "langgraph_steering.py"
    env = {**os.environ, "MYPY_CACHE_DIR": str(tmp_path / "mypy-cache")}
    args = ["--strict", "--python-version", "3.11", str(example)]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mypy {' '.join(args)}:\n{done.stdout}{done.stderr}"
