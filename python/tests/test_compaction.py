"""Compaction from Python (SPEC §16): a range of the surface replaced by its summary,
one at a time; the refusals raise their own classes and write nothing; a conflict
writes one ``compaction/end``; a summarizer that raises ends the compaction; a long
tool result pruned; the same through ``inboxlog.aio`` and the CLI."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import m, said, tool_result

import inboxlog
import inboxlog.aio
from inboxlog.__main__ import main


def talked(session: inboxlog.Session) -> None:
    """No turn open: the user (seq 0), the model calling c1 (1), its result (2), the
    model answering (3); a message waiting in ``next-turn``."""
    session.append("user/message", m("u", role="user", content="hello there"))
    call = {"type": "tool-call", "id": "c1", "name": "t", "arguments": "{}"}
    session.append("assistant/message", said(1, 1, "a1", "looking", call))
    session.append("tool/result", tool_result(1, 1, "c1", "found it"))
    session.append("assistant/message", said(1, 1, "a2", "here it is"))
    session.inbox.append("next-turn", m("later"))


def types_since(session: inboxlog.Session, seq: int) -> list[str]:
    return [e["type"] for e in session.events(seq)]


def test_a_compaction_replaces_its_range_and_leaves_the_inbox(tmp_path: Path) -> None:
    store = inboxlog.Store(tmp_path)
    with store.create("s") as s:
        talked(s)
        pending = s.inbox.next_turn[:]
        c = s.begin_compaction(0, 2)
        assert isinstance(c, inboxlog.Compaction)
        assert (c.id, c.turn, c.range, c.shadowed_seqs) == ("compaction-5", None, (0, 2), [0, 1, 2])
        assert c.shadowed_messages[0] == m("u", role="user", content="hello there")
        assert c.shadowed_token_count == 31
        assert s.running_compaction() == "compaction-5"
        with pytest.raises(inboxlog.BusyError) as busy:
            s.begin_compaction(3, 3)
        assert busy.value.code == 17
        with pytest.raises(inboxlog.BusyError):
            s.open_turn()
        done = c.commit("they talked", provider="scripted", model="m1", usage={"inputTokens": 3})
        assert done["compactionId"] == "compaction-5"
        assert done["summary"]["data"]["shadowedSeqs"] == [0, 1, 2]
        assert done["summary"]["data"]["usage"] == {"inputTokens": 3}
        message = done["message"]
        assert message["surfaceOp"] == {"op": "replace", "start": 0, "end": 2}
        assert message["sourceEventSeqs"] == [5, 6, 0, 1, 2]
        assert message["data"]["source"] == {
            "kind": "plugin",
            "plugin": "compact",
            "compactionId": "compaction-5",
        }
        assert s.surface() == [7, 3]
        assert s.messages()[0]["content"] == [{"type": "text", "text": "they talked"}]
        assert s.inbox.next_turn[:] == pending
        assert s.running_compaction() is None
        with pytest.raises(inboxlog.ProtocolError, match="already"):
            c.abort("again")
    assert store.surface("s")["nodes"] == [7, 3]


def test_refusals_write_nothing_and_a_conflict_writes_one_end(tmp_path: Path) -> None:
    with inboxlog.Store(tmp_path).create("s") as s:
        talked(s)
        waiting = s.append(
            "assistant/message",
            said(1, 1, "a3", {"type": "tool-call", "id": "c2", "name": "t", "arguments": "{}"}),
        )["seq"]
        before = s.last_seq
        for start, end, needle in [(0, 99, "not on the surface"), (0, 1, "c1"), (3, waiting, "c2")]:
            with pytest.raises(inboxlog.InvalidInputError, match=needle):
                s.begin_compaction(start, end)
        assert s.last_seq == before
        big = s.append("tool/result", tool_result(1, 1, "c2", "y" * 9000))["seq"]
        c = s.begin_compaction(waiting, big)
        pruned = s.prune(big)
        assert pruned is not None
        with pytest.raises(inboxlog.ConflictError) as conflict:
            c.commit("x", provider="p", model="m")
        assert conflict.value.code == 18
        assert types_since(s, pruned["seq"] + 1) == ["compaction/end"]
        assert s.events(pruned["seq"] + 1)[0]["data"]["error"] == "conflict"


def test_a_summarizer_that_raises_ends_the_compaction(tmp_path: Path) -> None:
    with inboxlog.Store(tmp_path).create("s") as s:
        talked(s)

        def fails(messages: list[Any]) -> str:
            assert len(messages) == 1
            raise RuntimeError("model down")

        with pytest.raises(RuntimeError, match="model down"):
            s.compact(3, 3, fails, provider="p", model="m")
        end = s.events(s.last_seq)[0]
        assert end["type"] == "compaction/end"
        assert end["data"]["error"] == "RuntimeError: model down"
        blocks = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
        done = s.compact(3, 3, lambda _: blocks, provider="p", model="m")
        assert done["message"]["data"]["content"] == blocks
        assert s.surface() == [0, 1, 2, done["message"]["seq"]]


def test_prune_shortens_a_long_result_by_code_points(tmp_path: Path) -> None:
    with inboxlog.Store(tmp_path).create("s") as s:
        talked(s)
        assert s.prune(2) is None
        with pytest.raises(inboxlog.InvalidInputError, match="not a tool/result"):
            s.prune(1)
        call = {"type": "tool-call", "id": "c3", "name": "t", "arguments": "{}"}
        s.append("assistant/message", said(1, 1, "a3", call))
        big = s.append("tool/result", tool_result(1, 1, "c3", "é" * 6000 + "z" * 3000))["seq"]
        pruned = s.prune(big)
        assert pruned is not None and pruned["sourceEventSeqs"] == [big + 1, big]
        kept = pruned["data"]["message"]["content"][0]["content"][0]["text"]
        assert kept.startswith("é" * 4096) and kept.endswith("z" * 1024)
        assert "3880 characters pruned" in kept
        assert s.events(big + 1)[0]["type"] == "compaction/prune"


def test_a_crashed_compaction_is_ended_by_the_next_open(tmp_path: Path) -> None:
    """A process killed with a compaction running: the next open ends it."""
    store = inboxlog.Store(tmp_path)
    with store.create("s") as s:
        talked(s)
    script = (
        "import os, sys, inboxlog\n"
        "s = inboxlog.Store(sys.argv[1]).open('s')\n"
        "c = s.begin_compaction(0, 2)\n"
        "os._exit(0)\n"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env={"PYTHONPATH": str(Path(inboxlog.__file__).parent.parent)},
    )
    assert done.returncode == 0, done.stderr
    report = store.verify("s")
    assert report["compaction"] == "compaction-5" and report["needsRepair"]
    with store.open("s") as s:
        assert s.open_report["repairedCompaction"] == "compaction-5"
        end = s.events(s.last_seq)[0]
        assert end["data"] == {"compactionId": "compaction-5", "turn": None, "error": "interrupted"}
        assert len(s.inbox.next_turn) == 1


def test_aio_compacts_with_a_coroutine_summarizer(tmp_path: Path) -> None:
    async def run() -> None:
        store = inboxlog.aio.Store(tmp_path)
        async with await store.create("s") as s:
            talked(s.sync)

            async def summarize(messages: list[Any]) -> str:
                return f"{len(messages)} messages"

            done = await s.compact(0, 2, summarize, provider="p", model="m")
            assert await s.surface() == [done["message"]["seq"], 3]
            c = await s.begin_compaction(done["message"]["seq"], 3)
            assert isinstance(c, inboxlog.aio.Compaction) and c.turn is None
            assert await s.running_compaction() == c.id
            await c.abort("changed my mind")
            assert await s.running_compaction() is None
            with pytest.raises(inboxlog.InvalidInputError, match="not on the surface"):
                await s.prune(2)  # compacted away

    asyncio.run(run())


def test_the_cli_compacts_a_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = inboxlog.Store(tmp_path)
    with store.create("s") as s:
        talked(s)
    assert main(["compact", str(tmp_path), "s", "--range", "0:2", "--summary", "short"]) == 0
    out = capsys.readouterr().out
    assert "s: compacted 0..2 (3 surface node(s)) into seq 7 (compaction-5)" in out
    events = store.inspect("s")[1]
    assert events[6]["data"]["provider"] == "manual" and events[6]["data"]["model"] == "manual"
    assert store.surface("s")["nodes"] == [7, 3]
    assert main(["compact", str(tmp_path), "s", "--range", "0-2", "--summary", "x"]) == 2
    assert "--range must be S:E" in capsys.readouterr().err
    # A refused range: nothing written, an error named.
    assert main(["compact", str(tmp_path), "s", "--range", "0:2", "--summary", "x"]) != 0
    assert len(store.inspect("s")[1]) == len(events)
