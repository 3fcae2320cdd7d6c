"""inboxlog.integrations.pydantic_ai with the real Pydantic AI and no network.

Every model here is Pydantic AI's own ``FunctionModel`` (or ``TestModel``): the agent runs
its real graph (tools, retries, output tools, the capability hooks) and never calls a
provider.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import inboxlog

if importlib.util.find_spec("pydantic_ai") is None:  # pragma: no cover - CI has the extra
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI must run these tests: install the pydantic-ai extra (make venv)")
    pytest.skip(
        'the pydantic-ai-slim package is not installed (pip install "./python[pydantic-ai]")',
        allow_module_level=True,
    )

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
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from inboxlog.integrations import _driver as driver
from inboxlog.integrations import pydantic_ai as pa
from inboxlog.integrations.pydantic_ai import (
    InboxlogCapability,
    StepRejectedError,
    fold_messages,
    message_parts,
)

ROOT = Path(__file__).parents[2]
# The async tests run on asyncio through anyio's pytest plugin (anyio comes with Pydantic AI).
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


def round_trip(messages: list[ModelMessage]) -> list[ModelMessage]:
    """What Pydantic AI's own message_history persistence gives back."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))


def log_of(store: inboxlog.Store, id: str = "chat") -> list[dict[str, Any]]:
    return store.inspect(id)[1]


# -- a run is a turn, a model request a step ---------------------------------------------


async def test_a_tool_call_then_an_answer_is_one_turn_of_two_steps(store: inboxlog.Store) -> None:
    script = Script(call_weather("Paris"), say("Sunny in Paris."))
    result = await agent_with(script.model, store).run("Weather in Paris?", conversation_id="chat")

    assert result.output == "Sunny in Paris."
    assert script.prompts(0) == ["Weather in Paris?"]
    events = log_of(store)
    assert types(events) == [
        "turn/start",
        "agent/inbox/spliced",  # the run's prompt, durable in next-turn first
        "agent/inbox/spliced",  # claimed by step 1
        "step/start",
        "user/message",
        pa.MESSAGES,  # the request, before the model sees it
        pa.MESSAGES,  # the response: the tool call
        "step/end",
        "step/start",  # the second request: a continuation step
        pa.MESSAGES,  # the tool result
        pa.MESSAGES,  # the answer
        "step/end",
        "turn/end",
    ]
    prompt = events[1]["data"]["inserted"][0]
    assert (
        events[4]["data"]
        == prompt
        == {
            "id": prompt["id"],
            "role": "user",
            "content": "Weather in Paris?",
        }
    )
    assert turn_ends(events) == [{"kind": "completed"}]
    work = inboxlog.fold_consumed_work(events)
    assert work["end"] is not None and work["end"]["seq"] == events[-1]["seq"]
    # The log's history is Pydantic AI's own, as its message_history round trip gives it.
    assert fold_messages(events) == round_trip(result.all_messages())
    first = result.all_messages()[0]
    assert isinstance(first, ModelRequest) and first.instructions == "Be brief."
    assert first.metadata == {"inboxlog": {"messages": [prompt["id"]]}}


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


def slow_agent(script: Script, target: Any, started: asyncio.Event, release: asyncio.Event) -> Any:
    agent: Agent[None, str] = Agent(script.model, capabilities=[InboxlogCapability(target)])

    @agent.tool_plain
    async def weather(city: str) -> str:
        """The weather in a city, slowly."""
        started.set()
        await release.wait()
        return f"sunny, 22 C in {city}"

    return agent


