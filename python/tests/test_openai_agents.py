"""inboxlog.integrations.openai_agents with the real OpenAI Agents SDK and no network.

Every model here is a scripted ``agents.Model``: the SDK runs its real loop (tools,
session persistence, the per-call input filter) and never calls OpenAI.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import inboxlog

if importlib.util.find_spec("agents") is None:  # pragma: no cover - CI has the extra
    if os.environ.get("CI") == "true":
        raise RuntimeError("CI must run these tests: install the openai-agents extra (make venv)")
    pytest.skip(
        'the openai-agents package is not installed (pip install "./python[openai-agents]")',
        allow_module_level=True,
    )

from agents import Agent, ModelBehaviorError, SQLiteSession, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.memory.session_settings import SessionSettings
from agents.models._response_terminal import response_terminal_failure_error
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openai.types.responses.response import IncompleteDetails

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
ROOT = Path(__file__).parents[2]
# The async tests run on asyncio through anyio's pytest plugin (anyio comes with the SDK).
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- a scripted model ------------------------------------------------------------------

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


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def turn_ends(log: inboxlog.Session) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in log.events() if e["type"] == "turn/end"]


def entered(log: inboxlog.Session) -> list[tuple[int, int, str]]:
    """(turn, step, message id) of every user/message, with the step it entered."""
    out, where = [], (0, 0)
    for e in log.events():
        if e["type"] == "step/start":
            where = (e["data"]["turn"], e["data"]["step"])
        elif e["type"] == "user/message":
            out.append((*where, e["data"]["id"]))
    return out


@pytest.fixture
def chat(store: inboxlog.Store) -> Iterator[InboxlogSession]:
    with InboxlogSession(store, "chat") as session:
        yield session


# -- a run is a turn, a model call a step ---------------------------------------------


async def test_a_tool_call_then_an_answer_is_one_turn_of_two_steps(chat: InboxlogSession) -> None:
    model = ScriptedModel(call_weather("Paris"), say("Sunny in Paris."))
    result = await run(agent_with(model), "Weather in Paris?", session=chat)

    assert result.final_output == "Sunny in Paris."
    assert model.inputs[0] == [user("Weather in Paris?")]
    assert model.inputs[1][0] == user("Weather in Paris?")
    assert [i["type"] for i in model.inputs[1][1:]] == ["function_call", "function_call_output"]
    log = chat.session
    events = log.events()
    assert types(events) == [
        "turn/start",
        "agent/inbox/spliced",  # the run's input, durable in next-turn first
        "agent/inbox/spliced",  # claimed by step 1
        "step/start",
        "user/message",
        "openai-agents/items",  # the input, as SDK history
        "openai-agents/items",  # the tool call and its output
        "step/end",
        "step/start",  # the second model call: a continuation step
        "openai-agents/items",  # the answer
        "step/end",
        "turn/end",
    ]
    assert events[4]["data"] == {
        "id": events[1]["data"]["inserted"][0]["id"],
        "role": "user",
        "content": "Weather in Paris?",
    }
    assert turn_ends(log) == [{"kind": "completed"}]
    work = inboxlog.fold_consumed_work(events)
    assert work["end"] is not None and work["end"]["seq"] == events[-1]["seq"]
    history = await chat.get_items()
    assert [i.get("type", "message") for i in history] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert history == fold_items(events)
    assert not log.inbox.has_pending


async def test_steering_between_the_tool_call_and_the_answer_reaches_the_second_call(
    chat: InboxlogSession,
) -> None:
    tool_started, release = asyncio.Event(), asyncio.Event()

    @function_tool
    async def slow_weather(city: str) -> str:
        """The weather in a city, slowly."""
        tool_started.set()
        await release.wait()
        return f"sunny, 22 C in {city}"

    async def steer() -> None:
        await tool_started.wait()
        chat.session.inbox.append("next-step", {"id": "s1", "content": "Answer in Fahrenheit."})
        release.set()

    model = ScriptedModel(call_weather("Paris", tool="slow_weather"), say("72 F in Paris."))
    agent = Agent(name="assistant", model=model, tools=[slow_weather])
    steering = asyncio.create_task(steer())
    result = await run(agent, "Weather in Paris?", session=chat)
    await steering

    assert result.final_output == "72 F in Paris."
    assert user("Answer in Fahrenheit.") not in model.inputs[0]
    second = model.inputs[1]
    assert [i.get("type", "message") for i in second] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert second[-1] == user("Answer in Fahrenheit.")
    # The log says which step consumed it, and the history keeps it in place.
    assert entered(chat.session)[1:] == [(1, 2, "s1")]
    history = await chat.get_items()
    assert history[:4] == second
    assert turn_ends(chat.session) == [{"kind": "completed"}]


async def test_steering_posted_from_another_process_reaches_the_next_model_call(
    tmp_path: Path,
) -> None:
    root = tmp_path / "fleet"
    store = inboxlog.Store(str(root))
    tool_started, release = asyncio.Event(), asyncio.Event()

    @function_tool
    async def slow_weather(city: str) -> str:
        """The weather in a city, slowly."""
        tool_started.set()
        await release.wait()
        return f"sunny, 22 C in {city}"

    async def steer() -> None:
        await tool_started.wait()
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

    with InboxlogSession(store, "chat") as chat:
        model = ScriptedModel(call_weather("Paris", tool="slow_weather"), say("72 F in Paris."))
        agent = Agent(name="assistant", model=model, tools=[slow_weather])
        steering = asyncio.create_task(steer())
        await run(agent, "Weather in Paris?", session=chat)
        await steering
        assert model.inputs[1][-1] == user("Answer in Fahrenheit.")
        # Taken in as one posted splice, then claimed and entered by step 2.
        posted = [
            e
            for e in chat.session.events()
            if e["type"] == "agent/inbox/spliced" and e["data"].get("post")
        ]
        assert [e["data"]["inserted"][0]["id"] for e in posted] == ["p1"]
        assert entered(chat.session)[1:] == [(1, 2, "p1")]


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


async def test_steering_after_the_last_model_call_continues_the_same_turn(
    chat: InboxlogSession,
) -> None:
    async def answer_while_steering_arrives() -> list[Any]:
        chat.session.inbox.append("next-step", {"id": "late", "content": "And tomorrow?"})
        return say("Sunny today.")

    model = ScriptedModel(answer_while_steering_arrives, say("Rain tomorrow."))
    result = await run(agent_with(model), "Weather?", session=chat)

    assert result.final_output == "Rain tomorrow."
    assert model.inputs[1][-2:] == [
        {
            "id": "msg_1",
            "content": [{"annotations": [], "text": "Sunny today.", "type": "output_text"}],
            "role": "assistant",
            "status": "completed",
            "type": "message",
        },
        user("And tomorrow?"),
    ]
    assert entered(chat.session)[1:] == [(1, 2, "late")]
    assert turn_ends(chat.session) == [{"kind": "completed"}]
    assert [e["data"]["turn"] for e in chat.session.events() if e["type"] == "turn/start"] == [1]


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
    (reason,) = turn_ends(chat.session)
    assert reason["kind"] == "error" and reason["error"]["code"] == "InvalidInputError"


async def test_input_for_next_turn_waits_for_the_next_run(chat: InboxlogSession) -> None:
    async def answer_while_a_prompt_arrives() -> list[Any]:
        chat.session.inbox.append("next-turn", {"id": "later", "content": "And Rome?"})
        return say("Sunny in Paris.")

    model = ScriptedModel(answer_while_a_prompt_arrives, say("Sunny in Rome."))
    agent = agent_with(model)
    await run(agent, "Weather in Paris?", session=chat)
    assert len(model.inputs) == 1
    assert [m["id"] for m in chat.session.inbox.next_turn] == ["later"]

    result = await run(agent, session=chat)  # no input: the inbox's next-turn drives it
    assert result.final_output == "Sunny in Rome."
    assert model.inputs[1][-1] == user("And Rome?")
    assert entered(chat.session)[1:] == [(2, 1, "later")]
    assert turn_ends(chat.session) == [{"kind": "completed"}] * 2


def post_from_another_process(root: Path, target: str, message: dict[str, Any]) -> None:
    """Posts `message` to the JSONL session "chat" under `root` from a child process."""
    poster = (
        "import inboxlog, json, sys; "
        "inboxlog.Store(sys.argv[1]).post('chat', sys.argv[2], json.loads(sys.argv[3]))"
    )
    args = [sys.executable, "-c", poster, str(root), target, json.dumps(message)]
    # Not from python/, whose source package (without its native module) would shadow
    # the installed one for `python -c`.
    subprocess.run(args, check=True, cwd=root.parent)


@pytest.mark.parametrize("when", ["during the first run", "between the runs"])
@pytest.mark.parametrize("how", ["in process", "posted from another process"])
async def test_pending_next_turn_input_comes_first_in_a_run_with_input_of_its_own(
    tmp_path: Path, how: str, when: str
) -> None:
    root = tmp_path / "logs"
    store = inboxlog.Store(root, durability="none")
    pending = {"id": "later", "content": "And Rome?"}
    with InboxlogSession(store, "chat") as chat:

        def arrive() -> None:
            if how == "in process":
                chat.session.inbox.append("next-turn", pending)
            else:
                post_from_another_process(root, "next-turn", pending)

        async def answer_while_input_arrives() -> list[Any]:
            if when == "during the first run":
                arrive()
            return say("Sunny in Paris.")

        model = ScriptedModel(answer_while_input_arrives, say("Sunny in Rome."))
        agent = agent_with(model)
        await run(agent, "Weather in Paris?", session=chat)
        assert len(model.inputs) == 1  # held back from the run it arrived in
        if when == "between the runs":
            arrive()

        await run(agent, "Follow-up question", session=chat)
        assert model.inputs[1][-2:] == [user("And Rome?"), user("Follow-up question")]
        # Both entered turn 2's first step, pending input first; nothing left behind.
        assert [(t, k, id.startswith("input-")) for t, k, id in entered(chat.session)] == [
            (1, 1, True),
            (2, 1, False),
            (2, 1, True),
        ]
        assert entered(chat.session)[1][2] == "later"
        assert not chat.session.inbox.has_pending
        claims = [
            e["data"]
            for e in chat.session.events()
            if e["type"] == "agent/inbox/spliced" and e["data"].get("removedCount")
        ]
        assert claims[-1] == {
            "target": "next-turn",
            "start": 0,
            "removedCount": 2,
            "inserted": [],
        }
        assert turn_ends(chat.session) == [{"kind": "completed"}] * 2


async def test_a_run_with_input_takes_every_pending_next_turn_message(
    chat: InboxlogSession,
) -> None:
    for n in (1, 2):
        chat.session.inbox.append("next-turn", {"id": f"p{n}", "content": f"pending {n}"})
    model = ScriptedModel(say("Done."))
    await run(agent_with(model), "mine", session=chat)
    assert model.inputs == [[user("pending 1"), user("pending 2"), user("mine")]]
    assert not chat.session.inbox.has_pending


# -- pre-step plugins -----------------------------------------------------------------


def guard(proposal: Any, next: Any) -> Any:
    if any("rm -rf" in str(m.get("content")) for m in proposal["messages"]):
        return {"kind": "reject"}
    return next()


async def test_a_plugin_that_rejects_the_first_step_blocks_the_turn_before_the_model(
    chat: InboxlogSession,
) -> None:
    model = ScriptedModel(say("never"))
    with pytest.raises(StepRejectedError) as raised:
        await run(agent_with(model), "rm -rf / please", session=chat, plugins=[guard])
    assert raised.value.turn == 1 and raised.value.reason == {"kind": "blocked"}
    assert model.inputs == []
    assert turn_ends(chat.session) == [{"kind": "blocked"}]
    assert await chat.get_items() == []
    # A blocked turn that claimed input accounts for it.
    assert inboxlog.fold_consumed_work(chat.session.events())["end"] is not None


async def test_a_plugin_that_rejects_steering_stops_the_run_at_that_step(
    chat: InboxlogSession,
) -> None:
    async def answer_while_bad_steering_arrives() -> list[Any]:
        chat.session.inbox.append("next-step", {"id": "bad", "content": "now rm -rf /"})
        return call_weather("Paris")

    model = ScriptedModel(answer_while_bad_steering_arrives, say("never"))

    async def async_guard(proposal: Any, next: Any) -> Any:
        if any("rm -rf" in str(m.get("content")) for m in proposal["messages"]):
            return {"kind": "reject"}
        return await next()

    with pytest.raises(StepRejectedError):
        await run(agent_with(model), "Weather?", session=chat, plugins=[async_guard])
    assert len(model.inputs) == 1
    assert turn_ends(chat.session) == [{"kind": "blocked"}]


async def test_a_plugin_may_rewrite_the_input_the_model_sees(chat: InboxlogSession) -> None:
    async def add_context(proposal: Any, next: Any) -> Any:
        decision = await next()
        if proposal["step"] == 1:
            context = {"id": "ctx", "role": "system", "content": "The user is in Paris."}
            return {"kind": "enter", "messages": [context, *decision["messages"]]}
        return decision

    model = ScriptedModel(say("Sunny."))
    await run(agent_with(model), "Weather here?", session=chat, plugins=[add_context])
    assert model.inputs[0] == [
        {"role": "system", "content": "The user is in Paris."},
        user("Weather here?"),
    ]
    assert entered(chat.session)[0] == (1, 1, "ctx")


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
    assert turn_ends(chat.session) == [
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


# -- how a turn ends ----------------------------------------------------------------


async def test_an_exception_ends_the_turn_with_error(chat: InboxlogSession) -> None:
    model = ScriptedModel(call_weather("Paris"), RuntimeError("the model went away"))
    with pytest.raises(RuntimeError, match="went away"):
        await run(agent_with(model), "Weather?", session=chat)
    events = chat.session.events()
    assert types(events)[-2:] == ["step/end", "turn/end"]
    assert turn_ends(chat.session) == [
        {"kind": "error", "error": {"message": "the model went away", "code": "RuntimeError"}}
    ]
    # What the SDK stored before the failure stays.
    assert [i.get("type", "message") for i in await chat.get_items()] == [
        "message",
        "function_call",
        "function_call_output",
    ]


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
    assert turn_ends(chat.session) == [{"kind": "max-tokens"}]


async def test_another_model_behaviour_error_ends_the_turn_with_error(
    chat: InboxlogSession,
) -> None:
    model = ScriptedModel(ModelBehaviorError("tool not found"))
    with pytest.raises(ModelBehaviorError):
        await run(agent_with(model), "Weather?", session=chat)
    assert turn_ends(chat.session)[0]["kind"] == "error"


async def test_steering_after_a_length_stop_runs_on_and_the_turn_stays_max_tokens(
    chat: InboxlogSession,
) -> None:
    async def cut_off_while_steering_arrives() -> list[Any]:
        chat.session.inbox.append("next-step", {"id": "s", "content": "Shorter, please."})
        raise length_stop_from_responses()

    model = ScriptedModel(cut_off_while_steering_arrives, say("Sunny."))
    result = await run(agent_with(model), "Weather?", session=chat)
    assert result.final_output == "Sunny."
    assert model.inputs[1][-1] == user("Shorter, please.")
    assert turn_ends(chat.session) == [{"kind": "max-tokens"}]


@pytest.mark.parametrize("keep", [False, True])
async def test_cancelling_the_run_ends_the_turn_aborted(chat: InboxlogSession, keep: bool) -> None:
    calling = asyncio.Event()

    async def hang() -> list[Any]:
        # Arrives during the run, so it waits for the next one (or is cleared).
        chat.session.inbox.append("next-turn", {"id": "queued", "content": "later"})
        calling.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    model = ScriptedModel(hang)
    task = asyncio.create_task(
        run(agent_with(model), "Weather?", session=chat, keep_inbox_on_cancel=keep)
    )
    await calling.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert turn_ends(chat.session) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    assert types(chat.session.events())[-2:] == ["step/end", "turn/end"]
    assert [m["id"] for m in chat.session.inbox.next_turn] == (["queued"] if keep else [])


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

WORKER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path

    sys.path.insert(0, sys.argv[3])
    import inboxlog
    from agents import set_tracing_disabled
    from inboxlog.integrations.openai_agents import InboxlogSession, run
    from test_openai_agents import ScriptedModel, agent_with, call_weather

    set_tracing_disabled(True)

    async def block_forever():
        Path(sys.argv[2]).write_text("calling")
        await asyncio.Event().wait()

    async def main():
        session = InboxlogSession(inboxlog.Store(sys.argv[1], durability="sync"), "job")
        model = ScriptedModel(call_weather("Paris"), block_forever)
        await run(agent_with(model), "Weather in Paris?", session=session)

    asyncio.run(main())
    """
)


