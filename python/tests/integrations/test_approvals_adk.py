"""ADK's tool confirmation as inboxlog approvals (SPEC §17.4), with the real google-adk
package and a scripted model: asked on one worker, decided from another process,
resumed exactly once on a third; refused while pending; never run when rejected,
cancelled or killed before it was allowed; never twice. The workers are
:mod:`adk_approval_worker`'s, on JSONL and on PostgreSQL."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from adapters import say, tool
from conftest import Place, missing_extra

import inboxlog

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(missing_extra("google.adk", "adk"), reason="needs inboxlog[adk]"),
]

WORKER = Path(__file__).parent / "adk_approval_worker.py"


# -- helpers ------------------------------------------------------------------------------


def events(place: Place) -> list[dict[str, Any]]:
    from adk_approval_worker import ID

    return place.open().inspect(ID)[1]


def of_type(place: Place, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events(place) if e["type"] == kind]


def decided(place: Place) -> list[tuple[str, str]]:
    return [(d["id"], d["outcome"]) for d in of_type(place, "approval/decided")]


def turn_ends(place: Place) -> list[str]:
    return [d["reason"]["kind"] for d in of_type(place, "turn/end")]


def results(place: Place, call_id: str) -> list[dict[str, Any]]:
    """The surface's answers to ``call_id`` (``store.messages``)."""
    from adk_approval_worker import ID

    return [
        block
        for message in place.open().messages(ID)
        for block in message.get("content") or ()
        if isinstance(block, dict)
        and block.get("type") == "tool-result"
        and block.get("toolCallId") == call_id
    ]


def codes(place: Place, call_id: str) -> list[str]:
    """The error codes of the ``tool/result`` events of ``call_id`` (``""``: none)."""
    return [
        (d.get("error") or {}).get("code", "")
        for d in of_type(place, "tool/result")
        if d["message"]["source"]["callId"] == call_id
    ]


async def ask(place: Place, count: Path) -> tuple[str, str]:
    """Worker 1: the model calls the tool, ADK asks for confirmation, the run parks.
    Returns the approval's id and the call's."""
    from adk_approval_worker import ID, run, runs, text

    store = place.open()
    await run(store, count, [tool("Paris")], text("Paris?"))
    peek = store.peek(ID)
    assert peek["parked"] == {"turn": 1, "approvals": [peek["approvals"][0]["id"]], "ready": False}
    assert peek["openTurn"] == 1 and turn_ends(place) == []  # parked, never ended
    asked = peek["approvals"][0]
    assert asked["toolName"] == "weather" and asked["arguments"] == {"city": "Paris"}
    assert runs(count) == 0 and results(place, asked["callId"]) == []
    return asked["id"], asked["callId"]


