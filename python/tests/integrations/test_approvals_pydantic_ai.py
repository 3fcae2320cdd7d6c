"""SPEC §17.4 for Pydantic AI: deferred tools (``requires_approval=True``,
``ApprovalRequired``) on an inboxlog session, with the real Pydantic AI and a scripted
model (``pa_approvals.py``).

A run that stops for approval (its output ``DeferredToolRequests``) parks its turn; the
decisions come from another process or Store handle; the next run, on a third handle,
resumes Pydantic AI's own run with them as ``DeferredToolResults``: a tool runs only
when allowed once, and once; a worker killed at any point never runs it otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Place, missing_extra

import inboxlog

if missing_extra("pydantic_ai", "pydantic-ai"):  # pragma: no cover - CI has it
    pytest.skip("the pydantic-ai extra is not installed", allow_module_level=True)

from pa_approvals import CALLS, QUESTION, REASON, agent, ran
from pydantic_ai import DeferredToolRequests

from inboxlog.integrations.pydantic_ai import fold_messages

HERE = Path(__file__).parent
pytestmark = pytest.mark.anyio


# -- helpers ------------------------------------------------------------------------------


def events_of(store: inboxlog.Store, id: str = "job") -> list[dict[str, Any]]:
    return store.inspect(id)[1]


def turn_ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in events if e["type"] == "turn/end"]


def codes(events: list[dict[str, Any]]) -> dict[str, list[str | None]]:
    """Each call's ``tool/result`` events by call id: their error codes (``None`` for a
    result without error)."""
    out: dict[str, list[str | None]] = {}
    for e in events:
        if e["type"] == "tool/result":
            call = e["data"]["message"]["source"]["callId"]
            out.setdefault(call, []).append((e["data"].get("error") or {}).get("code"))
    return out


def answered_on_surface(store: inboxlog.Store, id: str = "job") -> dict[str, int]:
    """How many times what the model sees answers each call."""
    count: dict[str, int] = {}
    for message in store.messages(id):
        for block in message.get("content", []):
            if isinstance(block, dict) and block.get("type") == "tool-result":
                count[block["toolCallId"]] = count.get(block["toolCallId"], 0) + 1
    return count


def approval_ids(store: inboxlog.Store, id: str = "job") -> dict[str, str]:
    """The pending approvals' ids by tool name."""
    return {a["toolName"]: a["id"] for a in store.peek(id)["approvals"]}


def approve(place: Place, approval_id: str, *, reject: bool = False) -> None:
    """Decides from another process, through the CLI."""
    argv = [sys.executable, "-P", "-m", "inboxlog", "approve", *place.cli()]
    argv += ["job", approval_id, *(["--reject"] if reject else [])]
    subprocess.run(argv, check=True, capture_output=True, text=True)


async def ask(place: Place, ran_file: Path) -> dict[str, str]:
    """The first worker: the run stops for approval; returns the approvals asked."""
    store = place.open()
    result = await agent(store, ran_file).run(QUESTION, conversation_id="job")
    assert isinstance(result.output, DeferredToolRequests)
    approvals = {c.tool_call_id for c in result.output.approvals}
    assert approvals == {CALLS["delete"], CALLS["archive"]}
    return approval_ids(store)


# -- asked, decided elsewhere, resumed on a third handle ------------------------------------


