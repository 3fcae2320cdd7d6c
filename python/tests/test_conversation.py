"""The conversation from Python (SPEC §15): shapes checked on append, the surface and
its messages from a session, from a store without owning it, from ``inboxlog.aio``,
the CLI's transcript and the HTTP API; tool calls answered after a real ``kill -9``."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import inboxlog
import inboxlog.console
from inboxlog import aio
from inboxlog.__main__ import main

SOURCE = {"kind": "model", "provider": "scripted", "model": "m1"}


def assistant(turn: int, text: str, *calls: tuple[str, str, str]) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [{"type": "tool-call", "id": i, "name": n, "arguments": a} for i, n, a in calls]
    return {
        "turn": turn,
        "step": 1,
        "message": {"id": f"a-{text}", "role": "assistant", "content": content, "source": SOURCE},
        "usage": {"inputTokens": 10, "outputTokens": 3},
    }


def result(turn: int, call: str, text: str, error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool-result",
        "toolCallId": call,
        "content": [{"type": "text", "text": text}],
    }
    if error:
        block["isError"] = True
    return {
        "turn": turn,
        "step": 1,
        "message": {
            "id": f"r-{call}",
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": call},
        },
    }


def one_turn(s: inboxlog.Session) -> int:
    """A user's question entered in a step of a new turn; returns the turn."""
    s.inbox.append("next-turn", {"id": "q1", "role": "user", "content": "weather in Paris?"})
    turn = s.open_turn()
    s.decide({"kind": "enter", "messages": s.propose_step()["messages"]})
    return turn


def test_the_surface_and_its_messages_from_a_session_and_a_store(store: inboxlog.Store) -> None:
    with store.create("c") as s:
        turn = one_turn(s)
        s.append(
            "assistant/message", assistant(turn, "checking", ("w1", "weather", '{"city":"Paris"}'))
        )
        s.append(
            "tool/call",
            {"turn": turn, "step": 1, "callId": "w1", "name": "weather", "arguments": "{}"},
        )
        s.append("tool/result", result(turn, "w1", "sunny"))
        s.append(
            "assistant/message",
            {
                **assistant(turn, "empty"),
                "message": {"id": "e", "role": "assistant", "content": [], "source": SOURCE},
            },
        )
        seqs = s.surface()
        messages = s.messages()
        assert [e["type"] for e in s.events() if e["seq"] in seqs] == [
            "user/message",
            "assistant/message",
            "tool/result",
            "assistant/message",
        ]
        # The empty assistant message is on the surface but projects nothing.
        assert [m["id"] for m in messages] == ["q1", "a-checking", "r-w1"]
        assert messages[1]["content"][1]["arguments"] == '{"city":"Paris"}'
        end = s.end_step("completed")
        assert not end
        s.close_turn()
    assert store.surface("c") == {"nodes": seqs, "messages": messages}
    assert store.messages("c") == messages
    with pytest.raises(inboxlog.NotFoundError):
        store.surface("absent")


def test_shapes_are_checked_on_append_and_nothing_is_written(store: inboxlog.Store) -> None:
    with store.create("c") as s:
        turn = one_turn(s)
        last = s.last_seq
        with pytest.raises(inboxlog.InvalidInputError, match="assistant/message data"):
            s.append("assistant/message", {"text": "an older shape"})
        with pytest.raises(inboxlog.InvalidInputError, match="exactly one tool-result block"):
            s.append(
                "tool/result",
                {
                    **result(turn, "x", "y"),
                    "message": {
                        "id": "r",
                        "role": "user",
                        "content": [],
                        "source": {"kind": "tool", "callId": "x"},
                    },
                },
            )
        with pytest.raises(inboxlog.InvalidInputError, match=r"surface rule.*not on the surface"):
            s.append(
                "user/message",
                {"id": "s"},
                surface_op={"op": "replace", "start": 99, "end": 99},
                source_event_seqs=[1],
            )
        assert s.last_seq == last
        # Without a surfaceOp the generic append writes "append".
        event = s.append("assistant/message", assistant(turn, "ok"))
        assert event["surfaceOp"] == "append"