def decide_elsewhere(place: Place, approval_id: str, outcome: str) -> None:
    """A decision from another process (``inboxlog approve``) on JSONL, from a second
    store handle on PostgreSQL."""
    from adk_approval_worker import ID

    if place.schema is not None:
        place.open().decide(ID, approval_id, outcome)  # type: ignore[arg-type]
        return
    flag = [] if outcome == "allowed-once" else ["--reject"]
    argv = [sys.executable, "-P", "-m", "inboxlog", "approve", place.location, ID, approval_id]
    done = subprocess.run([*argv, *flag], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def confirmation(approval_id: str, confirmed: bool) -> Any:
    """ADK's own confirmation response, as a client sends it."""
    from google.genai import types

    from inboxlog.integrations.adk.approvals import CONFIRMATION

    answer = types.FunctionResponse(
        id=approval_id, name=CONFIRMATION, response={"confirmed": confirmed}
    )
    return types.Content(role="user", parts=[types.Part(function_response=answer)])


# -- asked, decided elsewhere, resumed --------------------------------------------------


@pytest.mark.parametrize("outcome", ["allowed-once", "rejected"])
async def test_asked_on_one_worker_decided_from_another_process_resumed_on_a_third(
    place: Place, tmp_path: Path, outcome: str
) -> None:
    from adk_approval_worker import run, runs

    count = tmp_path / "count"
    approval_id, call_id = await ask(place, count)
    decide_elsewhere(place, approval_id, outcome)
    script = await run(place.open(), count, [say("Sunny.")])
    allowed = outcome == "allowed-once"
    assert runs(count) == (1 if allowed else 0)
    said = "sunny in Paris" if allowed else "This tool call is rejected."
    assert script.seen == [[("user", "Paris?"), ("tool", said)]]
    assert turn_ends(place) == ["completed"]
    assert decided(place) == [(approval_id, outcome)]
    assert len(of_type(place, "turn/parked")) == len(of_type(place, "turn/resumed")) == 1
    assert [d["callId"] for d in of_type(place, "tool/call")] == [call_id]
    assert len(results(place, call_id)) == 1
    assert codes(place, call_id) == ["" if allowed else "TOOL_NOT_ALLOWED"]


@pytest.mark.parametrize("confirmed", [True, False])
async def test_adks_own_confirmation_response_is_the_decision(
    place: Place, tmp_path: Path, confirmed: bool
) -> None:
    from adk_approval_worker import run, runs

    count = tmp_path / "count"
    approval_id, call_id = await ask(place, count)
    await run(place.open(), count, [say("Done.")], confirmation(approval_id, confirmed))
    outcome = "allowed-once" if confirmed else "rejected"
    assert decided(place) == [(approval_id, outcome)]
    assert runs(count) == (1 if confirmed else 0)
    assert turn_ends(place) == ["completed"] and len(results(place, call_id)) == 1


async def test_the_first_decision_wins_over_adks_confirmation(place: Place, tmp_path: Path) -> None:
    from adk_approval_worker import run, runs

    count = tmp_path / "count"
    approval_id, call_id = await ask(place, count)
    decide_elsewhere(place, approval_id, "rejected")
    await run(place.open(), count, [say("Done.")], confirmation(approval_id, True))
    assert runs(count) == 0  # the late confirmation changed nothing
    assert decided(place) == [(approval_id, "rejected")]
    rejected = of_type(place, "agent/inbox/rejected")
    assert [r["reason"]["kind"] for r in rejected] == ["already_decided"]
    assert codes(place, call_id) == ["TOOL_NOT_ALLOWED"] and turn_ends(place) == ["completed"]


# -- pending, cancelled -----------------------------------------------------------------


async def test_a_run_while_approvals_are_pending_raises_and_writes_nothing(
    place: Place, tmp_path: Path
) -> None:
    from adk_approval_worker import run, runs, text

    count = tmp_path / "count"
    approval_id, _ = await ask(place, count)
    before = len(events(place))
    for message in (None, text("And Rome?")):
        with pytest.raises(inboxlog.ApprovalsPendingError, match=approval_id):
            await run(place.open(), count, [], message)
    assert len(events(place)) == before and runs(count) == 0
    decide_elsewhere(place, approval_id, "allowed-once")
    await run(place.open(), count, [say("Sunny.")])  # the session was let go
    assert runs(count) == 1 and turn_ends(place) == ["completed"]


async def test_a_cancelled_parked_turn_never_runs_the_tool(place: Place, tmp_path: Path) -> None:
    from adk_approval_worker import ID, run, runs, text

    count = tmp_path / "count"
    approval_id, call_id = await ask(place, count)
    with place.open().open(ID) as session:
        session.cancel({"kind": "user"}, False)
    assert decided(place) == [(approval_id, "cancelled")]
    script = await run(place.open(), count, [say("Ok.")], text("Never mind."))
    assert "cancelled" in script.seen[0][1][1]  # the model sees the log's answer
    await run(place.open(), count, [say("Ok.")], confirmation(approval_id, True))  # too late
    assert runs(count) == 0
    assert turn_ends(place) == ["aborted", "completed", "completed"]
    assert len(results(place, call_id)) == 1 and codes(place, call_id) == ["TOOL_NOT_ALLOWED"]


# -- two workers, killed workers --------------------------------------------------------


async def test_two_workers_resuming_at_once_one_runs_the_other_is_refused(
    place: Place, tmp_path: Path
) -> None:
    import asyncio

    from adk_approval_worker import run, runs

    count = tmp_path / "count"
    approval_id, call_id = await ask(place, count)
    decide_elsewhere(place, approval_id, "allowed-once")
    refused: list[BaseException] = []

    def second_worker() -> None:  # while the first runs the tool
        def go() -> None:
            try:
                asyncio.run(run(place.open(), tmp_path / "count2", [say("Twice?")]))
            except BaseException as error:
                refused.append(error)

        thread = threading.Thread(target=go)
        thread.start()
        thread.join()

    await run(place.open(), count, [say("Sunny.")], during_tool=second_worker)
    assert len(refused) == 1
    assert isinstance(refused[0], (inboxlog.LockedError, inboxlog.FencedError)), refused
    assert runs(count) == 1 and runs(tmp_path / "count2") == 0
    assert turn_ends(place) == ["completed"] and len(of_type(place, "turn/resumed")) == 1
    assert len(results(place, call_id)) == 1


def kill_worker(place: Place, point: str, cwd: Path, count: Path) -> None:
    """Runs the worker in a child process and kills it with SIGKILL where it stops."""
    ready = cwd / f"ready-{point}"
    argv = [sys.executable, "-P", str(WORKER), place.location, place.schema or ""]
    argv += [point, str(ready), str(count)]
    with subprocess.Popen(argv, cwd=cwd, stderr=subprocess.PIPE, text=True) as worker:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert worker.poll() is None, worker.stderr.read() if worker.stderr else ""
            assert time.monotonic() < deadline, "the worker never got where it waits"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=60) == -signal.SIGKILL


@pytest.mark.parametrize("point", ["asking", "asked", "decided", "resuming"])
async def test_a_worker_killed_anywhere_never_runs_a_tool_not_allowed_nor_twice(
    place: Place, tmp_path: Path, point: str
) -> None:
    from adk_approval_worker import ID, run, runs

    count = tmp_path / "count"
    if point in ("decided", "resuming"):
        approval_id, _ = await ask(place, count)
        decide_elsewhere(place, approval_id, "allowed-once")
    kill_worker(place, point, tmp_path, count)
    calls = [d["callId"] for d in of_type(place, "tool/call")]
    assert len(calls) == 1  # the call's tool/call is durable before it is asked
    assert runs(count) == (1 if point == "resuming" else 0)
    await run(place.open(), count, [say("Sunny.")])  # the next worker
    if point == "decided":  # still parked: the next worker resumes it, once
        assert runs(count) == 1 and turn_ends(place) == ["completed"]
        assert codes(place, calls[0]) == [""]
    else:  # the killed worker's turn was interrupted: never run (again)
        assert runs(count) == (1 if point == "resuming" else 0)
        assert turn_ends(place) == ["interrupted", "completed"]
        want = "TOOL_NOT_ALLOWED" if point == "asked" else "TOOL_OUTCOME_UNKNOWN"
        assert codes(place, calls[0]) == [want]
    assert len(results(place, calls[0])) == 1
    assert place.open().peek(ID)["parked"] is None