async def test_asked_decided_from_another_process_and_resumed_on_a_third_handle(
    place: Place, tmp_path: Path
) -> None:
    ran_file = tmp_path / "ran"
    asked = await ask(place, ran_file)
    assert sorted(asked) == ["archive", "delete"]
    second = place.open()
    peek = second.peek("job")
    parked = peek["parked"]
    assert parked is not None and (parked["turn"], parked["ready"]) == (1, False)
    assert sorted(parked["approvals"]) == sorted(asked.values())
    pending = {a["toolName"]: a for a in peek["approvals"]}
    assert pending["archive"]["reason"] == REASON
    assert pending["delete"]["callId"] == CALLS["delete"]
    assert pending["delete"]["arguments"] == {"path": "a.txt"}
    events = events_of(second)
    assert turn_ends(events) == [], "a run that stops for approval parks, never ends"
    # Each call that waits has its tool/call, then its approval/asked; `read` ran.
    kinds = [(e["type"], e["data"].get("callId")) for e in events]
    for call in (CALLS["delete"], CALLS["archive"]):
        assert kinds.index(("tool/call", call)) < kinds.index(("approval/asked", call))
    assert codes(events) == {CALLS["read"]: [None]}
    assert ran(ran_file) == []

    # Resuming while approvals are pending is refused, and writes nothing.
    count = len(events)
    with pytest.raises(inboxlog.ApprovalsPendingError, match=asked["delete"]):
        await agent(second, ran_file).run(conversation_id="job")
    approve(place, asked["delete"])
    with pytest.raises(inboxlog.ApprovalsPendingError, match=asked["archive"]):
        await agent(place.open(), ran_file).run(conversation_id="job")
    assert len(events_of(second)) == count + 1  # the decision alone, taken in on open
    second.decide("job", asked["archive"], "rejected")  # a second Store handle decides

    third = place.open()
    seen: list[list[tuple[str, str]]] = []
    result = await agent(third, ran_file, seen).run(conversation_id="job")
    assert ran(ran_file) == ["delete"], "the allowed tool runs once, the rejected never"
    assert isinstance(result.output, str)
    [saw] = seen  # the resumed run's one model call: every call answered, once
    tools = [text for role, text in saw if role == "tool"]
    assert len(tools) == 3
    assert "deleted a.txt" in tools and "contents of a.txt" in tools
    assert any("rejected" in text for text in tools)
    events = events_of(third)
    assert turn_ends(events) == [{"kind": "completed"}]
    assert [e["type"] for e in events].count("turn/resumed") == 1
    assert codes(events) == {
        CALLS["read"]: [None],
        CALLS["archive"]: ["TOOL_NOT_ALLOWED"],
        CALLS["delete"]: [None],
    }
    assert answered_on_surface(third) == dict.fromkeys(CALLS.values(), 1)
    # The history the log holds answers each call once, as the model saw it.
    folded = fold_messages(events)
    returns = [p.tool_call_id for m in folded for p in m.parts if p.part_kind == "tool-return"]
    assert sorted(returns) == sorted(CALLS.values())
    assert [e["type"] for e in events].count("pydantic-ai/history") == 0


async def test_every_call_rejected_runs_no_tool_and_the_model_sees_why(
    place: Place, tmp_path: Path
) -> None:
    ran_file = tmp_path / "ran"
    asked = await ask(place, ran_file)
    for approval_id in asked.values():
        approve(place, approval_id, reject=True)
    seen: list[list[tuple[str, str]]] = []
    store = place.open()
    await agent(store, ran_file, seen).run(conversation_id="job")
    assert ran(ran_file) == []
    [saw] = seen
    assert sum("rejected" in text for role, text in saw if role == "tool") == 2
    events = events_of(store)
    assert turn_ends(events) == [{"kind": "completed"}]
    assert codes(events)[CALLS["delete"]] == ["TOOL_NOT_ALLOWED"]
    assert answered_on_surface(store) == dict.fromkeys(CALLS.values(), 1)


async def test_a_parked_turn_cancelled_runs_no_tool_and_the_next_run_starts_anew(
    place: Place, tmp_path: Path
) -> None:
    ran_file = tmp_path / "ran"
    asked = await ask(place, ran_file)
    with place.open().open("job") as session:
        session.cancel()
    approve(place, asked["delete"])  # too late: recorded rejected, runs nothing
    store = place.open()
    assert store.peek("job")["parked"] is None
    seen: list[list[tuple[str, str]]] = []
    await agent(store, ran_file, seen).run(conversation_id="job")  # a new turn
    assert ran(ran_file) == []
    events = events_of(store)
    assert [r["kind"] for r in turn_ends(events)] == ["aborted", "completed"]
    outcomes = [e["data"]["outcome"] for e in events if e["type"] == "approval/decided"]
    assert outcomes == ["cancelled", "cancelled"]
    assert [e["type"] for e in events].count("agent/inbox/rejected") == 1
    assert answered_on_surface(store) == dict.fromkeys(CALLS.values(), 1)
    [saw] = seen
    assert sum("cancelled" in text for role, text in saw if role == "tool") == 2


