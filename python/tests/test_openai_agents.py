"""inboxlog.integrations.openai_agents with the real OpenAI Agents SDK and no network.

Every model here is a scripted ``agents.Model``: the SDK runs its real loop (tools,
session persistence, the per-call input filter) and never calls OpenAI.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
import re
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, ModelBehaviorError, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.memory.session_settings import SessionSettings
from agents.models._response_terminal import response_terminal_failure_error
from agents.models.interface import Model
from agents.usage import Usage
from conftest import turn_ends, types
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response import IncompleteDetails

import inboxlog
from inboxlog.integrations import openai_agents as oa
from inboxlog.integrations.openai_agents import (
    InboxlogSession,
    StepRejectedError,
    TurnEndedError,
    fold_items,
    message_items,
    run,
)

set_tracing_disabled(True)
# The async tests run on asyncio through anyio's pytest plugin (anyio comes with the SDK).
pytestmark = pytest.mark.anyio


Reply = list[Any] | BaseException | Callable[[], Awaitable[list[Any]]]


class ScriptedModel(Model):
    """Answers each model call with the next reply: output items, an exception to
    raise, or a coroutine function producing output items. Records every input."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.inputs: list[list[Any]] = []

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kw: Any
    ) -> Any:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        self.inputs.append(copy.deepcopy(items))
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        output = reply if isinstance(reply, list) else await reply()
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kw: Any) -> Any:
        raise NotImplementedError("the scripted model does not stream")


def say(text: str) -> list[Any]:
    return [
        ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
        )
    ]


def call_weather(city: str, call_id: str = "call_1", tool: str = "weather") -> list[Any]:
    return [
        ResponseFunctionToolCall(
            id=f"fc_{call_id}",
            call_id=call_id,
            type="function_call",
            name=tool,
            arguments=json.dumps({"city": city}),
        )
    ]


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny, 22 C in {city}"


def agent_with(model: Model, **kw: Any) -> Agent[Any]:
    return Agent(name="assistant", instructions="Be brief.", model=model, tools=[weather], **kw)


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


@pytest.fixture
def chat(store: inboxlog.Store) -> Iterator[InboxlogSession]:
    with InboxlogSession(store, "chat") as session:
        yield session


# -- a run is a turn, a model call a step ---------------------------------------------


async def test_input_entered_earlier_in_a_run_stays_in_place_for_later_model_calls(
    chat: InboxlogSession,
) -> None:
    async def second_call() -> list[Any]:
        return call_weather("Rome", "call_2")

    model = ScriptedModel(call_weather("Paris"), second_call, say("Both sunny."))
    # Queued before the run: step 1 claims it with the run's input (next-step first,
    # ARCHITECTURE.md#inbox-mutations).
    chat.session.inbox.append("next-step", {"id": "s0", "content": "Also Rome."})
    await run(agent_with(model), "Weather in Paris?", session=chat)

    third = model.inputs[2]
    assert third[:2] == [user("Also Rome."), user("Weather in Paris?")]
    assert [i.get("type") for i in third[2:]] == ["function_call", "function_call_output"] * 2
    assert third == (await chat.get_items())[:6]


async def test_a_list_of_input_items_enters_as_one_message(chat: InboxlogSession) -> None:
    model = ScriptedModel(say("Hello."))
    items = [user("hi"), {"role": "developer", "content": "Be nice."}]
    await run(agent_with(model), items, session=chat)
    assert model.inputs == [items]
    (message,) = [e["data"] for e in chat.session.events() if e["type"] == "user/message"]
    assert message["items"] == items


async def test_input_the_log_refuses_fails_the_turn(chat: InboxlogSession) -> None:
    model = ScriptedModel(say("never"))
    with pytest.raises(inboxlog.InvalidInputError):
        await run(agent_with(model), [{"role": "user", "content": float("nan")}], session=chat)
    assert model.inputs == []
    (reason,) = turn_ends(chat.session.events())
    assert reason["kind"] == "error" and reason["error"]["code"] == "InvalidInputError"


async def test_a_plugin_that_enters_nothing_ends_the_turn_without_a_step(
    chat: InboxlogSession,
) -> None:
    model = ScriptedModel(say("never"))
    with pytest.raises(TurnEndedError) as raised:
        await run(
            agent_with(model),
            "hi",
            session=chat,
            plugins=[lambda p, n: {"kind": "enter", "messages": []}],
        )
    assert not isinstance(raised.value, StepRejectedError)
    assert raised.value.reason == {"kind": "completed"}
    assert model.inputs == []


