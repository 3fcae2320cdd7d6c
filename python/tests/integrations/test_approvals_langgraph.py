"""LangChain's HumanInTheLoopMiddleware on inboxlog approvals (SPEC §17.4), with the real
LangChain and LangGraph packages and a scripted chat model: no network. Asked on one
worker, decided from another process, resumed on a third handle."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import Place, turn_ends
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from lg_scripted import ScriptedChatModel, call, say

import inboxlog
from inboxlog.integrations.langgraph import InboxlogMiddleware, InboxlogSaver

HERE = Path(__file__).parent
TESTS = HERE.parent
SOURCE = Path(inboxlog.__file__).parent.parent  # the package these tests import
CONFIG: Any = {"configurable": {"thread_id": "job"}}
ASK: Any = {"messages": [{"role": "user", "content": "Book Paris."}]}
MODES = ["batched", "per_call"]


class Worker:
    """One worker: its own store handle, saver and agent; ``ran`` counts the tool's runs."""

    def __init__(self, place: Place, mode: str, *replies: Any, ran: list[str]) -> None:
        self.saver = InboxlogSaver(place.open())
        self.model = ScriptedChatModel(replies=list(replies))

        @tool
        def book(city: str) -> str:
            """Books a hotel in a city."""
            ran.append(city)
            return f"booked {city}"

        hitl = HumanInTheLoopMiddleware({"book": True}, interrupt_mode=mode)  # type: ignore[arg-type]
        middleware = [InboxlogMiddleware(self.saver), hitl]
        self.agent = create_agent(
            self.model, [book], middleware=middleware, checkpointer=self.saver
        )

    def invoke(self, input: Any = None) -> dict[str, Any]:
        result: dict[str, Any] = self.agent.invoke(input, CONFIG)
        return result


def ask(place: Place, mode: str, ran: list[str]) -> str:
    """Worker 1: the run stops for approval; the worker lets the thread go. Returns the
    approval's id."""
    first = Worker(place, mode, call("book", city="Paris"), ran=ran)
    paused = first.invoke(ASK)
    assert len(paused["__interrupt__"]) == 1
    first.saver.close()
    peek = place.open().peek("job")
    assert peek["parked"] is not None and not peek["parked"]["ready"]
    [asked] = peek["approvals"]
    assert asked["callId"] == "call_1" and asked["toolName"] == "book"
    return str(asked["id"])


