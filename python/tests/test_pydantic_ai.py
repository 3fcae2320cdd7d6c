"""inboxlog.integrations.pydantic_ai with the real Pydantic AI and no network.

Every model here is Pydantic AI's own ``FunctionModel`` (or ``TestModel``): the agent runs
its real graph (tools, retries, output tools, the capability hooks) and never calls a
provider.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import entered, turn_ends, types
from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.exceptions import IncompleteToolCall
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

import inboxlog
from inboxlog.integrations import _driver as driver
from inboxlog.integrations import pydantic_ai as pa
from inboxlog.integrations.pydantic_ai import (
    InboxlogCapability,
    fold_messages,
    message_parts,
)

# The async tests run on asyncio through anyio's pytest plugin (anyio comes with Pydantic AI).
pytestmark = pytest.mark.anyio


@pytest.fixture
def sync_loop() -> Iterator[None]:
    """``run_sync`` leaves the event loop it made open, as the thread's current loop; it is
    closed here, or its collection in a later test raises an unclosed-loop warning."""
    yield
    policy = asyncio.get_event_loop_policy()
    policy.get_event_loop().close()
    policy.set_event_loop(None)


# -- a scripted model ------------------------------------------------------------------

Reply = ModelResponse | BaseException | Callable[[], Awaitable[ModelResponse]]


class Script:
    """Answers the n-th model request with the n-th reply (a response, an exception to
    raise, or a coroutine function making the response); records what each one saw."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.seen: list[list[ModelMessage]] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(copy.deepcopy(messages))
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        return reply if isinstance(reply, ModelResponse) else await reply()

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self)

    def prompts(self, call: int) -> list[str]:
        """The user prompts the request of model call ``call`` (0-based) added."""
        return prompts_of(self.seen[call][-1])


def prompts_of(message: ModelMessage) -> list[str]:
    return [
        str(p.content)
        for p in message.parts
        if isinstance(message, ModelRequest) and isinstance(p, UserPromptPart)
    ]


def say(text: str, **kw: Any) -> ModelResponse:
    return ModelResponse(parts=[TextPart(text)], **kw)


def call_weather(city: str, tool: str = "weather") -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(tool, {"city": city}, tool_call_id=f"c-{city}")])


