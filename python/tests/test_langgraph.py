"""inboxlog.integrations.langgraph.InboxlogMiddleware with the real LangChain and
LangGraph packages and a scripted chat model (tests/lg_scripted.py): no network."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import entered, tool_call, turn_ends, types
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command, interrupt
from lg_scripted import ScriptedChatModel, call, say

import inboxlog
from inboxlog.integrations._driver import Turn
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

pytestmark = pytest.mark.anyio
HERE = Path(__file__).parent


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
        "assistant/message",  # the tool call
        "tool/call",  # dispatched, before the tool runs
        "tool/result",
        "step/end",
        "step/start",  # the second model call: a continuation step
        "assistant/message",  # the answer
        "step/end",
        "turn/end",
    ]
    input_id = state["messages"][0].id
    assert events[4]["data"] == {"id": input_id, "role": "user", "content": "Weather in Paris?"}
    asked, answer = state["messages"][1], state["messages"][-1]
    assert events[5]["data"]["message"]["content"] == [
        {"type": "tool-call", "id": "call_1", "name": "weather", "arguments": '{"city": "Paris"}'}
    ]
    assert events[5]["data"]["message"]["source"]["replayState"] == message_to_dict(asked)
    assert events[6]["data"] == tool_call(1, 1, "call_1", "weather", '{"city": "Paris"}')
    assert events[7]["data"]["message"]["content"][0]["content"] == [
        {"type": "text", "text": "sunny, 22 C in Paris"}
    ]
    assert events[10]["data"]["message"]["content"] == [{"type": "text", "text": answer.content}]
    assert turn_ends(events) == [{"kind": "completed"}]
    # The log holds the conversation the agent ended with, ids included.
    assert [(m.id, m.type) for m in conversation(events)] == [
        (m.id, m.type) for m in state["messages"]
    ]
    work = inboxlog.fold_consumed_work(events)
    assert work["end"] is not None and work["end"]["seq"] == events[-1]["seq"]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_the_model_stopping_while_steering_is_pending_makes_one_more_call(
    store: inboxlog.Store, mode: Mode
) -> None:
    middleware = InboxlogMiddleware(store)

    def answer_while_steering_arrives() -> AIMessage:
        store.post("chat", "next-step", {"id": "late", "content": "And tomorrow?"})
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


async def test_a_tool_that_raises_ends_the_turn_with_error(store: inboxlog.Store) -> None:
    @tool
    def broken(city: str) -> str:
        """Always fails."""
        raise LookupError(f"no station in {city}")

    model = ScriptedChatModel(replies=[call("broken", city="Paris")])
    agent = create_agent(model, [broken], middleware=[InboxlogMiddleware(store)])
    with pytest.raises(LookupError):
        agent.invoke(ask("Weather?"), thread())
    events = log_of(store)
    assert turn_ends(events) == [
        {"kind": "error", "error": {"message": "no station in Paris", "code": "LookupError"}}
    ]
    # The call is answered before the turn ends: the next run's model sees it answered.
    assert types(events)[-4:] == ["tool/call", "tool/result", "step/end", "turn/end"]
    [block] = events[-3]["data"]["message"]["content"]
    assert block == {
        "type": "tool-result",
        "toolCallId": "call_1",
        "content": [{"type": "text", "text": "LookupError: no station in Paris"}],
        "isError": True,
    }
    model.replies.append(say("Sorry, no station."))
    agent.invoke(ask("And now?"), thread())
    assert shape(model.inputs[-1]) == [
        ("human", "Weather?"),
        ("ai", ["broken"]),
        ("tool", "LookupError: no station in Paris"),
        ("human", "And now?"),
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
    events = log_of(store)
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    [result] = [e["data"]["message"]["content"][0] for e in events if e["type"] == "tool/result"]
    assert result["content"] == [{"type": "text", "text": "KeyboardInterrupt"}]
    assert result["isError"] is True


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
            assert {"langgraph/checkpoint", "turn/start", "assistant/message"} <= set(types(events))
            assert MESSAGES not in types(events)
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

IN_TOOL = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    sys.path.insert(0, sys.argv[3])
    import inboxlog
    from langchain.agents import create_agent
    from langchain_core.tools import tool
    from inboxlog.integrations.langgraph import InboxlogMiddleware, InboxlogSaver
    from lg_scripted import ScriptedChatModel, call

    @tool
    def book(city: str) -> str:
        \"\"\"Books a hotel in a city.\"\"\"
        Path(sys.argv[2]).write_text("booking")
        time.sleep(3600)  # the booking is under way when the worker dies
        return "booked"

    saver = InboxlogSaver(inboxlog.Store(sys.argv[1], durability="sync"))
    model = ScriptedChatModel(replies=[call("book", city="Paris")])
    agent = create_agent(model, [book], middleware=[InboxlogMiddleware(saver)],
                         checkpointer=saver)
    agent.invoke({"messages": [{"role": "user", "content": "Book Paris."}]},
                 {"configurable": {"thread_id": "job"}})
    """
)


