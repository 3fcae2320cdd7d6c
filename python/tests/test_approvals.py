"""Approvals from Python (SPEC §17): asked in a turn, parked, decided from another
process (the CLI), from the console's HTTP API and in process, and the run handed on
once; each refusal raises its own error class and writes nothing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import m, said, tool_call, tool_result
from starlette.testclient import TestClient

import inboxlog
import inboxlog.aio
import inboxlog.console


def asked(session: inboxlog.Session) -> None:
    """Turn 1, step 1 open, call ``c1`` of ``rm`` made and dispatched, approval ``a1``
    asked for it."""
    session.inbox.append("next-turn", m("u1", role="user", content="delete x"))
    session.open_turn()
    proposal = session.propose_step()
    session.decide({"kind": "enter", "messages": proposal["messages"]})
    call = {"type": "tool-call", "id": "c1", "name": "rm", "arguments": '{"path":"x"}'}
    session.append("assistant/message", said(1, 1, "m1", call))
    session.append("tool/call", tool_call(1, 1, "c1", "rm", '{"path":"x"}'))
    session.ask_approval("a1", "rm", "c1", {"path": "x"}, "deletes a file")


def test_a_parked_turn_is_decided_from_another_process_and_resumed_once(
    tmp_path: Path,
) -> None:
    store = inboxlog.Store(tmp_path)
    with store.create("s") as s:
        asked(s)
        assert s.pending_approvals() == [
            {
                "id": "a1",
                "toolName": "rm",
                "callId": "c1",
                "arguments": {"path": "x"},
                "reason": "deletes a file",
            }
        ]
        with pytest.raises(inboxlog.ApprovalsPendingError, match='"a1"'):
            s.end_step("continue")
        s.park({"run": "state"})
        with pytest.raises(inboxlog.ProtocolError, match="parked"):
            s.append("host/x", {})
        with pytest.raises(inboxlog.ApprovalsPendingError) as pending:
            s.resume_parked()
        assert pending.value.kind == "approvals_pending" and pending.value.code == 19
        assert not s.approvals_ready()
    peek = store.peek("s")
    assert peek["parked"] == {"turn": 1, "approvals": ["a1"], "ready": False}
    assert [a["id"] for a in peek["approvals"]] == ["a1"]
    assert store.verify("s")["parked"] is True

    # Another process decides, through the CLI.
    done = subprocess.run(
        [sys.executable, "-P", "-m", "inboxlog", "approve", str(tmp_path), "s", "a1", "--reject"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    post = done.stdout.strip()

    with store.open("s") as s:
        assert s.open_report["repairedTurn"] is None
        assert s.approvals_ready()
        resumed = s.resume_parked()
        assert resumed == {
            "turn": 1,
            "parked": {"turn": 1, "approvals": ["a1"], "state": {"run": "state"}},
            "decisions": [{"id": "a1", "outcome": "rejected"}],
        }
        with pytest.raises(inboxlog.ProtocolError, match="not parked"):
            s.resume_parked()
        decided = [e for e in s.events() if e["type"] == "approval/decided"]
        assert [e["data"] for e in decided] == [{"id": "a1", "outcome": "rejected", "post": post}]
        answer = s.messages()[-1]
        assert answer["content"][0]["toolCallId"] == "c1"
        assert answer["content"][0]["isError"] is True
        with pytest.raises(inboxlog.AlreadyDecidedError, match='"a1"'):
            s.decide_approval("a1", "allowed-once")
        with pytest.raises(inboxlog.InvalidInputError, match="outcome"):
            s.decide_approval("a1", "ok")  # type: ignore[arg-type]


def test_the_console_takes_decisions_and_names_bad_ones(store: inboxlog.Store) -> None:
    with store.create("s") as s, TestClient(inboxlog.console.app(store)) as client:
        asked(s)
        r = client.post("/api/sessions/s/approvals", json={"id": "a1", "outcome": "maybe"})
        assert r.status_code == 400, r.text
        assert r.json()["kind"] == "invalid_input", r.text
        r = client.post("/api/sessions/s/approvals", json={"outcome": "rejected"})
        assert r.status_code == 400
        r = client.post("/api/sessions/s/approvals", json={"id": "a1", "outcome": "allowed-once"})
        assert r.status_code == 202, r.text
        post = r.json()["post"]
        r = client.post("/api/sessions/s/approvals", json={"id": "a1", "outcome": "rejected"})
        assert r.status_code == 202
        # The owner takes them in where it takes posts in: the first wins.
        s.inbox.receive()
        assert s.pending_approvals() == []
        events = s.events()
        decided = [e["data"] for e in events if e["type"] == "approval/decided"]
        assert decided == [{"id": "a1", "outcome": "allowed-once", "post": post}]
        rejected = [e["data"] for e in events if e["type"] == "agent/inbox/rejected"]
        assert rejected[0]["decision"] == {"id": "a1", "outcome": "rejected"}
        assert rejected[0]["reason"]["kind"] == "already_decided"
        # Allowed: the tool runs and its result closes the call.
        s.append("tool/result", tool_result(1, 1, "c1", "deleted"))
        assert s.end_step("completed") is False
        s.close_turn()


def test_cancel_decides_what_is_pending_and_answers_the_call(store: inboxlog.Store) -> None:
    with store.create("s") as s:
        asked(s)
        s.cancel()
        events = s.events()
        tail = [e["type"] for e in events[-4:]]
        assert tail == ["approval/decided", "tool/result", "step/end", "turn/end"]
        assert events[-4]["data"] == {"id": "a1", "outcome": "cancelled"}
        assert events[-3]["data"]["error"]["code"] == "TOOL_NOT_ALLOWED"
        with pytest.raises(inboxlog.ProtocolError, match="idle"):
            s.ask_approval("a2", "rm")
        with pytest.raises(inboxlog.NotFoundError, match='"zz"'):
            s.decide_approval("zz", "rejected")


def test_aio_asks_parks_and_resumes(tmp_path: Path) -> None:
    async def run() -> None:
        store = inboxlog.aio.Store.wrap(inboxlog.Store(tmp_path))
        session = await store.create("s")
        try:
            sync = session.sync
            sync.inbox.append("next-turn", m("u1", role="user", content="go"))
            sync.open_turn()
            p = sync.propose_step()
            sync.decide({"kind": "enter", "messages": p["messages"]})
            await session.ask_approval("a1", "search", reason="costs money")
            assert [a["id"] for a in await session.pending_approvals()] == ["a1"]
            await session.park()
            await store.decide("s", "a1", "allowed-once")
            assert await session.approvals_ready()
            resumed = await session.resume_parked()
            assert resumed["decisions"] == [{"id": "a1", "outcome": "allowed-once"}]
        finally:
            await session.close()

    asyncio.run(run())


def test_send_now_moves_pending_input_from_anywhere(store: inboxlog.Store) -> None:
    # SPEC §17.5: from the store and from the console's API, applied once by the owner.
    with store.create("s") as s, TestClient(inboxlog.console.app(store)) as client:
        for id in ("a", "b", "c"):
            s.inbox.append("next-turn", m(id))
        post = store.move_pending("s", "c", "next-step")
        r = client.post(
            "/api/sessions/s/inbox/move", json={"id": "a", "target": "next-turn", "index": 1}
        )
        assert r.status_code == 202, r.text
        for bad in (
            {"id": "b", "target": "later"},
            {"id": "b", "target": "next-step", "index": -1},
        ):
            r = client.post("/api/sessions/s/inbox/move", json=bad)
            assert r.status_code == 400, r.text
        store.move_pending("s", "gone", "next-step")
        s.inbox.receive()
        assert [x["id"] for x in s.inbox.next_turn] == ["b", "a"]
        assert [x["id"] for x in s.inbox.next_step] == ["c"]
        events = s.events()
        moved = [e["data"] for e in events if e["data"].get("outcome") == "moved"]
        assert len(moved) == 2
        inserted = [e["data"] for e in events if e["data"].get("post") == post]
        assert inserted[0]["target"] == "next-step" and inserted[0]["inserted"] == [m("c")]
        rejected = [e["data"] for e in events if e["type"] == "agent/inbox/rejected"]
        assert rejected[0]["move"] == {"id": "gone", "target": "next-step"}
        assert rejected[0]["reason"]["kind"] == "not_found"
        assert inboxlog.fold_consumed_work(events)["droppedUnrun"] is False