def approve(place: Place, id: str, *flags: str) -> None:
    """Decides from another process: ``inboxlog approve``."""
    argv = [sys.executable, "-P", "-m", "inboxlog", "approve", place.location, "job", id]
    if place.schema:
        argv += ["--schema", place.schema]
    env = {**os.environ, "PYTHONPATH": str(SOURCE)}
    done = subprocess.run([*argv, *flags], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def results(store: inboxlog.Store) -> list[Any]:
    """The tool results the surface shows for call_1."""
    return [
        block
        for message in store.messages("job")
        for block in message.get("content", [])
        if isinstance(block, dict)
        and block.get("type") == "tool-result"
        and block.get("toolCallId") == "call_1"
    ]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("outcome", ["allowed-once", "rejected", "cancelled"])
def test_asked_on_one_worker_decided_elsewhere_resumed_on_a_third(
    place: Place, mode: str, outcome: str
) -> None:
    ran: list[str] = []
    id = ask(place, mode, ran)
    events = place.open().read("job")
    assert turn_ends(events) == []  # parked, not ended
    if outcome == "allowed-once":
        approve(place, id)
    elif outcome == "rejected":
        place.open().decide("job", id, "rejected")
    else:
        with place.open().open("job") as session:
            session.cancel()
    third = Worker(place, mode, say("Done."), ran=ran)
    final = third.invoke()
    third.saver.close()
    store = place.open()
    events = store.read("job")
    assert ran == (["Paris"] if outcome == "allowed-once" else [])
    [seen] = third.model.inputs
    assert [m.type for m in seen] == ["human", "ai", "tool"]  # the call answered once
    assert [m.type for m in final["messages"]] == ["human", "ai", "tool", "ai"]
    [answer] = results(store)
    assert bool(answer.get("isError")) == (outcome != "allowed-once")
    ends = [e["kind"] for e in turn_ends(events)]
    if outcome == "cancelled":
        assert ends == ["aborted", "completed"]  # the next run starts a turn of its own
    else:
        assert ends == ["completed"]
        assert [e["type"] for e in events].count("turn/resumed") == 1
    assert [e["type"] for e in events].count("tool/call") == 1


@pytest.mark.parametrize("mode", MODES)
def test_resuming_while_pending_raises_and_writes_nothing(place: Place, mode: str) -> None:
    ran: list[str] = []
    id = ask(place, mode, ran)
    before = len(place.open().read("job"))
    worker = Worker(place, mode, say("Done."), ran=ran)
    with pytest.raises(inboxlog.ApprovalsPendingError):
        worker.invoke()
    worker.saver.close()
    assert len(place.open().read("job")) == before and ran == []
    approve(place, id)
    worker = Worker(place, mode, say("Done."), ran=ran)
    worker.invoke()
    worker.saver.close()
    assert ran == ["Paris"]


@pytest.mark.parametrize("mode", MODES)
def test_of_two_workers_resuming_at_once_one_runs(place: Place, mode: str) -> None:
    ran: list[str] = []
    id = ask(place, mode, ran)
    approve(place, id)
    one = Worker(place, mode, say("Done."), ran=ran)
    other = Worker(place, mode, say("Done."), ran=ran)
    one.saver.session("job")  # the first holds the thread
    with pytest.raises((inboxlog.LockedError, inboxlog.FencedError)):
        other.invoke()
    one.invoke()
    one.saver.close()
    other.saver.close()
    assert ran == ["Paris"]
    assert [e["kind"] for e in turn_ends(place.open().read("job"))] == ["completed"]


def test_a_run_resumed_in_the_process_that_asked_goes_on_in_its_turn(tmp_path: Path) -> None:
    place = Place(str(tmp_path / "logs"), None)
    ran: list[str] = []
    worker = Worker(place, "batched", call("book", city="Paris"), say("Done."), ran=ran)
    worker.invoke(ASK)  # the thread stays held: parked when the next run starts
    with pytest.raises(inboxlog.ApprovalsPendingError):
        worker.invoke()
    [asked] = place.open().peek("job")["approvals"]
    assert place.open().peek("job")["parked"] is not None
    place.open().decide("job", asked["id"], "allowed-once")
    worker.invoke()
    worker.saver.close()
    events = place.open().read("job")
    assert ran == ["Paris"]
    assert [e["kind"] for e in turn_ends(events)] == ["completed"]


def test_get_state_of_a_parked_thread_resumes_nothing(tmp_path: Path) -> None:
    place = Place(str(tmp_path / "logs"), None)
    ran: list[str] = []
    id = ask(place, "batched", ran)
    approve(place, id)
    worker = Worker(place, "batched", ran=ran)
    state = worker.agent.get_state(CONFIG)
    worker.saver.close()
    assert state.interrupts and place.open().peek("job")["parked"] is not None
    assert "turn/resumed" not in [e["type"] for e in place.open().read("job")]


# -- workers killed where they can die ---------------------------------------------------


def kill(place: Place, mode: str, stage: str, cwd: Path) -> list[str]:
    """Runs hitl_worker.py to ``stage``, kills it with SIGKILL; returns the tool's runs."""
    ready = cwd / "ready"
    ready.unlink(missing_ok=True)
    argv = [sys.executable, "-P", str(HERE / "hitl_worker.py"), *place.argv(), mode, stage]
    env = {**os.environ, "PYTHONPATH": str(SOURCE)}
    with subprocess.Popen(
        [*argv, str(ready), str(TESTS)], cwd=cwd, env=env, stderr=subprocess.PIPE, text=True
    ) as worker:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            assert time.monotonic() < deadline, "the worker never got where it waits"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=60) == -signal.SIGKILL
    ran = cwd / "ran"
    return ran.read_text().split() if ran.exists() else []


def finish(place: Place, mode: str, ran: list[str]) -> None:
    """Resumes after the kill, approving whatever is asked, until the turn is over."""
    for _ in range(2):
        for asked in place.open().peek("job")["approvals"]:
            approve(place, asked["id"])
        worker = Worker(place, mode, say("Done."), ran=ran)
        try:
            result = worker.invoke()
        except inboxlog.ApprovalsPendingError:  # asked now: the worker died before
            continue
        finally:
            worker.saver.close()
        if not result.get("__interrupt__"):
            return
    raise AssertionError("the run never ended")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stage", ["run", "ask", "parked", "decided", "resume"])
def test_a_worker_killed_never_runs_the_tool_unallowed_nor_twice(
    place: Place, mode: str, stage: str, tmp_path: Path
) -> None:
    if stage == "decided":  # killed while it waits in place, after the decision
        ran = kill(place, mode, "parked", tmp_path)
        approve(place, place.open().peek("job")["approvals"][0]["id"])
    elif stage == "resume":  # killed inside the allowed tool
        kill(place, mode, "parked", tmp_path)
        approve(place, place.open().peek("job")["approvals"][0]["id"])
        ran = kill(place, mode, "resume", tmp_path)
        assert ran == ["Paris"]
    else:
        ran = kill(place, mode, stage, tmp_path)
    assert ran == [] or stage == "resume"
    mine: list[str] = []
    finish(place, mode, mine)
    runs = ran + mine
    events = place.open().read("job")
    allowed = [e for e in events if e["type"] == "approval/decided"]
    decided = [e["data"]["outcome"] for e in allowed]
    assert len(runs) <= 1, "the tool ran twice"
    if runs:
        assert any(e["data"]["outcome"] == "allowed-once" for e in allowed)
    if stage == "ask":  # the crash cancelled the approval: the tool never runs
        assert runs == [] and decided == ["cancelled"]
    if stage == "run" and mode == "per_call":
        # Its tool/call came before the crash, so the next open answered the call
        # (TOOL_OUTCOME_UNKNOWN): the interrupt is answered as not allowed.
        assert runs == []
    elif stage in ("run", "parked", "decided"):
        assert runs == ["Paris"]  # asked by the next run, then allowed
    assert len(results(place.open())) == 1