async def test_steering_during_the_tool_call_is_in_the_second_request_and_in_no_other(
    store: inboxlog.Store,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    script = Script(call_weather("Paris"), say("72 F."), say("Done."))
    session = store.create("chat")
    agent = slow_agent(script, session, started, release)

    async def steer() -> None:
        await started.wait()
        session.inbox.append("next-step", {"id": "s1", "content": "Answer in Fahrenheit."})
        release.set()

    steering = asyncio.create_task(steer())
    result = await agent.run("Weather in Paris?")
    await steering
    later = await agent.run("Thanks.")

    assert result.output == "72 F."
    assert script.prompts(0) == ["Weather in Paris?"]
    assert script.prompts(1) == ["Answer in Fahrenheit."]  # with the tool result
    assert [p.part_kind for p in script.seen[1][-1].parts] == ["tool-return", "user-prompt"]
    # Exactly once: one part in the whole history the model saw last, in one request.
    carrying = [m for m in script.seen[2] if "Answer in Fahrenheit." in prompts_of(m)]
    assert len(carrying) == 1 and prompts_of(carrying[0]).count("Answer in Fahrenheit.") == 1
    assert carrying[0].metadata == {"inboxlog": {"messages": ["s1"]}}
    events = session.events()
    assert entered(events)[1:2] == [(1, 2, "s1")]
    assert fold_messages(events) == round_trip(later.all_messages())
    assert later.all_messages()[:4] == result.all_messages()
    session.close()


async def test_steering_posted_from_another_process_reaches_the_next_request(
    tmp_path: Path,
) -> None:
    root = tmp_path / "fleet"
    store = inboxlog.Store(root)
    started, release = asyncio.Event(), asyncio.Event()
    script = Script(call_weather("Paris"), say("72 F."))
    agent = slow_agent(script, store, started, release)

    async def steer() -> None:
        await started.wait()
        # Another process (a web server) posts to the session while the run is on.
        poster = (
            "import inboxlog, sys; inboxlog.Store(sys.argv[1]).post("
            "'chat', 'next-step', {'id': 'p1', 'content': 'Answer in Fahrenheit.'})"
        )
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", poster, str(root), cwd=tmp_path
            )
            assert await proc.wait() == 0
        finally:
            release.set()

    steering = asyncio.create_task(steer())
    await agent.run("Weather in Paris?", conversation_id="chat")
    await steering
    assert script.prompts(1) == ["Answer in Fahrenheit."]
    events = log_of(store)
    posted = [e for e in events if e["type"] == "agent/inbox/spliced" and e["data"].get("post")]
    assert [e["data"]["inserted"][0]["id"] for e in posted] == ["p1"]
    assert entered(events)[1:] == [(1, 2, "p1")]


async def test_steering_during_the_last_response_makes_one_more_request(
    store: inboxlog.Store,
) -> None:
    session = store.create("chat")

    async def answer_while_steering_arrives() -> ModelResponse:
        session.inbox.append("next-step", {"id": "late", "content": "And tomorrow?"})
        return say("Sunny today.")

    script = Script(answer_while_steering_arrives, say("Rain tomorrow."))
    result = await agent_with(script.model, session).run("Weather?")

    assert result.output == "Rain tomorrow."
    assert script.prompts(1) == ["And tomorrow?"]
    assert isinstance(script.seen[1][-2], ModelResponse)
    events = session.events()
    assert entered(events)[1:] == [(1, 2, "late")]
    assert turn_ends(events) == [{"kind": "completed"}]
    assert fold_messages(events) == round_trip(result.all_messages())
    assert not session.inbox.has_pending
    session.close()


async def test_next_turn_input_waits_for_the_next_run_and_comes_before_its_prompt(
    store: inboxlog.Store,
) -> None:
    session = store.create("chat")

    async def answer_while_a_prompt_arrives() -> ModelResponse:
        session.inbox.append("next-turn", {"id": "later", "content": "And Rome?"})
        return say("Sunny in Paris.")

    script = Script(answer_while_a_prompt_arrives, say("Both sunny."), say("Hi."))
    agent = agent_with(script.model, session)
    await agent.run("Weather in Paris?")
    assert len(script.seen) == 1
    assert [m["id"] for m in session.inbox.next_turn] == ["later"]

    # The next run's prompt joins next-turn after what waited; its first request has both.
    await agent.run("And Berlin?")
    assert script.prompts(1) == ["And Rome?", "And Berlin?"]
    assert [i for _, _, i in entered(session.events())][1:2] == ["later"]
    assert [(t, s) for t, s, _ in entered(session.events())[1:]] == [(2, 1), (2, 1)]
    assert not session.inbox.has_pending
    claims = [e["data"] for e in session.events() if e["type"] == "agent/inbox/spliced"]
    assert claims[-1] == {"target": "next-turn", "start": 0, "removedCount": 2, "inserted": []}
    assert not any(c.get("outcome") for c in claims)

    # A run with no prompt takes what is pending.
    session.inbox.append("next-turn", {"id": "queued", "content": "Say hi."})
    result = await agent.run()
    assert result.output == "Hi."
    assert script.prompts(2) == ["Say hi."]
    assert entered(session.events())[-1] == (3, 1, "queued")
    assert fold_messages(session.events()) == round_trip(result.all_messages())
    session.close()