async def test_a_plugin_that_raises_fails_the_turn(chat: InboxlogSession) -> None:
    def broken(proposal: Any, next: Any) -> Any:
        raise LookupError("no such policy")

    with pytest.raises(LookupError):
        await run(agent_with(ScriptedModel()), "hi", session=chat, plugins=[broken])
    assert turn_ends(chat.session.events()) == [
        {"kind": "error", "error": {"message": "no such policy", "code": "LookupError"}}
    ]


async def test_the_callers_own_input_filter_runs_after_the_step_entered(
    chat: InboxlogSession,
) -> None:
    from agents import RunConfig
    from agents.run_config import ModelInputData

    seen: list[Any] = []

    def shout(data: Any) -> ModelInputData:
        seen.append(list(data.model_data.input))
        return ModelInputData(input=[user("HI")], instructions=data.model_data.instructions)

    model = ScriptedModel(say("Hello."))
    config = RunConfig(call_model_input_filter=shout)
    await run(agent_with(model), "hi", session=chat, run_config=config)
    assert seen == [[user("hi")]]
    assert model.inputs == [[user("HI")]]


# -- the conversation, written as it happens (SPEC §15.5) ----------------------------


async def test_a_run_writes_its_conversation_as_it_happens(chat: InboxlogSession) -> None:
    logged_before_the_tool: list[str] = []

    @function_tool(name_override="weather")
    def looking(city: str) -> str:
        """The weather in a city."""
        logged_before_the_tool.extend(types(chat.session.events()))
        return f"sunny, 22 C in {city}"

    model = ScriptedModel(call_weather("Paris"), say("Sunny."))
    agent = Agent(name="assistant", instructions="Be brief.", model=model, tools=[looking])
    await run(agent, "Weather in Paris?", session=chat)

    events = [e for e in chat.session.events() if e["type"] in (*oa._KINDS, "tool/call")]
    assert types(events) == [oa.USER, oa.ASSISTANT, "tool/call", oa.RESULT, oa.ASSISTANT]
    assert logged_before_the_tool[-1] == "tool/call"
    asked, called, answered, said = (e["data"] for e in events[1:])
    assert asked["message"]["content"] == [
        {"type": "tool-call", "id": "call_1", "name": "weather", "arguments": '{"city": "Paris"}'}
    ]
    source = asked["message"]["source"]
    assert (source["kind"], source["provider"], source["model"]) == (
        "model",
        "openai",
        "ScriptedModel",
    )
    assert [i["type"] for i in source["replayState"]["items"]] == ["function_call"]
    assert asked["usage"] == {"inputTokens": 0, "outputTokens": 0}
    assert (asked["turn"], asked["step"], said["step"]) == (1, 1, 2)
    assert called == {
        "turn": 1,
        "step": 1,
        "callId": "call_1",
        "name": "weather",
        "arguments": '{"city": "Paris"}',
    }
    assert answered["message"]["content"][0]["content"] == [
        {"type": "text", "text": "sunny, 22 C in Paris"}
    ]
    assert said["message"]["content"] == [{"type": "text", "text": "Sunny."}]
    # Stored once: the SDK's own saves found their items in those events.
    assert oa.ITEMS not in types(chat.session.events())
    history = await chat.get_items()
    assert history[:3] == model.inputs[1]
    assert [i.get("type") for i in history[3:]] == ["message"]
    assert [m["role"] for m in chat.session.messages()] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


async def test_a_tool_that_failed_is_answered_as_an_error(chat: InboxlogSession) -> None:
    @function_tool(name_override="weather")
    def broken(city: str) -> str:
        """The weather in a city."""
        raise OSError("no network")

    model = ScriptedModel(call_weather("Paris"), say("Could not tell."))
    agent = Agent(name="assistant", instructions="Be brief.", model=model, tools=[broken])
    await run(agent, "Weather?", session=chat)
    (result,) = [e["data"] for e in chat.session.events() if e["type"] == oa.RESULT]
    assert result["message"]["content"][0]["isError"] is True


