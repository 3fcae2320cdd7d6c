"""SPEC §17.4 for the OpenAI Agents SDK: a function tool with ``needs_approval=True``
stops the SDK's run with ``interruptions``; the integration asks each approval, parks the
turn with the SDK's ``RunState`` and returns; the approval is decided from anywhere; the
next ``run`` on the session resumes that run (``RunState.from_json``, ``approve`` or
``reject``), on any worker, exactly once, the tool run only when allowed.

The real SDK and a scripted model (``adapters.openai_model``), no network; each run opens
the session from a store handle of its own, and the killed workers are child processes
(``approvals_openai_agents_worker.py``) that send themselves SIGKILL at one point.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from adapters import Script, say, tool, weather_report
from approvals_openai_agents_worker import Q, agent, go, ran
from conftest import Place, turn_ends
from openai.types.responses import ResponseFunctionToolCall

import inboxlog
from inboxlog.integrations import openai_agents

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
AID = "approval-1-1-call_1"
"""The approval the first run asks: turn 1, step 1, the scripted model's call ``call_1``."""
PARIS = weather_report("Paris")
TOLD = {
    "rejected": "A person rejected this tool call",
    "cancelled": "This tool call was cancelled while it waited for approval",
    "unavailable": "No one could be asked",
}
"""What the log tells the model of a call each outcome did not allow (its start)."""


def events_of(store: inboxlog.Store) -> list[dict[str, Any]]:
    return store.inspect("chat")[1]


def of_type(events: list[dict[str, Any]], type: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type]


