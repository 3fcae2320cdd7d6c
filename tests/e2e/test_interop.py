"""One log, two layers: the Python wheel and the C ABI (through ctypes) read and write
the same JSONL files, share the exclusive writer lock, and agree on the inbox.

Run by `make test` after the C library and the wheel are built:
    .venv/bin/pytest -W error tests/e2e
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import inboxlog
from conftest import C

LOCKED = 3
OK = 0


def test_c_repairs_and_continues_a_log_python_left_mid_turn(c: C, tmp_path: Path) -> None:
    store = inboxlog.Store(tmp_path, durability="sync")
    s = store.create("shared")
    for i in range(3):
        s.inbox.append("next-turn", {"id": f"m{i}", "text": f"task {i}", "n": 2**60 + i})
    s.open_turn()
    p = s.propose_step()
    s.decide({"kind": "enter", "messages": p["messages"]})

    cstore = c.handle("inboxlog_store_open_jsonl", str(tmp_path).encode(), b"sync")
    try:
        # Python holds the writer: C is refused at once, as a second process would be.
        status, error = c.call(
            "inboxlog_session_open", cstore, b"shared", ctypes.byref(ctypes.c_void_p())
        )
        assert (status, error["kind"]) == (LOCKED, "locked"), error
        s.close()  # the "crash": the turn stays open in the file

        cs = c.handle("inboxlog_session_open", cstore, b"shared")
        assert c.string("inboxlog_session_open_report", cs) == {
            "tornBytes": 0,
            "repairedTurn": 1,
            "repairedCompaction": None,
        }
        # The C side replayed the same inbox, big integers and key order intact.
        assert c.string("inboxlog_inbox_next_turn", cs) == [
            {"id": "m1", "text": "task 1", "n": 2**60 + 1},
            {"id": "m2", "text": "task 2", "n": 2**60 + 2},
        ]
        assert c.call("inboxlog_inbox_append", cs, b"next-step", b'{"id":"from-c"}')[0] == OK
        assert c.call("inboxlog_session_close", cs)[0] == OK
        c.lib.inboxlog_session_free(cs)
    finally:
        c.lib.inboxlog_store_free(cstore)

    # Python reopens what C wrote: the repair, then C's splice; nothing to repair again.
    with store.open("shared") as again:
        # One spelling in both bindings.
        assert again.open_report == {
            "tornBytes": 0,
            "repairedTurn": None,
            "repairedCompaction": None,
        }
        types = [e["type"] for e in again.events()]
        assert types[-3:] == ["step/end", "turn/end", "agent/inbox/spliced"]
        assert again.events()[-2]["data"]["reason"] == {"kind": "interrupted"}
        assert [m["id"] for m in again.inbox.next_step] == ["from-c"]
        assert [m["id"] for m in again.inbox.next_turn] == ["m1", "m2"]
        fold = inboxlog.fold_consumed_work(again.events())
        assert fold["end"]["seq"] == types.index("turn/end")


def test_python_reads_a_session_c_created(c: C, tmp_path: Path) -> None:
    cstore = c.handle("inboxlog_store_open_jsonl", str(tmp_path).encode(), b"none")
    try:
        cs = c.handle("inboxlog_session_create", cstore, b"from-c", b'{"cwd":"/w"}')
        assert c.call("inboxlog_inbox_append", cs, b"next-turn", b'{"id":"a","z":1,"y":2}')[0] == OK
        assert c.call("inboxlog_session_close", cs)[0] == OK
        c.lib.inboxlog_session_free(cs)
    finally:
        c.lib.inboxlog_store_free(cstore)
    store = inboxlog.Store(tmp_path)
    header, events = store.inspect("from-c")
    assert header["cwd"] == "/w"
    with store.open("from-c") as s:
        assert list(s.inbox.next_turn[0]) == ["id", "z", "y"]
        assert s.events() == events


def test_a_conversation_a_c_host_wrote_reads_the_same_everywhere(c: C, tmp_path: Path) -> None:
    """SPEC §15: a C host writes a model response with a tool call, dispatches the tool
    and dies inside it; Python's open answers the call, and the surface C reads from
    its store equals the one Python reads."""
    source = '{"kind":"model","provider":"c","model":"host"}'
    reply = (
        '{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":['
        '{"type":"text","text":"Looking."},'
        '{"type":"tool-call","id":"k1","name":"lookup","arguments":"{\\"q\\":1}"}],'
        f'"source":{source}}}}}'
    )
    cstore = c.handle("inboxlog_store_open_jsonl", str(tmp_path).encode(), b"sync")
    try:
        cs = c.handle("inboxlog_session_create", cstore, b"host", None)
        assert (
            c.call(
                "inboxlog_inbox_append",
                cs,
                b"next-turn",
                b'{"id":"q","role":"user","content":"find"}',
            )[0]
            == OK
        )
        turn = ctypes.c_uint64()
        assert c.call("inboxlog_session_open_turn", cs, None, ctypes.byref(turn))[0] == OK
        c.string("inboxlog_session_propose_step", cs)
        c.string(
            "inboxlog_session_decide",
            cs,
            b'{"kind":"enter","messages":[{"id":"q","role":"user","content":"find"}]}',
            None,
        )
        c.string("inboxlog_session_append", cs, b"assistant/message", reply.encode(), None)
        call = b'{"turn":1,"step":1,"callId":"k1","name":"lookup","arguments":"{\\"q\\":1}"}'
        c.string("inboxlog_session_append", cs, b"tool/call", call, None)
        c.lib.inboxlog_session_free(cs)  # the host dies inside the tool
        store = inboxlog.Store(tmp_path)
        with store.open("host") as s:
            assert s.open_report["repairedTurn"] == 1
            python_side = {"nodes": s.surface(), "messages": s.messages()}
        c_side = c.string("inboxlog_store_surface", cstore, b"host")
    finally:
        c.lib.inboxlog_store_free(cstore)
    assert c_side == python_side == store.surface("host")
    answer = python_side["messages"][-1]["content"][0]
    assert answer["toolCallId"] == "k1" and answer["isError"] is True
    assert [m["role"] for m in python_side["messages"]] == ["user", "assistant", "user"]