def test_a_replace_shortens_what_the_model_sees(store: inboxlog.Store) -> None:
    with store.create("c") as s:
        turn = one_turn(s)
        s.append("assistant/message", assistant(turn, "calling", ("c1", "read", "{}")))
        big = s.append("tool/result", result(turn, "c1", "x" * 100))["seq"]
        short = result(turn, "c1", "x… (shortened)")
        s.append(
            "tool/result",
            short,
            surface_op={"op": "replace", "start": big, "end": big},
            source_event_seqs=[big],
        )
        assert s.messages()[-1]["content"][0]["content"][0]["text"] == "x… (shortened)"
        changed = {**short, "meta": {"other": True}}
        top = s.surface()[-1]
        with pytest.raises(inboxlog.InvalidInputError, match="in more than the tool-result"):
            s.append(
                "tool/result",
                changed,
                surface_op={"op": "replace", "start": top, "end": top},
                source_event_seqs=[top],
            )


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import inboxlog
    store = inboxlog.Store(sys.argv[1], durability="sync")
    s = store.create("k")
    s.inbox.append("next-turn", {"id": "q", "role": "user", "content": "go"})
    turn = s.open_turn()
    s.decide({"kind": "enter", "messages": s.propose_step()["messages"]})
    source = {"kind": "model", "provider": "scripted", "model": "m1"}
    s.append("assistant/message", {"turn": turn, "step": 1, "message": {
        "id": "a", "role": "assistant", "source": source, "content": [
            {"type": "tool-call", "id": "ran", "name": "pay", "arguments": "{}"},
            {"type": "tool-call", "id": "later", "name": "pay", "arguments": "{}"}]}})
    s.append("tool/call", {"turn": turn, "step": 1, "callId": "ran", "name": "pay",
                           "arguments": "{}"})
    print("inside the tool", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_worker_killed_inside_a_tool_leaves_every_call_answered(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    child = subprocess.run(
        [sys.executable, "-P", "-c", KILLED, str(root)], capture_output=True, text=True, check=False
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert child.stdout == "inside the tool\n"
    store = inboxlog.Store(root)
    assert store.verify("k")["pendingToolCalls"] == 2
    with store.open("k") as s:
        assert s.open_report["repairedTurn"] == 1
        tail = s.events(7)
    assert [e["type"] for e in tail] == ["tool/result", "tool/result", "step/end", "turn/end"]
    ran, later = (e["data"] for e in tail[:2])
    assert ran["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert tail[0]["sourceEventSeqs"] == [6]
    assert ran["message"]["id"] == "interrupted-tool-result-ran-7"
    assert later["error"] == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert "sourceEventSeqs" not in tail[1]
    # What the model sees next: the call answered, as a tool result it understands.
    messages = store.messages("k")
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "user"]
    assert messages[2]["content"][0]["isError"] is True
    # Opening again adds nothing.
    with store.open("k") as s:
        assert s.events(11) == []


def test_the_cli_prints_the_transcript(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = inboxlog.Store(tmp_path)
    with store.create("c") as s:
        turn = one_turn(s)
        s.append(
            "assistant/message",
            assistant(turn, "let me see", ("w1", "weather", '{"city":"Paris"}')),
        )
        s.append("tool/result", result(turn, "w1", "no such city", error=True))
    assert main(["transcript", str(tmp_path), "c"]) == 0
    assert capsys.readouterr().out == (
        "user: weather in Paris?\n"
        "assistant: let me see\n"
        'assistant calls weather({"city":"Paris"}) [w1]\n'
        "tool w1 ERROR: no such city\n"
    )
    assert main(["transcript", str(tmp_path), "c", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == store.surface("c")
    assert main(["transcript", str(tmp_path), "absent"]) == 1


def test_the_http_api_serves_the_surface(store: inboxlog.Store) -> None:
    with store.create("c") as s:
        turn = one_turn(s)
        s.append("assistant/message", assistant(turn, "hi"))
    with TestClient(inboxlog.console.app(store)) as client:
        answer = client.get("/api/sessions/c/surface")
        assert answer.status_code == 200
        assert answer.json() == store.surface("c")
        assert client.get("/api/sessions/absent/surface").status_code == 404


def test_aio_reads_the_surface(tmp_path: Path) -> None:
    async def go() -> None:
        store = aio.Store(tmp_path, durability="none")
        async with await store.create("c") as s:
            turn = await s.open_turn()
            await s.append("assistant/message", assistant(turn, "hi"))
            assert await s.surface() == [1]
            assert [m["id"] for m in await s.messages()] == ["a-hi"]
        assert (await store.surface("c"))["nodes"] == [1]
        assert [m["id"] for m in await store.messages("c")] == ["a-hi"]

    asyncio.run(go())


def test_verify_names_pending_calls_older_shapes_and_ops_off_the_surface(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A call left pending in an open turn, which opening will answer; and a log of an
    earlier release (format version 1, no checksums, written by hand) holding an
    assistant/message of an older shape and a replace of a seq not on the surface: both
    open, and verify names what each holds."""
    store = inboxlog.Store(tmp_path)
    with store.create("pending") as s:
        turn = one_turn(s)
        s.append("assistant/message", assistant(turn, "calling", ("c9", "t", "{}")))
    lines = [
        {"format": "inboxlog", "version": 1, "id": "v1", "createdAt": 1},
        {"type": "assistant/message", "seq": 0, "time": 1, "data": {"text": "old"}},
        {
            "type": "user/message",
            "seq": 1,
            "time": 1,
            "data": {"id": "s"},
            "surfaceOp": {"op": "replace", "start": 7, "end": 7},
            "sourceEventSeqs": [0],
        },
    ]
    lines[1]["surfaceOp"] = "append"
    (tmp_path / "v1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["verify", str(tmp_path), "pending", "v1"]) == 0
    out = capsys.readouterr().out
    assert "pending: ok, 6 events, 0 pending, droppedUnrun=false; open will repair: " in out
    assert "answer 1 tool call(s), close interrupted turn 1" in out
    assert "v1: ok, 2 events" in out
    assert "  seq 1: kept off the surface: user/message seq 1 replaces 7..7" in out
    assert "  seq 0: an older shape: assistant/message data" in out
    assert store.surface("v1")["nodes"] == [0]
    assert store.messages("v1") == []  # the older shape has no message to project