def results_for(events: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    """The ``tool/result`` data answering ``call_id``."""
    return [
        e["data"]
        for e in of_type(events, "tool/result")
        if e["data"]["message"]["source"]["callId"] == call_id
    ]


def approve(place: Place, cwd: Path, *, reject: bool = False) -> None:
    """Decides :data:`AID` from another process, through the CLI."""
    argv = [sys.executable, "-P", "-m", "inboxlog", "approve", place.location, "chat", AID]
    argv += ["--schema", place.schema] if place.schema else []
    argv += ["--reject"] if reject else []
    subprocess.run(argv, check=True, capture_output=True, text=True, cwd=cwd, timeout=60)


def decide(place: Place, cwd: Path, outcome: str) -> None:
    """Decides :data:`AID` ``outcome`` from elsewhere: the CLI for the outcomes it has,
    else ``store.decide`` from another store handle."""
    if outcome in ("allowed-once", "rejected"):
        approve(place, cwd, reject=outcome == "rejected")
    else:
        place.open().decide("chat", AID, outcome)  # type: ignore[arg-type]


async def park(place: Place, runs: Path) -> None:
    """Worker 1: asks for the weather; the SDK stops for approval, the turn parks."""
    result = await go(place.open(), "chat", Q, Script(tool("Paris")), runs)
    assert [(i.name, i.call_id) for i in result.interruptions] == [("weather", "call_1")]


# -- asked here, decided elsewhere, resumed on a third handle ------------------------------


@pytest.mark.parametrize("outcome", ["allowed-once", "rejected", "cancelled", "unavailable"])
async def test_asked_on_one_worker_decided_elsewhere_resumed_once_on_a_third(
    place: Place, tmp_path: Path, outcome: str
) -> None:
    runs = tmp_path / "runs"
    await park(place, runs)
    store = place.open()
    events = events_of(store)
    assert turn_ends(events) == [], "a run stopped for approval never ends its turn"
    order = [e["type"] for e in events if e["type"].startswith(("tool/", "approval/", "turn/"))]
    assert order == ["turn/start", "tool/call", "approval/asked", "turn/parked"]
    assert store.peek("chat")["parked"] == {"turn": 1, "approvals": [AID], "ready": False}
    assert store.peek("chat")["approvals"] == [
        {"id": AID, "toolName": "weather", "callId": "call_1", "arguments": {"city": "Paris"}}
    ]
    state = of_type(events, "turn/parked")[0]["data"]["state"]["framework"]["runState"]
    assert state["current_agent"] == {"name": "assistant"}, "the SDK's RunState, its own JSON"
    assert ran(runs) == []

    decide(place, tmp_path, outcome)
    allowed = outcome == "allowed-once"
    second = Script(say("Sunny." if allowed else "I may not look."))
    result = await go(place.open(), "chat", None, second, runs)
    assert result.interruptions == []
    assert ran(runs) == (["Paris"] if allowed else [])
    [[asked, answer]] = second.seen
    assert asked == ("user", Q) and answer[0] == "tool"
    told = PARIS if allowed else TOLD[outcome]
    assert answer[1].startswith(told), answer

    events = events_of(store)
    assert turn_ends(events) == [{"kind": "completed"}]
    assert [e["data"]["turn"] for e in of_type(events, "turn/resumed")] == [1]
    assert len(of_type(events, "tool/call")) == 1
    [result_data] = results_for(events, "call_1")  # answered exactly once
    assert ("error" not in result_data) == allowed
    assert of_type(events, openai_agents.ITEMS) == [], "nothing stored twice"
    # The surface: the question, the call, its one answer, the reply.
    messages = store.messages("chat")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[2]["content"][0]["toolCallId"] == "call_1"

    third = Script(say("Bye."))
    await go(place.open(), "chat", "Thanks.", third, runs)
    assert third.seen == [
        [("user", Q), answer, ("assistant", second_text(allowed)), ("user", "Thanks.")]
    ]
    assert ran(runs) == (["Paris"] if allowed else [])


def second_text(allowed: bool) -> str:
    return "Sunny." if allowed else "I may not look."


async def test_a_parked_turn_cancelled_is_ended_and_the_tool_never_runs(
    place: Place, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    await park(place, runs)
    with place.open().open("chat") as session:
        session.cancel()
    store = place.open()
    events = events_of(store)
    assert turn_ends(events) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    assert [e["data"]["outcome"] for e in of_type(events, "approval/decided")] == ["cancelled"]
    [answer] = results_for(events, "call_1")
    assert answer["error"]["code"] == "TOOL_NOT_ALLOWED"
    later = Script(say("Fine."))
    await go(place.open(), "chat", "Never mind.", later, runs)  # a new run, not a resume
    [[asked, told, now]] = later.seen
    assert asked == ("user", Q) and told[1].startswith(TOLD["cancelled"])
    assert now == ("user", "Never mind.")
    assert ran(runs) == []
    assert turn_ends(events_of(store))[-1] == {"kind": "completed"}


async def test_resuming_while_approvals_are_pending_raises_and_writes_nothing(
    place: Place, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    await park(place, runs)
    store = place.open()
    before = len(events_of(store))
    script = Script()
    for input in (None, "Any news?"):
        with pytest.raises(inboxlog.ApprovalsPendingError, match=AID):
            await go(store, "chat", input, script, runs)
    assert len(events_of(store)) == before
    assert script.seen == [] and ran(runs) == []
    assert store.peek("chat")["parked"] == {"turn": 1, "approvals": [AID], "ready": False}


async def test_input_given_to_a_resuming_run_reaches_its_next_model_call(
    place: Place, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    await park(place, runs)
    approve(place, tmp_path)
    script = Script(say("72 F."))
    await go(place.open(), "chat", "In Fahrenheit, please.", script, runs)
    assert script.seen == [[("user", Q), ("tool", PARIS), ("user", "In Fahrenheit, please.")]]
    assert turn_ends(events_of(place.open())) == [{"kind": "completed"}]


async def test_a_resumed_run_that_stops_again_parks_again(place: Place, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    await park(place, runs)
    approve(place, tmp_path)
    again = Script(tool("Rome"))  # the resumed run's model asks for another call
    result = await go_with(place.open(), None, again, runs, {1: [weather_call("call_2", "Rome")]})
    assert [i.call_id for i in result.interruptions] == ["call_2"]
    store = place.open()
    second = "approval-1-2-call_2"  # asked at step 2
    assert store.peek("chat")["parked"] == {"turn": 1, "approvals": [second], "ready": False}
    store.decide("chat", second, "rejected")
    last = Script(say("Only Paris."))
    await go(place.open(), "chat", None, last, runs)
    assert ran(runs) == ["Paris"]
    [[asked, paris, rome]] = last.seen
    assert (asked, paris) == (("user", Q), ("tool", PARIS))
    assert rome[1].startswith(TOLD["rejected"])
    assert turn_ends(events_of(store)) == [{"kind": "completed"}]


# -- several calls in one response ------------------------------------------------------


def weather_call(call_id: str, city: str) -> ResponseFunctionToolCall:
    arguments = json.dumps({"city": city})
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        call_id=call_id,
        type="function_call",
        name="weather",
        arguments=arguments,
    )


async def go_with(
    store: inboxlog.Store, input: str | None, script: Script, runs: Path, outputs: dict[int, Any]
) -> Any:
    """:func:`go` with the output of the script's n-th model call replaced by
    ``outputs[n]`` where given."""
    bot = agent(script, runs)
    answer = bot.model.get_response  # type: ignore[union-attr]

    async def replaced(*args: Any, **kw: Any) -> Any:
        response = await answer(*args, **kw)
        response.output = outputs.get(len(script.seen), response.output)
        return response

    bot.model.get_response = replaced  # type: ignore[union-attr]
    with openai_agents.InboxlogSession(store, "chat") as session:
        return await openai_agents.run(bot, input, session=session)


async def test_calls_of_one_response_are_decided_each_on_its_own(
    store: inboxlog.Store, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    two = [weather_call("call_p", "Paris"), weather_call("call_r", "Rome")]
    result = await go_with(store, Q, Script(tool("Paris")), runs, {1: two})
    assert [i.call_id for i in result.interruptions] == ["call_p", "call_r"]
    pending = [a["id"] for a in store.peek("chat")["approvals"]]
    assert pending == ["approval-1-1-call_p", "approval-1-1-call_r"]
    store.decide("chat", "approval-1-1-call_p", "allowed-once")
    store.decide("chat", "approval-1-1-call_r", "rejected")
    script = Script(say("Paris is sunny; Rome I may not say."))
    await go(store, "chat", None, script, runs)
    assert ran(runs) == ["Paris"]
    [[asked, paris, rome]] = script.seen
    assert (asked, paris) == (("user", Q), ("tool", PARIS))
    assert rome[1].startswith(TOLD["rejected"])
    events = store.inspect("chat")[1]
    assert [len(results_for(events, c)) for c in ("call_p", "call_r")] == [1, 1]
    assert turn_ends(events) == [{"kind": "completed"}]


# -- two workers at once -------------------------------------------------------------------


def beside(work: Any) -> BaseException | None:
    """Runs coroutine function ``work`` on a loop of its own in another thread (a second
    worker); returns what it raised."""
    raised: list[BaseException] = []

    def body() -> None:
        try:
            asyncio.run(work())
        except BaseException as error:  # handed back to the test
            raised.append(error)

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return raised[0] if raised else None


async def test_two_workers_resuming_at_once_one_runs_the_other_is_refused(
    place: Place, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    await park(place, runs)
    approve(place, tmp_path)
    refused: list[BaseException | None] = []
    other = Script(say("Me too."))

    def meanwhile() -> None:  # inside worker 1's tool: worker 2 resumes too
        refused.append(beside(lambda: go(place.open(), "chat", None, other, runs)))

    await go(place.open(), "chat", None, Script(say("Sunny."), during_tool=meanwhile), runs)
    assert [type(e) for e in refused] == [inboxlog.LockedError]
    assert other.seen == [] and ran(runs) == ["Paris"]
    assert turn_ends(events_of(place.open())) == [{"kind": "completed"}]


async def test_a_worker_taken_over_while_resumed_is_fenced_and_the_tool_not_rerun(
    pg_place: Place, tmp_path: Path
) -> None:
    place = pg_place
    runs = tmp_path / "runs"
    await park(place, runs)
    approve(place, tmp_path)
    taken: list[inboxlog.Session] = []

    def meanwhile() -> None:  # worker 1 is stuck in its tool; worker 2 takes over
        taken.append(place.open().open("chat", takeover=True))

    with pytest.raises(inboxlog.FencedError):
        await go(place.open(), "chat", None, Script(during_tool=meanwhile), runs)
    assert ran(runs) == ["Paris"]
    [session] = taken
    assert session.open_report["repairedTurn"] == 1  # resumed, so an ordinary open turn
    later = Script(say("I could not tell."))
    with openai_agents.InboxlogSession(session) as chat:
        await openai_agents.run(agent(later, runs), session=chat)
    session.close()
    [[asked, answer]] = later.seen
    assert asked == ("user", Q) and "unknown" in answer[1]
    assert ran(runs) == ["Paris"], "the tool ran again"


# -- kill -9 at every point -------------------------------------------------------------


def worker(place: Place, tmp_path: Path, runs: Path, point: str) -> subprocess.Popen[str]:
    argv = [sys.executable, "-P", str(HERE / "approvals_openai_agents_worker.py")]
    argv += [*place.argv(), "chat", str(runs), point]
    return subprocess.Popen(
        argv,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def killed(process: subprocess.Popen[str]) -> None:
    """Waits for a worker that kills itself."""
    _, err = process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL, err


def parked_and_waiting(place: Place, tmp_path: Path, runs: Path) -> subprocess.Popen[str]:
    """A worker that parked its turn and waits in place (until killed)."""
    process = worker(place, tmp_path, runs, "wait")
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line == "parked\n", process.stderr.read() if process.stderr else ""
    return process


def kill(process: subprocess.Popen[str]) -> None:
    """Kills a worker waiting in place."""
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)  # closes its pipes
    assert process.returncode == -signal.SIGKILL


async def test_killed_before_the_approval_is_asked(place: Place, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    killed(worker(place, tmp_path, runs, "ask"))
    store = place.open()
    with store.open("chat") as session:  # dispatched, never asked: its outcome unknown
        assert session.open_report["repairedTurn"] == 1
    events = events_of(store)
    assert of_type(events, "approval/asked") == []
    [answer] = results_for(events, "call_1")
    assert answer["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    await go(store, "chat", None, Script(say("I did not look.")), runs)
    assert ran(runs) == []


async def test_killed_after_asking_before_parking_the_next_open_cancels_it(
    place: Place, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    killed(worker(place, tmp_path, runs, "park"))
    store = place.open()
    with store.open("chat") as session:
        assert session.open_report["repairedTurn"] == 1
    events = events_of(store)
    assert [e["data"]["outcome"] for e in of_type(events, "approval/decided")] == ["cancelled"]
    [answer] = results_for(events, "call_1")
    assert answer["error"]["code"] == "TOOL_NOT_ALLOWED"
    approve(place, tmp_path)  # too late: recorded as rejected, allows nothing
    script = Script(say("It was cancelled."))
    await go(store, "chat", None, script, runs)
    assert script.seen[0][1][1].startswith(TOLD["cancelled"])
    assert ran(runs) == []
    assert turn_ends(events_of(store)) == [{"kind": "interrupted"}, {"kind": "completed"}]


@pytest.mark.parametrize("decided_first", [False, True])
async def test_killed_while_waiting_in_place_the_run_resumes_elsewhere_once(
    place: Place, tmp_path: Path, decided_first: bool
) -> None:
    runs = tmp_path / "runs"
    waiting = parked_and_waiting(place, tmp_path, runs)
    if decided_first:
        approve(place, tmp_path)
    kill(waiting)
    if not decided_first:
        approve(place, tmp_path)
    store = place.open()
    with store.open("chat") as session:  # a parked turn is left open, not interrupted
        assert session.open_report["repairedTurn"] is None
        assert session.approvals_ready()
    await go(store, "chat", None, Script(say("Sunny.")), runs)
    assert ran(runs) == ["Paris"]
    assert turn_ends(events_of(store)) == [{"kind": "completed"}]


@pytest.mark.parametrize("point", ["resumed", "tool"])
async def test_killed_during_the_resume_the_tool_runs_at_most_once(
    place: Place, tmp_path: Path, point: str
) -> None:
    runs = tmp_path / "runs"
    kill(parked_and_waiting(place, tmp_path, runs))
    approve(place, tmp_path)
    killed(worker(place, tmp_path, runs, point))
    once = ["Paris"] if point == "tool" else []
    assert ran(runs) == once
    store = place.open()
    with store.open("chat") as session:  # handed on, then killed: an ordinary open turn
        assert session.open_report["repairedTurn"] == 1
    [answer] = results_for(events_of(store), "call_1")
    assert answer["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    script = Script(say("I could not tell."))
    await go(store, "chat", None, script, runs)  # continues from the history
    assert "unknown" in script.seen[0][1][1]
    assert ran(runs) == once, "the tool ran again"
    assert turn_ends(events_of(store)) == [{"kind": "interrupted"}, {"kind": "completed"}]