async def test_a_run_that_raises_answers_the_calls_it_leaves(chat: InboxlogSession) -> None:
    @function_tool(name_override="weather", failure_error_function=None)
    def broken(city: str) -> str:
        """The weather in a city."""
        raise OSError("no network")

    model = ScriptedModel(call_weather("Paris"))
    agent = Agent(name="assistant", instructions="Be brief.", model=model, tools=[broken])
    with pytest.raises(Exception, match="no network"):
        await run(agent, "Weather?", session=chat)
    events = chat.session.events()
    (result,) = [e["data"] for e in events if e["type"] == oa.RESULT]
    assert result["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert turn_ends(events)[0]["kind"] == "error"
    # The next run's model sees the call answered.
    again = ScriptedModel(say("It failed."))
    await run(agent_with(again), session=chat)
    assert [i.get("type") for i in again.inputs[0][1:]] == ["function_call", "function_call_output"]


async def test_the_callers_own_hooks_still_run(chat: InboxlogSession) -> None:
    from agents import RunHooks

    heard: list[str] = []

    class Hooks(RunHooks[Any]):
        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            heard.append("llm_end")

        async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
            heard.append(f"tool_start {context.tool_call_id}")

        async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
            heard.append(f"tool_end {result}")

    model = ScriptedModel(call_weather("Paris"), say("Sunny."))
    await run(agent_with(model), "Weather?", session=chat, hooks=Hooks())
    assert heard == ["llm_end", "tool_start call_1", "tool_end sunny, 22 C in Paris", "llm_end"]


async def test_a_log_of_the_previous_release_resumes(store: inboxlog.Store) -> None:
    # What the previous release wrote: the input both as user/message and in
    # openai-agents/items (naming its message), the SDK's saves in openai-agents/items,
    # and no assistant/message or tool/result.
    from inboxlog.integrations._driver import Turn

    question = {"id": "q", "role": "user", "content": "Weather?"}
    call = {"type": "function_call", "call_id": "c", "name": "weather", "arguments": "{}"}
    output = {"type": "function_call_output", "call_id": "c", "output": "sunny"}
    answer = {"type": "message", "role": "assistant", "content": "Sunny.", "id": "m"}
    with store.create("old") as log:
        turn = Turn(log)
        turn.start([question])
        turn.step()
        log.append(oa.ITEMS, {"items": [user("Weather?")], "messages": ["q"]})
        log.append(oa.ITEMS, {"items": [call, output]})
        log.append(oa.ITEMS, {"items": [answer]})
        log.append(oa.POP, {"seq": log.events()[-1]["seq"], "index": 0})
        log.append(oa.ITEMS, {"items": [answer]})
        turn.model_stopped()
    history = [user("Weather?"), call, output, answer]
    assert fold_items(store.inspect("old")[1]) == history
    for n in range(1, 5):
        assert await InboxlogSession(store, "old").get_items(n) == history[-n:]
    with InboxlogSession(store, "old") as session:
        assert await session.get_items() == history
        model = ScriptedModel(say("Still sunny."))
        await run(agent_with(model), "And now?", session=session)
        assert model.inputs == [[*history, user("And now?")]]
        assert (await session.get_items())[:5] == [*history, user("And now?")]


async def test_items_the_conversation_does_not_hold_are_saved_as_the_sdk_gives_them(
    chat: InboxlogSession,
) -> None:
    await chat.add_items([user("a")])
    model = ScriptedModel(say("b"))
    await run(agent_with(model), "c", session=chat)
    assert model.inputs == [[user("a"), user("c")]]
    assert [e["data"]["items"] for e in chat.session.events() if e["type"] == oa.ITEMS] == [
        [user("a")]
    ]
    assert [i.get("role") for i in await chat.get_items()] == ["user", "user", "assistant"]


# -- how a turn ends ----------------------------------------------------------------


def length_stop_from_responses() -> ModelBehaviorError:
    """What the SDK's Responses model raises for an incomplete response."""
    response = Response.model_construct(
        status="incomplete", incomplete_details=IncompleteDetails(reason="max_output_tokens")
    )
    return response_terminal_failure_error("response.incomplete", response)


def length_stop_from_chat_completions() -> ModelBehaviorError:
    """What the SDK's chat-completions model raises for an empty ``length`` stop."""
    return ModelBehaviorError(
        "Chat Completions response terminated with finish_reason='length' "
        "but produced no assistant text, tool call, or refusal."
    )


@pytest.mark.parametrize("stop", [length_stop_from_responses, length_stop_from_chat_completions])
async def test_a_length_stop_ends_the_turn_with_max_tokens(
    chat: InboxlogSession, stop: Callable[[], ModelBehaviorError]
) -> None:
    model = ScriptedModel(call_weather("Paris"), stop())
    with pytest.raises(ModelBehaviorError):
        await run(agent_with(model), "Weather?", session=chat)
    assert turn_ends(chat.session.events()) == [{"kind": "max-tokens"}]


async def test_another_model_behaviour_error_ends_the_turn_with_error(
    chat: InboxlogSession,
) -> None:
    model = ScriptedModel(ModelBehaviorError("tool not found"))
    with pytest.raises(ModelBehaviorError):
        await run(agent_with(model), "Weather?", session=chat)
    assert turn_ends(chat.session.events())[0]["kind"] == "error"


async def test_a_second_concurrent_run_on_one_session_is_refused(chat: InboxlogSession) -> None:
    calling, release = asyncio.Event(), asyncio.Event()

    async def wait() -> list[Any]:
        calling.set()
        await release.wait()
        return say("done")

    first = asyncio.create_task(run(agent_with(ScriptedModel(wait)), "one", session=chat))
    await calling.wait()
    with pytest.raises(inboxlog.ProtocolError):
        await run(agent_with(ScriptedModel(say("x"))), "two", session=chat)
    release.set()
    assert (await first).final_output == "done"
    # The refused run wrote nothing.
    assert not chat.session.inbox.has_pending
    assert [e["data"]["turn"] for e in chat.session.events() if e["type"] == "turn/start"] == [1]


# -- a worker killed mid-run ----------------------------------------------------------


async def test_session_behaviour_matches_the_sdks_sqlite_session(tmp_path: Path) -> None:
    store = inboxlog.Store(tmp_path / "logs", durability="none")
    ours = InboxlogSession(store, "same")
    theirs = SQLiteSession("same")
    a, b, c, d = user("a"), {"role": "assistant", "content": "b"}, user("c"), user("d")
    calls: list[tuple[str, Any]] = [
        ("get", None),
        ("pop", None),
        ("add", [a, b]),
        ("add", []),
        ("add", [c]),
        ("get", None),
        ("get", 2),
        ("get", 1),
        ("get", 0),
        ("get", -1),
        ("get", 10),
        ("pop", None),
        ("get", None),
        ("add", [d, c]),
        ("pop", None),
        ("pop", None),
        ("get", None),
        ("clear", None),
        ("get", None),
        ("pop", None),
        ("clear", None),
        ("add", [b]),
        ("get", 5),
        ("pop", None),
        ("pop", None),
    ]
    for name, arg in calls:
        results = []
        for session in (ours, theirs):
            if name == "get":
                results.append(await session.get_items(arg))
            elif name == "add":
                results.append(await session.add_items(arg))
            elif name == "pop":
                results.append(await session.pop_item())
            else:
                results.append(await session.clear_session())
        assert results[0] == results[1], (name, arg)

    # The default limit comes from the session settings, as in SQLiteSession.
    for session in (ours, theirs):
        await session.add_items([a, b, c])
        session.session_settings = SessionSettings(limit=2)
    assert await ours.get_items() == await theirs.get_items() == [b, c]
    assert await ours.get_items(3) == await theirs.get_items(3) == [a, b, c]
    theirs.close()

    # Append-only: the log holds every item ever added; reopening folds the same history.
    ours.close()
    _, events = store.inspect("same")
    added = [i for e in events if e["type"] == oa.ITEMS for i in e["data"]["items"]]
    assert added == [a, b, c, d, c, b, a, b, c]
    assert types(events).count(oa.POP) == 4 and types(events).count(oa.CLEAR) == 2
    with InboxlogSession(store, "same") as again:
        assert await again.get_items() == [a, b, c] == fold_items(events)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_random_history_matches_the_sdks_sqlite_session(
    store: inboxlog.Store, seed: int
) -> None:
    """A seeded random run of add / get (every kind of limit) / pop / clear gives the
    same answers as the SDK's own SQLiteSession, call by call."""
    rng = random.Random(seed)
    settings = SessionSettings(limit=rng.choice([1, 3, 5]))
    ours = InboxlogSession(store, f"diff-{seed}", session_settings=settings)
    theirs = SQLiteSession(f"diff-{seed}", session_settings=settings)
    made = 0
    try:
        for step in range(300):
            op = rng.choices(["add", "get", "pop", "clear"], weights=[4, 4, 2, 1])[0]
            arg: Any = None
            if op == "add":
                arg = []
                for _ in range(rng.randrange(0, 4)):
                    made += 1
                    arg.append(user(f"item {made}"))
            elif op == "get":
                arg = rng.choice([None, 0, 1, 3, 100, settings.limit, -1])
            answers = []
            for session in (ours, theirs):
                if op == "add":
                    answers.append(await session.add_items(arg))
                elif op == "get":
                    answers.append(await session.get_items(arg))
                elif op == "pop":
                    answers.append(await session.pop_item())
                else:
                    answers.append(await session.clear_session())
            assert answers[0] == answers[1], (seed, step, op, arg)
        assert await ours.get_items(10_000) == await theirs.get_items(10_000)
    finally:
        ours.close()
        theirs.close()


async def test_a_limit_beyond_a_short_history_returns_all_of_it(chat: InboxlogSession) -> None:
    e, f = user("e"), user("f")
    await chat.add_items([user("a"), user("b")])
    await chat.add_items([user("c"), user("d")])
    await chat.clear_session()
    await chat.add_items([e, f])
    assert await chat.get_items() == await chat.get_items(limit=3) == [e, f]


def test_the_session_is_the_sdks_session_protocol(chat: InboxlogSession) -> None:
    from agents.memory.session import Session

    assert isinstance(chat, Session)
    assert chat.session_id == "chat"


async def test_items_survive_a_reopen_of_a_jsonl_log(jsonl: inboxlog.Store) -> None:
    with InboxlogSession(jsonl, "s") as first:
        await first.add_items([user("a"), user("b")])
        assert await first.pop_item() == user("b")
    with InboxlogSession(jsonl, "s") as second:
        assert await second.get_items() == [user("a")]


async def test_an_adopted_session_is_left_open(store: inboxlog.Store) -> None:
    log = store.create("mine")
    with InboxlogSession(log) as adopted:
        await adopted.add_items([user("a")])
    assert not log.closed
    assert InboxlogSession(log, "mine").session is log
    log.close()


def test_constructor_refusals(store: inboxlog.Store) -> None:
    with pytest.raises(TypeError, match="session_id is missing"):
        InboxlogSession(store)
    with pytest.raises(
        TypeError, match=re.escape("expected an inboxlog.Store or inboxlog.Session")
    ):
        InboxlogSession("logs", "s")  # type: ignore[arg-type]
    with store.create("x") as log, pytest.raises(ValueError, match='session_id "y" differs'):
        InboxlogSession(log, "y")
    with pytest.raises(inboxlog.InvalidInputError):
        InboxlogSession(store, "../escape")


def test_fold_items_refuses_a_pop_of_an_item_that_is_not_the_latest() -> None:
    events = [
        {"type": oa.ITEMS, "seq": 0, "time": 0, "data": {"items": [user("a"), user("b")]}},
        {"type": oa.POP, "seq": 1, "time": 0, "data": {"seq": 0, "index": 0}},
    ]
    with pytest.raises(ValueError, match="removes item 0 of seq 0, but the latest is item 1"):
        fold_items(events)
    with pytest.raises(ValueError, match="the latest is no item"):
        fold_items([{"type": oa.POP, "seq": 0, "time": 0, "data": {"seq": 0, "index": 0}}])


def test_message_items() -> None:
    assert message_items({"id": "m", "content": "hi"}) == [user("hi")]
    assert message_items({"id": "m", "role": "developer", "content": "x", "source": "web"}) == [
        {"role": "developer", "content": "x"}
    ]
    items = [{"type": "function_call_output", "call_id": "c", "output": "ok"}]
    assert message_items({"id": "m", "items": items}) == items
    assert message_items({"id": "m", "continue": True}) == []
    with pytest.raises(ValueError, match='message "m": "items" must be a list of objects'):
        message_items({"id": "m", "items": "nope"})


# -- packaging: optional, typed, documented, demonstrated ------------------------------


# -- reading without owning (issue #41) ------------------------------------------------


async def test_get_items_before_a_write_reads_without_owning(jsonl: inboxlog.Store) -> None:
    with InboxlogSession(jsonl, "busy") as writer:
        await writer.add_items([user("a"), user("b"), user("c")])
        assert await writer.pop_item() == user("c")
        # Another worker picks the conversation up while the writer still holds it.
        reader = InboxlogSession(jsonl, "busy")
        assert await reader.get_items(1) == [user("b")]
        assert await reader.get_items() == [user("a"), user("b")]
        with pytest.raises(inboxlog.LockedError):
            await reader.add_items([user("d")])  # its first write needs ownership
        reader.close()
    # Once the writer let go, the first write opens it.
    with InboxlogSession(jsonl, "busy") as next_worker:
        await next_worker.add_items([user("d")])
        assert await next_worker.get_items(2) == [user("b"), user("d")]
    # A session that does not exist has no items, and reading it creates nothing.
    assert await InboxlogSession(jsonl, "new").get_items(3) == []
    assert [h["id"] for h in jsonl.list()] == ["busy"]


class _Counting:
    """A store that counts the events its reads return."""

    def __init__(self, store: inboxlog.Store) -> None:
        self.store, self.returned = store, 0

    def tail(self, id: str, limit: int, types: Any = None) -> Any:
        events = self.store.tail(id, limit, types)
        self.returned += len(events)
        return events

    def read(self, id: str, since: int = 0) -> Any:
        events = self.store.read(id, since)
        self.returned += len(events)
        return events


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_the_last_items_read_from_the_end_equal_the_whole_fold(
    store: inboxlog.Store, seed: int
) -> None:
    rng = random.Random(seed)
    with InboxlogSession(store, "h") as writer:
        for step in range(400):
            op = rng.choices(["add", "pop", "clear"], weights=[8, 3, 1 if seed > 2 else 0])[0]
            if op == "add":
                await writer.add_items([user(f"{step}.{i}") for i in range(rng.randrange(1, 4))])
            elif op == "pop":
                await writer.pop_item()
            else:
                await writer.clear_session()
            writer.session.append("host/other", {"step": step})
    whole = fold_items(store.inspect("h")[1])
    for n in [1, 2, 5, 20, 100, 10_000]:
        counting = _Counting(store)
        got = oa._stored_items(counting, "h", n)  # type: ignore[arg-type]
        assert got == whole[len(whole) - min(n, len(whole)) :], (seed, n)
        assert await InboxlogSession(store, "h").get_items(n) == got


async def test_the_last_items_cost_the_events_that_hold_them_not_the_history() -> None:
    store = inboxlog.Store.memory()
    with InboxlogSession(store, "long") as writer:
        for step in range(3000):
            await writer.add_items([user(f"{step}.a"), user(f"{step}.b")])
            if step % 3 == 0:
                await writer.pop_item()
    counting = _Counting(store)
    assert await InboxlogSession(store, "long").get_items(1) == [user("2999.b")]
    got = oa._stored_items(counting, "long", 20)  # type: ignore[arg-type]
    assert got == fold_items(store.inspect("long")[1])[-20:]
    # 4,000 events of the history's types; the last 20 items lie in the last 14 or so:
    # the last event (2 items), then as many as 2 items an event need, with a margin.
    assert counting.returned == 1 + 17


async def test_an_imported_history_is_read_from_its_last_event() -> None:
    # A session's first add_items often carries a whole imported history: the last 20
    # items of batches of 100 are in the last event, which is all a resume reads.
    store = inboxlog.Store.memory()
    with InboxlogSession(store, "imported") as writer:
        for batch in range(50):
            await writer.add_items([user(f"{batch}.{i}") for i in range(100)])
    counting = _Counting(store)
    got = oa._stored_items(counting, "imported", 20)  # type: ignore[arg-type]
    assert got == [user(f"49.{i}") for i in range(80, 100)]
    assert counting.returned == 1
    # Across a batch's edge: the last event, then the 2 events 150 items need and 4 more.
    counting = _Counting(store)
    got = oa._stored_items(counting, "imported", 150)  # type: ignore[arg-type]
    assert got == fold_items(store.inspect("imported")[1])[-150:]
    assert counting.returned == 1 + 6


def test_the_walk_from_the_end_refuses_what_the_fold_refuses() -> None:
    def ev(seq: int, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        return {"type": kind, "seq": seq, "time": 0, "data": data}

    items = ev(0, oa.ITEMS, {"items": [user("a"), user("b")]})
    wrong = [items, ev(1, oa.POP, {"seq": 0, "index": 0})]
    with pytest.raises(ValueError, match="removes item 0 of seq 0, but the latest is item 1"):
        oa._latest_items(wrong, 5, whole=True)
    nothing = [items, ev(1, oa.CLEAR, {}), ev(2, oa.POP, {"seq": 0, "index": 1})]
    with pytest.raises(ValueError, match="but the latest is no item"):
        oa._latest_items(nothing, 5, whole=True)
    right = [items, ev(1, oa.POP, {"seq": 0, "index": 1})]
    assert oa._latest_items(right, 5, whole=True) == [user("a")]
    assert oa._latest_items(right, 5, whole=False) is None
    assert oa._latest_items(right, 1, whole=False) == [user("a")]