async def test_a_plugin_that_rejects_the_first_step_blocks_the_turn_before_the_model(
    store: inboxlog.Store,
) -> None:
    def guard(proposal: Any, next: Any) -> Any:
        if any("rm -rf" in str(m.get("content")) for m in proposal["messages"]):
            return {"kind": "reject"}
        return next()

    script = Script(say("never"))
    agent: Agent[None, str] = Agent(
        script.model, capabilities=[InboxlogCapability(store, plugins=[guard])]
    )
    with pytest.raises(StepRejectedError) as raised:
        await agent.run("rm -rf / please", conversation_id="chat")
    assert raised.value.turn == 1 and raised.value.reason == {"kind": "blocked"}
    assert script.seen == []
    events = log_of(store)
    assert turn_ends(events) == [{"kind": "blocked"}]
    assert inboxlog.fold_consumed_work(events)["end"] is not None
    assert fold_messages(events) == []  # the rejected prompt is in no history


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


async def test_an_exception_ends_the_turn_error_and_propagates(store: inboxlog.Store) -> None:
    script = Script(call_weather("Paris"), RuntimeError("model exploded"))
    with pytest.raises(RuntimeError, match="model exploded"):
        await agent_with(script.model, store).run("Weather?", conversation_id="chat")
    events = log_of(store)
    assert turn_ends(events) == [
        {"kind": "error", "error": {"message": "model exploded", "code": "RuntimeError"}}
    ]
    assert types(events)[-2:] == ["step/end", "turn/end"]
    # What was committed before the failure is the history the next run sees.
    history = fold_messages(events)
    assert [type(m).__name__ for m in history] == ["ModelRequest", "ModelResponse", "ModelRequest"]


async def test_a_length_stop_ends_the_turn_max_tokens(store: inboxlog.Store) -> None:
    script = Script(call_weather("Paris"), say("Sunny in Par", finish_reason="length"))
    result = await agent_with(script.model, store).run("Weather?", conversation_id="chat")
    assert result.output == "Sunny in Par"
    assert turn_ends(log_of(store)) == [{"kind": "max-tokens"}]


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


async def test_cancellation_ends_the_turn_aborted(store: inboxlog.Store) -> None:
    calling = asyncio.Event()

    async def block() -> ModelResponse:
        calling.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    session = store.create("chat")
    session.inbox.append("next-turn", {"id": "queued", "content": "later"})
    script = Script(block)
    agent: Agent[None, str] = Agent(
        script.model, capabilities=[InboxlogCapability(session, keep_inbox_on_cancel=True)]
    )
    task = asyncio.create_task(agent.run("Weather?"))
    await calling.wait()
    session.inbox.append("next-turn", {"id": "kept", "content": "meanwhile"})
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    events = session.events()
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    # "queued" and the prompt were claimed by step 1; what came after was kept.
    assert [i for _, _, i in entered(events)][:1] == ["queued"]
    assert [m["id"] for m in session.inbox.next_turn] == ["kept"]
    # Without keep_inbox_on_cancel a cancelled run clears the inbox.
    session.inbox.append("next-step", {"id": "x", "content": "steer"})
    calling.clear()
    script.replies.append(block)
    task = asyncio.create_task(
        Agent(script.model, capabilities=[InboxlogCapability(session)]).run("Again?")
    )
    await calling.wait()
    session.inbox.append("next-turn", {"id": "dropped", "content": "never"})
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert turn_ends(session.events())[-1] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert not session.inbox.has_pending
    session.close()


# -- Pydantic AI's own behaviour passes through ------------------------------------------


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
    assert sum(e["type"] == pa.MESSAGES for e in events) == 2  # the request, the response


# -- the work a model request costs, and runs at once ----------------------------------------