def kill_inside_the_tool(logs: Path) -> None:
    """Runs IN_TOOL in a child process and kills it with SIGKILL inside its tool."""
    ready = logs.parent / "ready"
    argv = [sys.executable, "-P", "-c", IN_TOOL, str(logs), str(ready), str(HERE)]
    with subprocess.Popen(argv, stderr=subprocess.PIPE, text=True) as worker:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            assert time.monotonic() < deadline, "the worker never reached its tool"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=60) == -signal.SIGKILL


@pytest.mark.parametrize("input", [None, "Well?"])
def test_a_checkpoint_resumed_after_a_kill_inside_a_tool_does_not_run_it_again(
    tmp_path: Path, input: str | None
) -> None:
    # SPEC §15.5: LangGraph's checkpoint still has the tool to run; the log answered
    # the call when it was opened, and that answer is the tool's result.
    logs = tmp_path / "logs"
    kill_inside_the_tool(logs)
    ran: list[str] = []

    @tool
    def book(city: str) -> str:
        """Books a hotel in a city."""
        ran.append(city)
        return "booked"

    model = ScriptedChatModel(replies=[say("I could not tell whether it is booked.")])
    with InboxlogSaver(inboxlog.Store(logs)) as saver:
        agent = create_agent(
            model, [book], middleware=[InboxlogMiddleware(saver)], checkpointer=saver
        )
        agent.invoke(None if input is None else ask(input), thread("job"))
        events = saver.session("job").events()
    assert ran == [], "the tool ran again by itself"
    [seen] = model.inputs
    assert shape(seen)[:2] == [("human", "Book Paris."), ("ai", ["book"])]
    assert seen[2].type == "tool" and "unknown" in str(seen[2].content)
    assert shape(seen)[3:] == ([] if input is None else [("human", input)])
    assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert [r["error"]["code"] for r in results] == ["TOOL_OUTCOME_UNKNOWN"]


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