async def test_a_prompt_given_to_the_resuming_run_follows_the_tool_results(
    tmp_path: Path,
) -> None:
    place = Place(str(tmp_path / "logs"), None)
    ran_file = tmp_path / "ran"
    asked = await ask(place, ran_file)
    for approval_id in asked.values():
        approve(place, approval_id)
    seen: list[list[tuple[str, str]]] = []
    store = place.open()
    await agent(store, ran_file, seen).run("Then list the folder.", conversation_id="job")
    assert sorted(ran(ran_file)) == ["archive", "delete"]
    [saw] = seen
    assert saw[0] == ("user", QUESTION) and saw[-1] == ("user", "Then list the folder.")
    events = events_of(store)
    users = [e["data"]["content"] for e in events if e["type"] == "user/message"]
    assert users == [QUESTION, "Then list the folder."]
    assert turn_ends(events) == [{"kind": "completed"}]


async def test_two_workers_resuming_at_once_one_runs_and_the_other_is_refused(
    place: Place, tmp_path: Path
) -> None:
    ran_file = tmp_path / "ran"
    asked = await ask(place, ran_file)
    for approval_id in asked.values():
        approve(place, approval_id)
    refused = asyncio.Event()

    async def inside_the_tool() -> None:
        await asyncio.wait_for(refused.wait(), 120)  # the other worker tries meanwhile

    async def worker() -> Any:
        try:
            return await agent(place.open(), ran_file, hold=inside_the_tool).run(
                conversation_id="job"
            )
        finally:
            refused.set()

    outcomes = await asyncio.gather(worker(), worker(), return_exceptions=True)
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(errors) == 1, outcomes
    assert isinstance(errors[0], (inboxlog.LockedError, inboxlog.FencedError)), errors
    assert sorted(ran(ran_file)) == ["archive", "delete"]
    events = events_of(place.open())
    assert [e["type"] for e in events].count("turn/resumed") == 1
    assert turn_ends(events) == [{"kind": "completed"}]


# -- kill -9 at every point a worker can die --------------------------------------------------


@contextlib.contextmanager
def worker_at(point: str, place: Place, cwd: Path) -> Iterator[None]:
    """Runs ``pa_approvals.py`` at ``point`` in a child process, yields once it says it
    is there (its file ``ready``), then kills it with SIGKILL."""
    ready = cwd / "ready"
    ready.unlink(missing_ok=True)
    script = str(HERE / "pa_approvals.py")
    argv = [sys.executable, "-P", script, point, place.location, place.schema or ""]
    argv += [str(cwd / "ran"), str(ready)]
    with subprocess.Popen(argv, cwd=cwd, stderr=subprocess.PIPE, text=True) as worker:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            assert time.monotonic() < deadline, "the worker never got where it waits"
            time.sleep(0.05)
        yield
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=60) == -signal.SIGKILL


def kill_worker(point: str, place: Place, cwd: Path) -> None:
    """Kills a worker with SIGKILL at ``point`` (:func:`worker_at`)."""
    with worker_at(point, place, cwd):
        pass


async def continue_after(place: Place, ran_file: Path) -> list[list[tuple[str, str]]]:
    """The next run on the session after a killed worker: it continues from the history;
    returns what its model saw."""
    seen: list[list[tuple[str, str]]] = []
    await agent(place.open(), ran_file, seen).run(conversation_id="job")
    return seen