def kill_worker_during_its_second_model_call(root: Path, cwd: Path) -> None:
    """Runs WORKER in a child process and kills it with SIGKILL while its model call blocks."""
    ready = cwd / "ready"
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    with subprocess.Popen(
        [sys.executable, "-c", WORKER, str(root), str(ready), str(Path(__file__).parent)],
        env=env,
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


async def test_a_run_killed_mid_call_resumes_with_its_history_intact(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    kill_worker_during_its_second_model_call(root, tmp_path)

    store = inboxlog.Store(root)
    _, stored = store.inspect("job")
    assert types(stored)[-3:] == ["openai-agents/items", "step/end", "step/start"]
    with InboxlogSession(store, "job") as session:
        assert session.session.open_report["repairedTurn"] == 1
        assert types(session.session.events())[-2:] == ["step/end", "turn/end"]
        assert turn_ends(session.session) == [{"kind": "interrupted"}]
        history = await session.get_items()
        assert history[0] == user("Weather in Paris?")
        assert [i.get("type") for i in history[1:]] == ["function_call", "function_call_output"]
        assert history[2]["output"] == "sunny, 22 C in Paris"

        model = ScriptedModel(say("Sunny in Paris."))
        result = await run(agent_with(model), session=session)  # continue from the history
        assert result.final_output == "Sunny in Paris."
        assert model.inputs == [history]
        assert turn_ends(session.session)[1] == {"kind": "completed"}
        assert entered(session.session)[-1] == (2, 1, "continue-turn-2")
        work = inboxlog.fold_consumed_work(session.session.events())
        assert work["end"] is not None and work["end"]["data"]["turn"] == 2
        assert len(await session.get_items()) == 4


# -- the SDK's session contract -------------------------------------------------------


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


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_import_inboxlog_does_not_import_the_sdk(tmp_path: Path) -> None:
    done = run_python(
        "import sys, inboxlog, inboxlog.integrations; "
        "assert 'agents' not in sys.modules, 'agents imported'",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr


def test_without_the_sdk_the_import_says_how_to_install_it(tmp_path: Path) -> None:
    done = run_python(
        "import sys; sys.modules['agents'] = None\nimport inboxlog.integrations.openai_agents\n",
        tmp_path,
    )
    assert done.returncode != 0
    assert (
        "ImportError: inboxlog.integrations.openai_agents needs the openai-agents package: "
        'pip install "inboxlog[openai-agents]"'
    ) in done.stderr


def test_the_example_runs(tmp_path: Path) -> None:
    script = ROOT / "examples" / "openai_agents_steering.py"
    env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "sessions")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in [
        "model call 1 sees: user 'What is the weather in Paris?'",
        "steering arrives while the tool runs: s1 'Answer in Fahrenheit.' -> next-step",
        (
            "model call 2 sees: user 'What is the weather in Paris?', function_call weather, "
            "function_call_output, user 'Answer in Fahrenheit.'"
        ),
        "answer: It is 72 F and sunny in Paris.",
        "turn 1: step 1 took input-",
        "turn 1: step 2 took s1",
        "turn 1 ended: completed",
        "guard rejected turn 2's input: turn ended blocked",
        "history: 5 items",
    ]:
        assert line in done.stdout, done.stdout


def readme_section() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## With the OpenAI Agents SDK", 1)[1].split("\n## ", 1)[0]
    # `py`, not `python`: tests/readme_examples.py runs the README's one `python` block.
    (block,) = re.findall(r"```py\n(.*?)```", section, re.DOTALL)
    return block


def test_the_readme_section_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy-paste start, run with the default model swapped for a scripted one."""
    from agents.models.multi_provider import MultiProvider

    model = ScriptedModel(call_weather("Paris"), say("Sunny in Paris."))
    monkeypatch.setattr(MultiProvider, "get_model", lambda self, name: model)
    monkeypatch.chdir(tmp_path)
    code = compile(readme_section(), "README.md (openai-agents section)", "exec")
    exec(code, {"__name__": "__main__"})
    assert model.inputs[0] == [user("What's the weather in Paris?")]
    _, events = inboxlog.Store(tmp_path / "sessions").inspect("chat-1")
    assert turn_ends_of(events) == [{"kind": "completed"}]


def turn_ends_of(events: list[Any]) -> list[Any]:
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is not installed")
def test_the_steering_example_type_checks_against_the_sdks_types(tmp_path: Path) -> None:
    """``--strict`` against the SDK's own types (test_tooling checks the package, this
    integration included, the same way)."""
    example = ROOT / "examples" / "openai_agents_steering.py"
    env = {**os.environ, "MYPY_CACHE_DIR": str(tmp_path / "mypy-cache")}
    for target in ([str(example)],):
        args = ["--strict", "--python-version", "3.11", *target]
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