async def test_a_model_response_is_one_assistant_message_in_the_reference_shape(
    store: inboxlog.Store,
) -> None:
    raw = {
        "id": "call_9",
        "type": "function",
        "function": {"name": "weather", "arguments": '{ "city":"Oslo" }'},
    }
    answer = AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "They want Oslo."},
            {"type": "text", "text": "Looking it up."},
        ],
        tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "call_9"}],
        additional_kwargs={"tool_calls": [raw]},
        response_metadata={"model_provider": "openai", "model_name": "gpt-test"},
        usage_metadata={
            "input_tokens": 12,
            "output_tokens": 5,
            "total_tokens": 17,
            "input_token_details": {"cache_read": 4},
            "output_token_details": {"reasoning": 2},
        },
    )
    model = ScriptedChatModel(replies=[answer, say("Sunny in Oslo.")])
    agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(store)])
    final = agent.invoke(ask("Oslo?"), thread())
    events = log_of(store)
    said = next(e["data"] for e in events if e["type"] == "assistant/message")
    assert said["message"]["content"] == [
        {"type": "reasoning", "text": "They want Oslo."},
        {"type": "text", "text": "Looking it up."},
        {"type": "tool-call", "id": "call_9", "name": "weather", "arguments": '{ "city":"Oslo" }'},
    ]
    assert {k: v for k, v in said["message"]["source"].items() if k != "replayState"} == {
        "kind": "model",
        "provider": "openai",
        "model": "gpt-test",
    }
    assert said["usage"] == {
        "inputTokens": 12,
        "outputTokens": 5,
        "cacheReadTokens": 4,
        "reasoningTokens": 2,
    }
    [dispatched] = [e["data"] for e in events if e["type"] == "tool/call"]
    assert dispatched["arguments"] == '{ "city":"Oslo" }'  # the model's own text
    # The log gives LangChain its own messages back, and the surface reads as a conversation.
    assert conversation(events) == final["messages"]
    assert [m["role"] for m in store.messages("chat")] == ["user", "assistant", "user", "assistant"]


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
async def test_parallel_tool_calls_are_each_dispatched_then_answered(
    store: inboxlog.Store, mode: Mode
) -> None:
    both = AIMessage(
        content="",
        tool_calls=[
            {"name": "weather", "args": {"city": "Paris"}, "id": "c1"},
            {"name": "weather", "args": {"city": "Oslo"}, "id": "c2"},
        ],
    )
    model = ScriptedChatModel(replies=[both, say("Sunny in both.")])
    agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(store)])
    final = await drive(agent, ask("Paris and Oslo?"), thread(), mode)
    events = log_of(store)
    first_result = types(events).index("tool/result")
    assert sorted(e["data"]["callId"] for e in events if e["type"] == "tool/call") == ["c1", "c2"]
    for e in events:
        if e["type"] == "tool/call":  # each call dispatched before its result
            assert e["seq"] < next(
                r["seq"]
                for r in events[first_result:]
                if r["type"] == "tool/result"
                and r["data"]["message"]["source"]["callId"] == e["data"]["callId"]
            )
    assert conversation(events) == final["messages"]
    assert shape(model.inputs[1])[2:] == [
        ("tool", "sunny, 22 C in Paris"),
        ("tool", "sunny, 22 C in Oslo"),
    ]


async def test_a_log_of_the_previous_release_resumes(store: inboxlog.Store) -> None:
    # The previous release kept the agent's messages as langchain/messages events only.
    asked = HumanMessage(content="Weather in Paris?", id="q1")
    calling = AIMessage(
        content="", id="a1", tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}]
    )
    result = ToolMessage(content="sunny, 22 C in Paris", tool_call_id="c1", id="t1")
    answer = AIMessage(content="Sunny in Paris.", id="a2")
    with store.create("chat") as log:
        turn = Turn(log)
        turn.start([inbox_message(asked)])
        turn.step()
        log.append(MESSAGES, {"messages": [message_to_dict(calling)]})
        log.append(MESSAGES, {"messages": [message_to_dict(result)]})
        turn.step()
        log.append(MESSAGES, {"messages": [message_to_dict(answer)]})
        turn.model_stopped()
    model = ScriptedChatModel(replies=[say("You're welcome.")])
    agent = create_agent(model, [weather], middleware=[InboxlogMiddleware(store)])
    agent.invoke(ask("Thanks!"), thread())
    assert shape(model.inputs[0]) == [
        ("human", "Weather in Paris?"),
        ("ai", ["weather"]),
        ("tool", "sunny, 22 C in Paris"),
        ("ai", "Sunny in Paris."),
        ("human", "Thanks!"),
    ]
    events = log_of(store)
    assert types(events).count(MESSAGES) == 3  # nothing of the new run's
    assert [m.content for m in conversation(events)][-2:] == ["Thanks!", "You're welcome."]


# -- packaging: optional, typed, documented, demonstrated ----------------------------------
