"""The C ABI and the wheel print the same JSON for every shared shape.

Both faces print through the core's one wire layer (`inboxlog::wire`); this test
holds them to it. The same sequence is driven through the C library (ctypes) and the
wheel, and every C string must equal the compact `json.dumps` of the dict Python
returned for the same value: proposal, decided, open report, verify report,
baseline, inspect, fold, events, inbox notifications and error fields.
"""

from __future__ import annotations

import ctypes
import json
import shutil
from pathlib import Path
from typing import Any

import inboxlog
import pytest
from conftest import OK, C

ABSENT = -1
# Big integers, key order, nesting, escapes and non-ASCII text, as Python writes them.
MESSAGES = [
    {"id": "m1", "z": 1, "a": [2**70, {"nested": True}], "text": 'say "hi"\n\té'},
    {"id": "m2", "role": "user", "n": -(2**60)},
]
STEER = {"id": "s1", "text": "\u2028 steer \\ now"}


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def b(value: Any) -> bytes:
    return compact(value).encode()


def error_fields(e: inboxlog.InboxlogError) -> str:
    """The exception as the C error JSON spells it: code, kind, message, location."""
    fields: dict[str, Any] = {"code": e.code, "kind": e.kind, "message": str(e)}
    for key in ("session", "path", "line", "offset", "seq"):
        if getattr(e, key) is not None:
            fields[key] = getattr(e, key)
    return compact(fields)


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of one log that its writer left mid-turn: one for each face."""
    py_root, c_root = tmp_path / "py", tmp_path / "c"
    store = inboxlog.Store(py_root)
    with store.create("w", cwd="/work", agent_preset="coder") as s:
        s.append("host/note", {"k": [2**64, "ü"], "a": None}, ignorable=True)
        for m in MESSAGES:
            s.inbox.append("next-turn", m)
        s.open_turn(trigger={"kind": "message"})
        s.decide({"kind": "enter", "messages": s.propose_step()["messages"]})
    c_root.mkdir()
    shutil.copy(py_root / "w.jsonl", c_root / "w.jsonl")
    return py_root, c_root


class CSession:
    """One session opened through the C library, closed and freed at exit."""

    def __init__(self, c: C, root: Path, id: str) -> None:
        self.c = c
        self.store = c.handle("inboxlog_store_open_jsonl", str(root).encode(), b"sync")
        self.s = c.handle("inboxlog_session_open", self.store, id.encode())

    def text(self, name: str, *args: Any) -> str:
        return self.c.text(name, self.s, *args)

    def ok(self, name: str, *args: Any) -> None:
        status, error = self.c.call(name, self.s, *args)
        assert status == OK, error

    def close(self) -> None:
        self.ok("inboxlog_session_close")
        self.c.lib.inboxlog_session_free(self.s)
        self.c.lib.inboxlog_store_free(self.store)


def test_both_faces_print_identical_json(c: C, stores: tuple[Path, Path]) -> None:
    py_root, c_root = stores
    py_store = inboxlog.Store(py_root)
    c_store = c.handle("inboxlog_store_open_jsonl", str(c_root).encode(), b"sync")
    try:
        # Read-only checks of the two identical files: verify and inspect.
        py_verify = py_store.verify("w")
        assert py_verify["needsRepair"] is True
        assert c.text("inboxlog_store_verify", c_store, b"w") == compact(py_verify)
        header, events = py_store.inspect("w")
        inspected = c.text("inboxlog_store_inspect", c_store, b"w")
        assert inspected == compact({"header": header, "events": events})
        fold_c = c.text("inboxlog_fold_consumed_work", b(events))
        assert fold_c == compact(inboxlog.fold_consumed_work(events))
    finally:
        c.lib.inboxlog_store_free(c_store)

    # Opening repairs each copy the same way.
    py = py_store.open("w")
    cs = CSession(c, c_root, "w")
    try:
        assert cs.text("inboxlog_session_open_report") == compact(py.open_report)
        assert py.open_report == {"tornBytes": 0, "repairedTurn": 1, "repairedCompaction": None}
        assert cs.text("inboxlog_session_baseline", ABSENT) == compact(py.baseline())
        assert cs.text("inboxlog_session_baseline", 0) == compact(py.baseline(at=0))

        # The same live sequence on both: notifications, proposal, decided.
        notices: list[Any] = []
        py.on_inbox(notices.append)
        cs.ok("inboxlog_session_watch")
        py.inbox.append("next-step", STEER)
        cs.ok("inboxlog_inbox_append", b"next-step", b(STEER))
        polled = json.loads(cs.text("inboxlog_session_poll"))
        assert [list(n) for n in polled] == [["event"], ["inbox"]]
        assert compact(polled[1]["inbox"]) == compact(notices[0])

        turn = ctypes.c_uint64()
        cs.ok("inboxlog_session_open_turn", None, ctypes.byref(turn))
        assert turn.value == py.open_turn() == 2
        proposal = py.propose_step()
        assert cs.text("inboxlog_session_propose_step") == compact(proposal)
        enter = {"kind": "enter", "messages": proposal["messages"]}
        decided = py.decide(enter)
        assert cs.text("inboxlog_session_decide", b(enter), None) == compact(decided)
        again = ctypes.c_bool()
        cs.ok("inboxlog_session_end_step", b"completed", None, ctypes.byref(again))
        assert again.value is py.end_step("completed") is False
        closed = py.close_turn()
        assert cs.text("inboxlog_session_close_turn", None) == compact(closed)

        # A reject, and a failed turn whose error object carries host keys.
        py.inbox.append("next-turn", {"id": "r"})
        cs.ok("inboxlog_inbox_append", b"next-turn", b'{"id":"r"}')
        cs.ok("inboxlog_session_open_turn", None, ctypes.byref(turn))
        py.open_turn()
        assert cs.text("inboxlog_session_propose_step") == compact(py.propose_step())
        reject = {"kind": "reject"}
        assert cs.text("inboxlog_session_decide", b(reject), None) == compact(py.decide(reject))
        failure = {"message": "boom", "code": "E1", "detail": {"retry": 2**60}}
        py.open_turn()
        py.fail(failure)
        cs.ok("inboxlog_session_open_turn", None, ctypes.byref(turn))
        cs.ok("inboxlog_session_fail", b(failure), None)
        py_events, c_events = (
            py.events(),
            json.loads(cs.text("inboxlog_session_events", 0)),
        )
        # Times differ between the two runs; everything else is the same.
        for e in py_events + c_events:
            e["time"] = 0
        assert compact(c_events) == compact(py_events)
        assert compact(inboxlog.fold_consumed_work(py_events)) == c.text(
            "inboxlog_fold_consumed_work", b(c_events)
        )

        # A core error: the same fields in the C error JSON and on the exception.
        status, text = c.call_text(
            "inboxlog_session_propose_step", cs.s, ctypes.byref(ctypes.c_void_p())
        )
        with pytest.raises(inboxlog.ProtocolError) as err:
            py.propose_step()
        assert (status, text) == (err.value.code, error_fields(err.value))
    finally:
        py.close()
        cs.close()


def test_located_errors_have_the_same_fields(c: C, tmp_path: Path) -> None:
    # A version 1 log (no checksums, so the bad line is read, not cut as a torn tail).
    (tmp_path / "bad.jsonl").write_text(
        '{"format":"inboxlog","version":1,"id":"bad","createdAt":0}\n'
        '{"type":"host/x","seq":5,"time":1,"data":{}}\n'
    )
    c_store = c.handle("inboxlog_store_open_jsonl", str(tmp_path).encode(), b"sync")
    try:
        status, text = c.call_text(
            "inboxlog_session_open", c_store, b"bad", ctypes.byref(ctypes.c_void_p())
        )
    finally:
        c.lib.inboxlog_store_free(c_store)
    with pytest.raises(inboxlog.CorruptLogError) as err:
        inboxlog.Store(tmp_path).open("bad")
    assert err.value.line == 2 and err.value.path is not None
    assert (status, text) == (err.value.code, error_fields(err.value))