async def test_each_run_makes_the_same_few_worker_thread_calls(
    store: inboxlog.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run of two model requests makes eight log calls off the event loop, however
    long the conversation: the turn's start; per request its step, its record and its
    response's (started while the tools run, waited for by the next hook); the model's
    stop (the last step's end with the turn's close); the session's release."""
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
    assert per_run == [["begin", *step, *step, "stop", "end"]] * 3
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

WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    import inboxlog
    from test_pydantic_ai import Script, agent_with, call_weather

    async def block_forever():
        Path(sys.argv[2]).write_text("calling")
        await asyncio.Event().wait()

    script = Script(call_weather("Paris"), block_forever)
    store = inboxlog.Store(sys.argv[1], durability="sync")
    asyncio.run(agent_with(script.model, store).run("Weather in Paris?", conversation_id="job"))
    """
)


def kill_worker_during_its_second_model_request(root: Path, cwd: Path) -> None:
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
            assert time.monotonic() < deadline, "the worker never reached its second request"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL


async def test_a_sigkilled_worker_is_resumed_elsewhere_with_its_history_intact(
    tmp_path: Path,
) -> None:
    root = tmp_path / "logs"
    kill_worker_during_its_second_model_request(root, tmp_path)

    store = inboxlog.Store(root)
    _, stored = store.inspect("job")
    # The tool result went out with the second request, before the kill.
    assert types(stored)[-2:] == ["step/start", pa.MESSAGES]
    committed = fold_messages(stored)
    assert [m.parts[0].part_kind for m in committed] == ["user-prompt", "tool-call", "tool-return"]

    script = Script(say("Sunny in Paris."))
    result = await agent_with(script.model, store).run(conversation_id="job")
    assert result.output == "Sunny in Paris."
    # Exactly what was committed, as Pydantic AI resumes a message_history ending in a request.
    assert script.seen[0][:2] == committed[:2]
    plain = Script(say("Sunny in Paris."))
    await Agent(plain.model, instructions="Be brief.").run(message_history=committed)
    assert normalized(script.seen[0]) == normalized(plain.seen[0]) == normalized(committed)
    events = log_of(store, "job")
    assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
    assert entered(events)[-1] == (2, 1, "continue-turn-2")
    assert fold_messages(events) == round_trip(result.all_messages())


# -- the session, the constructor, the refusals ---------------------------------------------


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


# -- packaging: optional, typed, documented, demonstrated ------------------------------------


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_import_inboxlog_does_not_import_pydantic_ai(tmp_path: Path) -> None:
    done = run_python(
        "import sys, inboxlog, inboxlog.integrations; "
        "assert 'pydantic_ai' not in sys.modules, 'pydantic_ai imported'",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr


def test_without_pydantic_ai_the_import_says_how_to_install_it(tmp_path: Path) -> None:
    done = run_python(
        "import sys; sys.modules['pydantic_ai'] = None\nimport inboxlog.integrations.pydantic_ai\n",
        tmp_path,
    )
    assert done.returncode != 0
    assert (
        "ImportError: inboxlog.integrations.pydantic_ai needs the pydantic-ai-slim package: "
        'pip install "inboxlog[pydantic-ai]"'
    ) in done.stderr


def test_the_example_runs(tmp_path: Path) -> None:
    script = ROOT / "examples" / "pydantic_ai_steering.py"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "sessions")],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in [
        "request 1 sees: user 'What is the weather in Paris?'",
        "steering posted from another process while the tool runs: p1 -> next-step",
        "request 2 sees: tool-return weather, user 'Answer in Fahrenheit.'",
        "answer: It is 72 F and sunny in Paris.",
        "turn 1: step 1 took input-",
        "turn 1: step 2 took p1",
        "turn 1 ended: completed",
        "worker killed during its model request (exit -9)",
        "reopened: turn 2 ended interrupted",
        "resumed: request sees 7 committed messages",
        "turn 3 ended: completed",
    ]:
        assert line in done.stdout, done.stdout


def readme_section() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## With Pydantic AI", 1)[1].split("\n## ", 1)[0]
    # `py`, not `python`: tests/readme_examples.py runs the README's one `python` block.
    (block,) = re.findall(r"```py\n(.*?)```", section, re.DOTALL)
    return block


@pytest.mark.usefixtures("sync_loop")
def test_the_readme_section_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy-paste start, run with the named model swapped for a scripted one."""
    import pydantic_ai.models

    script = Script(say("Sunny in Paris."))
    monkeypatch.setattr(pydantic_ai.models, "infer_model", lambda *a, **kw: script.model)
    monkeypatch.chdir(tmp_path)
    code = compile(readme_section(), "README.md (pydantic-ai section)", "exec")
    exec(code, {"__name__": "__main__"})
    assert script.prompts(0) == ["What's the weather in Paris?"]
    events = inboxlog.Store(tmp_path / "sessions").inspect("chat-1")[1]
    assert turn_ends(events) == [{"kind": "completed"}]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_the_example_type_checks_against_pydantic_ais_types(tmp_path: Path) -> None:
    """``--strict`` against Pydantic AI's own types (test_tooling checks the package, this
    integration included, the same way)."""
    example = ROOT / "examples" / "pydantic_ai_steering.py"
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