def agent_with(model: FunctionModel | TestModel, target: Any, **kw: Any) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(
        model, instructions="Be brief.", capabilities=[InboxlogCapability(target)], **kw
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny, 22 C in {city}"

    return agent


def round_trip(messages: list[ModelMessage]) -> list[ModelMessage]:
    """What Pydantic AI's own message_history persistence gives back."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))


def log_of(store: inboxlog.Store, id: str = "chat") -> list[dict[str, Any]]:
    return store.inspect(id)[1]


def content_of(event: dict[str, Any]) -> list[dict[str, Any]]:
    return list(event["data"]["message"]["content"])


CONVERSATION = ("user/message", "assistant/message", "tool/call", "tool/result")


# -- the conversation (SPEC §15.5) --------------------------------------------------------


async def test_the_conversation_is_written_as_it_happens(store: inboxlog.Store) -> None:
    """Each response is one ``assistant/message``, each tool run a ``tool/call`` then its
    ``tool/result``; the log's surface is the conversation the model had."""
    usage = RequestUsage(input_tokens=12, output_tokens=3, cache_read_tokens=2)
    script = Script(
        call_weather("Paris"),
        say("Sunny in Paris.", usage=usage, provider_name="acme"),
    )
    await agent_with(script.model, store).run("Weather in Paris?", conversation_id="chat")
    events = log_of(store)
    assert [e["type"] for e in events if e["type"] in CONVERSATION] == [
        "user/message",
        "assistant/message",
        "tool/call",
        "tool/result",
        "assistant/message",
    ]
    calling, answer = (e["data"] for e in events if e["type"] in ("tool/call", "tool/result"))
    asked, told = (e["data"] for e in events if e["type"] == "assistant/message")
    arguments = '{"city":"Paris"}'
    assert asked["message"]["content"] == [
        {"type": "tool-call", "id": "c-Paris", "name": "weather", "arguments": arguments}
    ]
    assert (calling["callId"], calling["name"], calling["arguments"]) == (
        "c-Paris",
        "weather",
        arguments,
    )
    assert [answer["turn"], answer["step"]] == [1, 1]
    assert answer["message"]["content"] == [
        {
            "type": "tool-result",
            "toolCallId": "c-Paris",
            "content": [{"type": "text", "text": "sunny, 22 C in Paris"}],
        }
    ]
    assert told["message"]["content"] == [{"type": "text", "text": "Sunny in Paris."}]
    source = told["message"]["source"]
    assert {k: source[k] for k in ("kind", "provider", "model")} == {
        "kind": "model",
        "provider": "acme",
        "model": "function:Script:",
    }
    # The response itself travels in the message, not beside it: stored once.
    [response] = ModelMessagesTypeAdapter.dump_python(fold_messages(events)[-1:], mode="json")
    assert source["replayState"] == {"pydantic-ai": response}
    assert not any(
        m["kind"] == "response"
        for e in events
        if e["type"] == pa.MESSAGES
        for m in e["data"]["messages"]
    )
    assert told["usage"] == {"inputTokens": 12, "outputTokens": 3, "cacheReadTokens": 2}
    assert [m["role"] for m in store.messages("chat")] == ["user", "assistant", "user", "assistant"]


async def test_a_failing_tool_is_answered_an_error_before_the_run_fails(
    store: inboxlog.Store,
) -> None:
    agent: Agent[None, str] = Agent(
        Script(call_weather("Paris")).model, capabilities=[InboxlogCapability(store)]
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        raise LookupError(f"no station in {city}")

    with pytest.raises(LookupError):
        await agent.run("Weather in Paris?", conversation_id="chat")
    [answer] = [e["data"] for e in log_of(store) if e["type"] == "tool/result"]
    assert answer["error"] == {"name": "LookupError", "code": "TOOL_ERROR"}
    [block] = answer["message"]["content"]
    assert block["isError"] is True and "no station in Paris" in block["content"][0]["text"]


async def test_a_run_cancelled_inside_a_tool_answers_the_call_before_its_turn_ends(
    store: inboxlog.Store,
) -> None:
    agent: Agent[None, str] = Agent(
        Script(call_weather("Paris")).model, capabilities=[InboxlogCapability(store)]
    )
    inside = asyncio.Event()

    @agent.tool_plain
    async def weather(city: str) -> str:
        """The weather in a city."""
        inside.set()
        await asyncio.sleep(60)
        return "sunny"

    run = asyncio.ensure_future(agent.run("Weather in Paris?", conversation_id="chat"))
    await inside.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    events = log_of(store)
    kinds = [e["type"] for e in events if e["type"] in (*CONVERSATION, "turn/end")]
    assert kinds[-3:] == ["tool/call", "tool/result", "turn/end"]
    [answer] = [e["data"] for e in events if e["type"] == "tool/result"]
    assert answer["error"] == {"name": "CancelledError", "code": "TOOL_CANCELLED"}
    assert answer["message"]["content"][0]["isError"] is True
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]


async def test_a_run_resumed_after_a_crash_inside_a_tool_sees_the_call_answered(
    tmp_path: Path,
) -> None:
    """The log as a worker killed inside a tool leaves it (copied while the tool runs):
    its next open answers the call, outcome unknown, and the resumed run's request
    carries that answer as Pydantic AI's own ``ToolReturnPart``; the tool runs no more."""
    ran: list[str] = []

    def agent_on(store: inboxlog.Store, script: Script) -> Agent[None, str]:
        agent: Agent[None, str] = Agent(script.model, capabilities=[InboxlogCapability(store)])

        @agent.tool_plain
        def weather(city: str) -> str:
            """The weather in a city."""
            if not ran:  # the first run: the log as the crash leaves it
                (tmp_path / "crashed").mkdir()
                shutil.copy(tmp_path / "logs" / "chat.jsonl", tmp_path / "crashed")
            ran.append(city)
            return "sunny"

        return agent

    first = agent_on(
        inboxlog.Store(tmp_path / "logs", durability="sync"),
        Script(call_weather("Paris"), say("Sunny.")),
    )
    await first.run("Weather in Paris?", conversation_id="chat")
    store = inboxlog.Store(tmp_path / "crashed", durability="sync")
    with store.open("chat") as session:
        assert session.open_report["repairedTurn"] == 1
    resumed = Script(say("I cannot tell."))
    result = await agent_on(store, resumed).run(conversation_id="chat")
    assert ran == ["Paris"]
    [seen] = resumed.seen
    [answer] = seen[-1].parts
    assert isinstance(answer, ToolReturnPart) and answer.tool_call_id == "c-Paris"
    assert answer.outcome == "failed" and "unknown" in str(answer.content)
    events = log_of(store)
    assert [e["data"]["error"]["code"] for e in events if e["type"] == "tool/result"] == [
        "TOOL_OUTCOME_UNKNOWN"
    ]
    assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
    assert not any(e["type"] == pa.HISTORY for e in events)  # resuming copies nothing
    assert fold_messages(events) == round_trip(result.all_messages())
    # The resumed request's record cites repair's answer rather than repeating it.
    repaired = next(e["seq"] for e in events if e["type"] == "tool/result")
    assert [p[pa.REF] for p in cited_parts(events) if "tool_name" in p] == [repaired]
    assert [type(m).__name__ for m in fold_messages(events)] == [
        "ModelRequest",
        "ModelResponse",
        "ModelRequest",
        "ModelResponse",
    ]


# -- a run is a turn, a model request a step ---------------------------------------------


async def test_the_next_run_continues_from_the_log_without_message_history(
    store: inboxlog.Store,
) -> None:
    script = Script(say("Sunny in Paris."), say("Rainy in Rome."))
    agent = agent_with(script.model, store)
    first = await agent.run("Weather in Paris?", conversation_id="chat")
    second = await agent.run("And Rome?", conversation_id="chat")

    assert script.seen[1][:2] == round_trip(first.all_messages())
    assert script.prompts(1) == ["And Rome?"]
    assert second.all_messages()[:2] == first.all_messages()
    assert second.new_messages() == second.all_messages()[2:]
    assert fold_messages(log_of(store)) == round_trip(second.all_messages())
    assert turn_ends(log_of(store)) == [{"kind": "completed"}] * 2


async def test_a_run_sees_what_other_writers_added_since_its_last_run(
    store: inboxlog.Store,
) -> None:
    """A capability keeps the history between its runs; another writer's turns, and a
    history rewritten by one, still reach it from the log."""
    ours = Script(say("one"), say("three"), say("five"))
    theirs = Script(say("two"), say("four"))
    ours_agent = agent_with(ours.model, store)
    their_agent: Agent[None, str] = Agent(
        theirs.model,
        capabilities=[InboxlogCapability(store), ProcessHistory(lambda ms: ms[-1:])],
    )
    await ours_agent.run("1", conversation_id="chat")
    await agent_with(theirs.model, store).run("2", conversation_id="chat")  # another worker
    third = await ours_agent.run("3", conversation_id="chat")
    assert [prompts_of(m) for m in ours.seen[1] if isinstance(m, ModelRequest)] == [
        ["1"],
        ["2"],
        ["3"],
    ]
    assert fold_messages(log_of(store)) == round_trip(third.all_messages())

    await their_agent.run("4", conversation_id="chat")  # rewrites the history to its request
    fifth = await ours_agent.run("5", conversation_id="chat")
    assert [prompts_of(m) for m in ours.seen[2] if isinstance(m, ModelRequest)] == [["4"], ["5"]]
    assert fold_messages(log_of(store)) == round_trip(fifth.all_messages())


async def test_a_session_deleted_and_created_again_is_read_afresh(store: inboxlog.Store) -> None:
    script = Script(say("one"), say("two"))
    agent = agent_with(script.model, store)
    await agent.run("1", conversation_id="chat")
    store.delete("chat")
    store.create("chat").close()
    await agent.run("2", conversation_id="chat")
    assert [prompts_of(m) for m in script.seen[1] if isinstance(m, ModelRequest)] == [["2"]]


async def test_history_survives_a_restart_and_equals_the_message_history_round_trip(
    tmp_path: Path,
) -> None:
    root = tmp_path / "logs"
    script = Script(call_weather("Paris"), say("Sunny in Paris."))
    result = await agent_with(script.model, inboxlog.Store(root)).run(
        "Weather in Paris?", conversation_id="chat"
    )
    expected = round_trip(result.all_messages())

    # A new store handle (another process, after a restart) reads the same history.
    restarted = inboxlog.Store(root)
    assert fold_messages(log_of(restarted)) == expected
    script2 = Script(say("Still sunny."))
    await agent_with(script2.model, restarted).run("Still?", conversation_id="chat")
    assert script2.seen[0][:4] == expected

    # The same history fed to Pydantic AI by hand gives the model the same view.
    plain = Script(say("Still sunny."))
    await Agent(plain.model, instructions="Be brief.").run("Still?", message_history=expected)
    assert plain.seen[0][:4] == script2.seen[0][:4]
    assert prompts_of(plain.seen[0][-1]) == prompts_of(script2.seen[0][-1]) == ["Still?"]


# -- steering ------------------------------------------------------------------------------


async def test_steering_during_run_streams_final_response_waits_for_the_next_run(
    store: inboxlog.Store,
) -> None:
    """Pydantic AI runs no node hook for run_stream's final response, so no request can
    carry steering that arrives then: the turn ends with the inbox kept (nothing is
    canceled or moved) and the next run's first request takes it."""
    session = store.create("chat")

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        if len(messages) == 1:
            session.inbox.append("next-step", {"id": "late", "content": "And tomorrow?"})
            yield "Sunny."
        else:
            yield "Rain tomorrow."

    agent: Agent[None, str] = Agent(
        FunctionModel(stream_function=stream), capabilities=[InboxlogCapability(session)]
    )
    async with agent.run_stream("Weather?") as streamed:
        assert await streamed.get_output() == "Sunny."
    reason = "steering arrived after the run's last model call"
    ended = {"kind": "aborted", "reason": {"kind": "hook", "reason": reason}}
    assert turn_ends(session.events()) == [ended]
    assert [m["id"] for m in session.inbox.next_step] == ["late"]
    assert not any(
        e["data"].get("outcome") for e in session.events() if e["type"] == "agent/inbox/spliced"
    )

    async with agent.run_stream() as streamed:
        assert await streamed.get_output() == "Rain tomorrow."
    assert entered(session.events())[-1] == (2, 1, "late")
    assert turn_ends(session.events()) == [ended, {"kind": "completed"}]
    session.close()


# -- endings ---------------------------------------------------------------------------------


async def test_a_tool_call_cut_at_the_token_limit_ends_max_tokens_and_propagates(
    store: inboxlog.Store,
) -> None:
    cut = ModelResponse(parts=[ToolCallPart("weather", '{"city": "Par')], finish_reason="length")
    # Pydantic AI asks again while its retry budget lasts, then raises.
    script = Script(*[cut] * 5)
    with pytest.raises(IncompleteToolCall):
        await agent_with(script.model, store).run("Weather?", conversation_id="chat")
    events = log_of(store)
    assert turn_ends(events) == [{"kind": "max-tokens"}]
    assert 1 < len(script.seen) < 5
    assert round_trip([cut])[0] in fold_messages(events)


async def test_a_raised_length_stop_with_steering_pending_ends_aborted_with_the_inbox_kept(
    store: inboxlog.Store,
) -> None:
    """The length error propagates, so no request of this run can take the steering: the
    turn ends as for any steering too late for the run (aborted, cause hook) and the
    input stays for the next run."""
    session = store.create("chat")
    cut = ModelResponse(parts=[ToolCallPart("weather", '{"city": "Par')], finish_reason="length")
    calls: list[str] = []

    async def cut_while_steering_arrives() -> ModelResponse:
        calls.append(f"s{len(calls)}")
        session.inbox.append("next-step", {"id": calls[-1], "content": "Hurry."})
        return cut

    script = Script(*[cut_while_steering_arrives] * 5)
    with pytest.raises(IncompleteToolCall):
        await agent_with(script.model, session).run("Weather?")
    (reason,) = turn_ends(session.events())
    assert reason["kind"] == "aborted" and reason["reason"]["kind"] == "hook"
    assert [m["id"] for m in session.inbox.next_step] == [calls[-1]]
    assert [i for _, _, i in entered(session.events())][1:] == calls[:-1]
    session.close()


class City(BaseModel):
    name: str
    sunny: bool


def normalized(messages: list[ModelMessage]) -> list[Any]:
    """The messages without what differs between two runs (times, ids, metadata)."""
    out = []
    for m in messages:
        parts = []
        for p in m.parts:
            d = {k: v for k, v in vars(p).items() if k not in ("timestamp", "tool_call_id", "id")}
            parts.append(d)
        out.append((type(m).__name__, parts))
    return out


async def test_structured_output_and_tool_retries_pass_through_unchanged(
    store: inboxlog.Store,
) -> None:
    def script() -> Script:
        return Script(
            call_weather("Nowhere", tool="checked_weather"),
            call_weather("Paris", tool="checked_weather"),
            ModelResponse(parts=[ToolCallPart("final_result", {"name": "Paris"})]),  # invalid
            ModelResponse(parts=[ToolCallPart("final_result", {"name": "Paris", "sunny": True})]),
        )

    def build(model: FunctionModel, capabilities: list[Any]) -> Agent[None, City]:
        agent: Agent[None, City] = Agent(model, output_type=City, capabilities=capabilities)

        @agent.tool_plain
        def checked_weather(city: str) -> str:
            """The weather in a known city."""
            if city == "Nowhere":
                raise ModelRetry("unknown city, try again")
            return "sunny"

        return agent

    plain, ours = script(), script()
    expected = await build(plain.model, []).run("Weather in Paris?")
    result = await build(ours.model, [InboxlogCapability(store)]).run(
        "Weather in Paris?", conversation_id="chat"
    )
    assert result.output == expected.output == City(name="Paris", sunny=True)
    assert [normalized(seen) for seen in ours.seen] == [normalized(seen) for seen in plain.seen]
    assert normalized(result.all_messages()) == normalized(expected.all_messages())
    events = log_of(store)
    assert fold_messages(events) == round_trip(result.all_messages())
    assert [e["data"]["step"] for e in events if e["type"] == "step/start"] == [1, 2, 3, 4]
    assert turn_ends(events) == [{"kind": "completed"}]
    # Every call answered once, the retries (the tool's, the invalid output's) errors.
    calls = [e["data"]["callId"] for e in events if e["type"] == "tool/call"]
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    said = [b for e in events if e["type"] == "assistant/message" for b in content_of(e)]
    assert [b["name"] for b in said] == ["checked_weather"] * 2 + ["final_result"] * 2
    assert [r["message"]["source"]["callId"] for r in results] == [b["id"] for b in said]
    assert calls == [b["id"] for b in said[:2]]  # the tools that ran; output is no tool run
    assert [r.get("error", {}).get("code") for r in results] == [
        "TOOL_RETRY",
        None,
        "TOOL_RETRY",
        None,
    ]


async def test_iter_and_run_stream_are_one_turn_each(store: inboxlog.Store) -> None:
    agent = agent_with(TestModel(custom_output_text="Sunny."), store)
    async with agent.iter("Weather?", conversation_id="chat") as run:
        async for _node in run:
            pass
    assert run.result is not None and run.result.output == "Sunny."
    async with agent.run_stream("Again?", conversation_id="chat") as streamed:
        assert await streamed.get_output() == "Sunny."
    events = log_of(store)
    assert turn_ends(events) == [{"kind": "completed"}] * 2
    history = fold_messages(events)
    assert next(prompts_of(m) for m in history if isinstance(m, ModelRequest)) == ["Weather?"]
    assert prompts_of(history[-2]) == ["Again?"] and isinstance(history[-1], ModelResponse)


@pytest.mark.usefixtures("sync_loop")
def test_run_sync_is_one_turn(tmp_path: Path) -> None:
    store = inboxlog.Store(tmp_path / "logs", durability="none")
    result = agent_with(TestModel(), store).run_sync("Weather in Paris?", conversation_id="c")
    events = log_of(store, "c")
    assert turn_ends(events) == [{"kind": "completed"}]
    assert fold_messages(events) == round_trip(result.all_messages())


async def test_a_response_record_that_fails_fails_the_run_at_the_next_hook(
    store: inboxlog.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A response is written while the tools run: when writing it fails, the next hook
    raises that error, the turn ends ``error`` and the response is recorded with the
    rest of the history as the run ends, so nothing in it is lost."""
    real = pa._Run.record
    failures = []

    def failing(run: Any, messages: Any, kind: str = pa.MESSAGES) -> None:
        if not failures and any(isinstance(m, ModelResponse) for m in messages):
            failures.append(kind)
            run.log.append("turn/start", {"messages": []})  # a reserved type: refused
        real(run, messages, kind)

    monkeypatch.setattr(pa._Run, "record", failing)
    script = Script(call_weather("Paris"), say("Sunny in Paris."))
    with pytest.raises(inboxlog.InvalidInputError, match="turn/start is written only by"):
        await agent_with(script.model, store).run("Weather?", conversation_id="chat")
    assert failures == [pa.MESSAGES]
    assert len(script.seen) == 1  # the second request never went out
    events = log_of(store)
    [end] = turn_ends(events)
    assert end["kind"] == "error" and end["error"]["code"] == "InvalidInputError"
    last = fold_messages(events)[-1]
    assert isinstance(last, ModelResponse) and last.parts[0].part_kind == "tool-call"
    assert sum(e["type"] == pa.MESSAGES for e in events) == 1  # the request
    assert sum(e["type"] == "assistant/message" for e in events) == 1  # the response, once


# -- the work a model request costs, and runs at once ----------------------------------------


async def test_each_run_makes_the_same_few_worker_thread_calls(
    store: inboxlog.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of two model requests and one tool makes ten log calls off the event loop,
    however long the conversation: the turn's start; per request its step, its record
    and its response's (started at once, waited for before a tool starts or by the next
    hook); per tool run its call (durable before the tool starts) and its result; the
    model's stop (the last step's end with the turn's close); the session's release."""
    made: list[str] = []
    real, real_start = pa.call, pa.start

    async def counted(fn: Callable[..., Any], *args: Any) -> Any:
        made.append(fn.__name__)
        return await real(fn, *args)

    def started(fn: Callable[..., Any], *args: Any) -> Any:
        made.append(f"{fn.__name__} (started)")
        return real_start(fn, *args)

    monkeypatch.setattr(pa, "call", counted)
    monkeypatch.setattr(driver, "call", counted)
    monkeypatch.setattr(pa, "start", started)
    replies = [call_weather("Paris"), say("Sunny in Paris.")]
    script = Script(*replies * 3)
    agent = agent_with(script.model, store)
    per_run = []
    for n in range(3):
        made.clear()
        await agent.run(f"Weather in Paris? ({n})", conversation_id="chat")
        per_run.append(list(made))
    step = ["_boundary", "record_new", "record_new (started)"]
    tool = ["calling", "answer"]
    assert per_run == [["begin", *step, *tool, *step, "stop", "end"]] * 3
    assert turn_ends(log_of(store)) == [{"kind": "completed"}] * 3


PROTOCOL = ("turn/start", "turn/end", "step/start", "step/end", "user/message")


def protocol_events(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The protocol's events and the inbox's splices, a run's prompt id and a post's id
    made the same in every log."""
    out = []
    for e in events:
        if e["type"] in PROTOCOL or e["type"] == "agent/inbox/spliced":
            data = re.sub(r"input-[0-9a-f]{32}", "input-*", json.dumps(e["data"]))
            out.append((e["type"], re.sub(r'"post": "[^"]*"', '"post": "*"', data)))
    return out


async def test_without_plugins_each_boundary_is_one_write_of_the_separate_calls_events(
    store: inboxlog.Store,
) -> None:
    """Without plugins a step boundary (the step's end, the claim, the decision) and the
    turn's end (the step's end, the close) are one log call each; a plugin letting
    every claim through takes the separate calls. Both logs hold the same protocol
    events, steering posted from elsewhere and a length stop included."""

    def through(proposal: Any, next: Any) -> Any:
        return next()

    logs = []
    for plugins in ([], [through]):
        chat = f"chat-{len(plugins)}"

        async def post_then_call(chat: str = chat) -> ModelResponse:
            store.post(chat, "next-step", {"id": "hurry", "content": "Hurry."})
            return call_weather("Paris")

        cut = say("Sunny in Ro", finish_reason="length")
        script = Script(post_then_call, say("Sunny."), call_weather("Rome"), cut)
        agent = Agent(script.model, capabilities=[InboxlogCapability(store, plugins=plugins)])

        @agent.tool_plain
        def weather(city: str) -> str:
            """The weather in a city."""
            return f"sunny in {city}"

        store.create(chat).close()
        await agent.run("Weather?", conversation_id=chat)
        await agent.run("And Rome?", conversation_id=chat)
        logs.append(protocol_events(log_of(store, chat)))
        assert prompts_of(script.seen[1][-1]) == ["Hurry."]
    assert logs[0] == logs[1]
    assert turn_ends(log_of(store, "chat-0")) == [{"kind": "completed"}, {"kind": "max-tokens"}]


async def test_concurrent_runs_on_distinct_conversations_keep_their_turns_apart(
    store: inboxlog.Store,
) -> None:
    capability = InboxlogCapability(store)
    both_in_tool = asyncio.Barrier(2)
    sessions_seen: list[inboxlog.Session | None] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = [p for p in last.parts if p.part_kind == "tool-return"]
        if returned:
            return say(f"{returned[0].content}.")
        if prompts_of(last) == ["Thanks."]:
            return say("Bye.")
        return call_weather(prompts_of(last)[0])

    agent: Agent[None, str] = Agent(FunctionModel(respond), capabilities=[capability])

    @agent.tool_plain
    async def weather(city: str) -> str:
        """The weather in a city, once the other run is in its tool too."""
        await both_in_tool.wait()
        sessions_seen.append(capability.session)  # two runs: no one session to name
        return f"sunny in {city}"

    paris, rome = await asyncio.gather(
        agent.run("Paris", conversation_id="paris"), agent.run("Rome", conversation_id="rome")
    )
    assert (paris.output, rome.output) == ("sunny in Paris.", "sunny in Rome.")
    assert sessions_seen == [None, None]
    for id, result in (("paris", paris), ("rome", rome)):
        events = log_of(store, id)
        assert turn_ends(events) == [{"kind": "completed"}]
        assert [e["data"]["step"] for e in events if e["type"] == "step/start"] == [1, 2]
        assert fold_messages(events) == round_trip(result.all_messages())
    # Each conversation's next run continues its own history.
    again = await agent.run("Thanks.", conversation_id="rome")
    assert again.all_messages()[:4] == rome.all_messages()
    assert capability.session is None


async def test_a_run_id_in_progress_is_refused_before_anything_is_written(
    store: inboxlog.Store,
) -> None:
    entered_tool, release = asyncio.Event(), asyncio.Event()
    capability = InboxlogCapability(store)
    agent: Agent[None, str] = Agent(TestModel(), capabilities=[capability])

    @agent.tool_plain
    async def weather(city: str) -> str:
        """The weather in a city, once released."""
        entered_tool.set()
        await release.wait()
        return "sunny"

    first = asyncio.create_task(agent.run("hi", conversation_id="a", run_id="same"))
    await entered_tool.wait()
    assert capability.session is not None and capability.session.id == "a"
    with pytest.raises(RuntimeError, match='a run with id "same" is in progress'):
        await agent.run("hi", conversation_id="b", run_id="same")
    release.set()
    await first
    assert turn_ends(log_of(store, "a")) == [{"kind": "completed"}]
    assert store.list() == [h for h in store.list() if h["id"] == "a"]


# -- a killed worker, resumed elsewhere ---------------------------------------------------


async def test_a_given_message_history_seeds_an_empty_log_and_is_refused_over_a_full_one(
    store: inboxlog.Store,
) -> None:
    seed = round_trip([ModelRequest(parts=[UserPromptPart("hi")]), say("hello")])
    script = Script(say("Again."), say("never"))
    agent = agent_with(script.model, store)
    result = await agent.run("Again?", conversation_id="chat", message_history=seed)
    assert fold_messages(log_of(store)) == round_trip(result.all_messages())
    with pytest.raises(ValueError, match='session "chat" holds a history'):
        await agent.run("More?", conversation_id="chat", message_history=seed)
    assert len(script.seen) == 1
    assert turn_ends(log_of(store)) == [{"kind": "completed"}]


async def test_a_session_held_by_another_writer_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    store = inboxlog.Store(tmp_path / "logs")
    with store.create("chat") as held:
        with pytest.raises(inboxlog.LockedError):
            await agent_with(TestModel(), store).run("hi", conversation_id="chat")
        assert held.events() == []


async def test_a_conversation_id_that_is_no_session_id_is_refused(store: inboxlog.Store) -> None:
    with pytest.raises(inboxlog.InvalidInputError):
        await agent_with(TestModel(), store).run("hi", conversation_id="../escape")


async def test_an_adopted_session_is_left_open(store: inboxlog.Store) -> None:
    log = store.create("mine")
    await agent_with(TestModel(), log).run("hi")
    assert not log.closed
    assert turn_ends(log.events()) == [{"kind": "completed"}]
    log.close()


def test_constructor_refusals() -> None:
    with pytest.raises(
        TypeError, match=re.escape("expected an inboxlog.Store or inboxlog.Session")
    ):
        InboxlogCapability("logs")  # type: ignore[arg-type]


async def test_a_hook_called_outside_a_run_is_refused(store: inboxlog.Store) -> None:
    capability = InboxlogCapability(store)
    with pytest.raises(RuntimeError, match="a hook ran outside a run"):
        await capability.after_node_run(None, node=None, result=None)  # type: ignore[arg-type]


def test_message_parts_and_fold_messages() -> None:
    assert message_parts({"id": "m", "content": "hi", "role": "user"})[0].content == "hi"
    assert message_parts({"id": "m", "continue": True}) == []
    (image,) = message_parts(
        {"id": "m", "content": ["look", {"kind": "image-url", "url": "https://x/y.png"}]}
    )
    assert isinstance(image, UserPromptPart) and len(image.content) == 2
    with pytest.raises(ValueError, match='message "m": "content" must be a string or a list'):
        message_parts({"id": "m", "content": 3})
    say_a, say_b = say("a"), say("b")
    a = ModelMessagesTypeAdapter.dump_python([say_a], mode="json")
    b = ModelMessagesTypeAdapter.dump_python([say_b], mode="json")
    events = [
        {"type": pa.MESSAGES, "seq": 0, "time": 0, "data": {"messages": a}},
        {"type": pa.HISTORY, "seq": 1, "time": 0, "data": {"messages": b}},
        {"type": pa.MESSAGES, "seq": 2, "time": 0, "data": {"messages": a}},
    ]
    assert fold_messages(events) == round_trip([say_b, say_a])


async def test_a_log_of_the_previous_release_resumes(store: inboxlog.Store) -> None:
    """The previous release kept each response in its ``pydantic-ai/messages`` records
    and wrote no conversation events: its logs still resume, the history read from
    both kinds of record in log order."""
    earlier = [
        ModelRequest(parts=[UserPromptPart("Weather in Paris?")]),
        call_weather("Paris"),
        ModelRequest(parts=[ToolReturnPart("weather", "sunny", "c-Paris")]),
        say("Sunny in Paris."),
    ]
    with store.create("chat") as session:  # as that release wrote a run: its records only
        session.open_turn()
        data = ModelMessagesTypeAdapter.dump_python(earlier, mode="json")
        session.append(pa.MESSAGES, {"messages": data, "from": 0})
        session.propose_step()
        session.decide({"kind": "enter", "messages": []})
    script = Script(say("Still sunny."))
    result = await agent_with(script.model, store).run("And now?", conversation_id="chat")
    assert script.seen[0][:4] == round_trip(earlier)
    events = log_of(store)
    assert fold_messages(events) == round_trip(result.all_messages())
    assert [m["role"] for m in store.messages("chat")] == ["user", "assistant"]


def cited_parts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request parts of the ``pydantic-ai/messages`` records."""
    return [
        part
        for e in events
        if e["type"] == pa.MESSAGES
        for m in e["data"]["messages"]
        if m["kind"] == "request"
        for part in m["parts"]
    ]


def two_tools(script: Script, store: inboxlog.Store) -> Agent[None, Any]:
    agent = agent_with(script.model, store)

    @agent.tool_plain
    def forecast(city: str) -> dict[str, Any]:
        """Tomorrow's weather in a city, as data."""
        return {"city": city, "highs": [21, 23]}

    return agent


def weather_and_forecast() -> Script:
    return Script(
        call_weather("Paris"),
        ModelResponse(parts=[ToolCallPart("forecast", {"city": "Paris"}, tool_call_id="c-f")]),
        say("Sunny, then warmer."),
    )


async def test_the_conversation_is_stored_once(store: inboxlog.Store) -> None:
    """A request's record holds no prompt and no tool return that a ``user/message`` or a
    ``tool/result`` holds: it cites the event by seq, with what the event does not hold
    (timestamps), and the ``tool/result`` carries the tool's name and its return as Pydantic
    AI made it; the history read back, also by a new worker, is the one Pydantic AI made."""
    agent = two_tools(weather_and_forecast(), store)
    result = await agent.run("Weather in Paris?", conversation_id="chat")
    events = log_of(store)
    by_seq = {e["seq"]: e for e in events}
    parts = cited_parts(events)
    assert [by_seq[p[pa.REF]]["type"] for p in parts] == [
        "user/message",
        "tool/result",
        "tool/result",
    ]
    assert all("content" not in p and "tool_call_id" not in p for p in parts)
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert [r[pa.REPLAY] for r in results] == [
        {"tool_name": "weather"},
        {"tool_name": "forecast", "json": True},  # its text is the return's JSON
    ]
    assert fold_messages(events) == round_trip(result.all_messages())

    later = Script(say("Still sunny."))
    resumed = await agent_with(later.model, store).run("And now?", conversation_id="chat")
    assert later.seen[0][:-1] == round_trip(result.all_messages())
    assert fold_messages(log_of(store)) == round_trip(resumed.all_messages())


async def test_a_log_of_the_release_that_recorded_requests_whole_resumes(
    store: inboxlog.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release before kept each request whole in its record, beside the
    ``user/message`` and ``tool/result`` events (which carried no ``pydantic-ai`` key):
    its logs resume, the history read as that release wrote it."""
    with monkeypatch.context() as m:  # the run as that release recorded it
        m.setattr(pa._Run, "_cite", lambda run, part: part)
        m.setattr(pa, "_returned_as", lambda part, said: {})
        first = await two_tools(weather_and_forecast(), store).run(
            "Weather in Paris?", conversation_id="chat"
        )
    events = log_of(store)
    assert not any(pa.REF in p for p in cited_parts(events))
    assert not any(pa.REPLAY in e["data"] for e in events if e["type"] == "tool/result")
    later = Script(say("Still sunny."))
    result = await agent_with(later.model, store).run("And now?", conversation_id="chat")
    assert later.seen[0][:-1] == round_trip(first.all_messages())
    events = log_of(store)
    assert fold_messages(events) == round_trip(result.all_messages())
    assert sum(pa.REF in p for p in cited_parts(events)) == 1  # the new prompt, cited


def test_a_record_citing_an_event_not_read_is_refused() -> None:
    data = ModelMessagesTypeAdapter.dump_python([ModelRequest(parts=[])], mode="json")
    data[0]["parts"] = [{pa.REF: 7, "timestamp": "2026-01-01T00:00:00Z"}]
    events = [{"type": pa.MESSAGES, "seq": 8, "time": 0, "data": {"messages": data}}]
    with pytest.raises(ValueError, match="cites event 7, not read"):
        fold_messages(events)


async def test_a_history_rewritten_by_a_processor_is_recorded_whole(store: inboxlog.Store) -> None:
    def keep_last(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-1:]

    script = Script(say("one"), say("two"))
    agent: Agent[None, str] = Agent(
        script.model, capabilities=[InboxlogCapability(store), ProcessHistory(keep_last)]
    )
    await agent.run("first", conversation_id="chat")
    result = await agent.run("second", conversation_id="chat")
    events = log_of(store)
    assert pa.HISTORY in types(events)
    assert fold_messages(events) == round_trip(result.all_messages())


async def test_a_new_worker_reads_the_history_from_its_last_rewrite_not_the_log_start(
    store: inboxlog.Store,
) -> None:
    """Every record carries ``from``, the seq of the last ``pydantic-ai/history``: a run
    on a new capability (a new worker) reads the log from there. What came before is
    made unreadable here, so a read of it would fail the run."""

    def keep_last(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages[-1:]

    with store.create("chat") as log:
        for i in range(50):  # what a compaction dropped, unreadable as a record
            log.append(pa.MESSAGES, {"dropped": i})
    script = Script(say("one"), say("two"))
    compacting: Agent[None, str] = Agent(
        script.model, capabilities=[InboxlogCapability(store), ProcessHistory(keep_last)]
    )
    with pytest.raises(KeyError):  # it reads the whole log: no record says where to start
        await compacting.run("first", conversation_id="chat")
    with store.open("chat") as log:  # a rewrite, as a compacting worker records it
        seq = (log.last_seq or 0) + 1
        log.append(pa.HISTORY, {"messages": [], "from": seq})
    await compacting.run("first", conversation_id="chat")
    records = [e for e in log_of(store) if e["type"] in (pa.MESSAGES, pa.HISTORY)][50:]
    rewrites = [e["seq"] for e in records if e["type"] == pa.HISTORY]
    assert rewrites and all(e["data"]["from"] <= e["seq"] for e in records)
    assert records[-1]["data"]["from"] == rewrites[-1]

    later = Script(say("three"))
    result = await agent_with(later.model, store).run("second", conversation_id="chat")
    assert [prompts_of(m) for m in later.seen[0] if isinstance(m, ModelRequest)] == [
        ["first"],
        ["second"],
    ]
    assert pa.history_start(store, "chat") == rewrites[-1]
    assert fold_messages(log_of(store)[rewrites[-1] :]) == round_trip(result.all_messages())


# -- packaging: optional, typed, documented, demonstrated ------------------------------------