@pytest.mark.parametrize("point", ["before-asked", "after-asked"])
async def test_a_worker_killed_while_asking_never_runs_the_tool(
    point: str, place: Place, tmp_path: Path
) -> None:
    kill_worker(point, place, tmp_path)
    store = place.open()
    with store.open("job") as session:  # not parked: the turn is interrupted
        assert session.open_report["repairedTurn"] == 1
    events = events_of(store)
    answers = codes(events)
    if point == "before-asked":  # no approval asked: repair answers the calls (§15.4)
        assert [e["type"] for e in events].count("approval/asked") == 0
        # `archive` started (and asked for approval): its outcome is unknown; `delete`
        # never started unless its tool/call was written before the kill.
        assert answers[CALLS["archive"]] == ["TOOL_OUTCOME_UNKNOWN"]
        assert answers[CALLS["delete"]] in (["TOOL_NOT_STARTED"], ["TOOL_OUTCOME_UNKNOWN"])
    else:  # asked, never parked: the open decides them cancelled
        outcomes = [e["data"]["outcome"] for e in events if e["type"] == "approval/decided"]
        assert outcomes == ["cancelled", "cancelled"]
        assert answers[CALLS["delete"]] == ["TOOL_NOT_ALLOWED"]
        assert answers[CALLS["archive"]] == ["TOOL_NOT_ALLOWED"]
    seen = await continue_after(place, tmp_path / "ran")
    assert ran(tmp_path / "ran") == []
    assert len([text for role, text in seen[0] if role == "tool"]) == 3
    assert answered_on_surface(store) == dict.fromkeys(CALLS.values(), 1)
    assert turn_ends(events_of(store)) == [{"kind": "interrupted"}, {"kind": "completed"}]


async def test_a_worker_killed_waiting_in_place_after_the_decision_resumes_once_elsewhere(
    place: Place, tmp_path: Path
) -> None:
    ran_file = tmp_path / "ran"
    with worker_at("parked", place, tmp_path):  # decided while it waits, then killed
        asked = approval_ids(place.open())
        approve(place, asked["delete"])
        approve(place, asked["archive"], reject=True)
    store = place.open()
    with store.open("job") as session:  # a parked turn is not interrupted by an open
        assert session.open_report["repairedTurn"] is None
        assert session.approvals_ready()
    await continue_after(place, ran_file)
    assert ran(ran_file) == ["delete"]
    assert turn_ends(events_of(store)) == [{"kind": "completed"}]
    assert answered_on_surface(store) == dict.fromkeys(CALLS.values(), 1)


@pytest.mark.parametrize("point", ["resumed", "in-tool"])
async def test_a_worker_killed_while_resuming_never_runs_the_tool_twice(
    point: str, place: Place, tmp_path: Path
) -> None:
    ran_file = tmp_path / "ran"
    asked = await ask(place, ran_file)
    approve(place, asked["delete"])
    approve(place, asked["archive"], reject=True)
    kill_worker(point, place, tmp_path)
    # Killed after turn/resumed: an ordinary open turn, interrupted by the next open;
    # the allowed call is answered (its outcome unknown), never run again by itself.
    assert ran(ran_file) == ([] if point == "resumed" else ["delete"])
    store = place.open()
    with store.open("job") as session:
        assert session.open_report["repairedTurn"] == 1
    answers = codes(events_of(store))
    assert answers[CALLS["delete"]] == ["TOOL_OUTCOME_UNKNOWN"]
    assert answers[CALLS["archive"]] == ["TOOL_NOT_ALLOWED"]
    seen = await continue_after(place, ran_file)
    assert ran(ran_file) == ([] if point == "resumed" else ["delete"])
    assert any("unknown" in text for role, text in seen[0] if role == "tool")
    assert answered_on_surface(store) == dict.fromkeys(CALLS.values(), 1)
    events = events_of(store)
    assert turn_ends(events) == [{"kind": "interrupted"}, {"kind": "completed"}]
    folded = fold_messages(events)
    returns = [p.tool_call_id for m in folded for p in m.parts if p.part_kind == "tool-return"]
    assert sorted(returns) == sorted(CALLS.values())
