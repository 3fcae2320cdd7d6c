"""`Store.verify`: the checks of `Store.open`, read-only, with the repairs it would make."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import m

import inboxlog


def test_a_healthy_log_reports_counts_and_no_repair(store: inboxlog.Store) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", m("a"))
        s.inbox.append("next-step", m("b"))
    report = store.verify("s")
    assert report == {
        "header": store.inspect("s")[0],
        "events": 2,
        "tornBytes": 0,
        "openTurn": None,
        "openStep": None,
        "parked": False,
        "needsRepair": False,
        "nextTurn": 1,
        "nextStep": 1,
        "pendingToolCalls": 0,
        "compaction": None,
        "offSurface": [],
        "olderShapes": [],
    }


def test_an_open_turn_is_a_repair_and_verify_takes_no_lock(store: inboxlog.Store) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", m("a"))
        s.open_turn()
        p = s.propose_step()
        s.decide({"kind": "enter", "messages": p["messages"]})
        # Beside the live writer: verify neither waits for nor takes the lock.
        live = store.verify("s")
        assert (live["openTurn"], live["openStep"], live["needsRepair"]) == (1, 1, True)
        s.append("note", {})
    with store.open("s") as s:
        assert s.open_report["repairedTurn"] == 1
    assert store.verify("s")["needsRepair"] is False


def test_a_torn_tail_is_reported_and_kept(jsonl: inboxlog.Store, tmp_path: Path) -> None:
    jsonl.create("s").close()
    path = tmp_path / "logs" / "s.jsonl"
    with path.open("ab") as f:
        f.write(b"\0\0\0")
    before = path.read_bytes()
    report = jsonl.verify("s")
    assert (report["tornBytes"], report["needsRepair"]) == (3, True)
    assert path.read_bytes() == before


def test_refuses_with_the_error_open_raises(jsonl: inboxlog.Store, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "s.jsonl"
    path.write_text(
        '{"format":"inboxlog","version":1,"id":"s","createdAt":0}\n'
        '{"type":"agent/inbox/spliced","seq":0,"time":1,'
        '"data":{"target":"next-turn","start":0,"inserted":[{"id":"a"}]}}\n'
        '{"type":"agent/inbox/spliced","seq":1,"time":1,'
        '"data":{"target":"next-step","start":0,"inserted":[{"id":"a"}]}}\n'
    )
    with pytest.raises(inboxlog.CorruptLogError) as verified:
        jsonl.verify("s")
    with pytest.raises(inboxlog.CorruptLogError) as opened:
        jsonl.open("s")
    assert str(verified.value) == str(opened.value)
    assert "invalid persisted inbox splice at session seq 1" in str(opened.value)
    assert (verified.value.line, verified.value.seq) == (3, 1)

    newer = tmp_path / "logs" / "n.jsonl"
    newer.write_text('{"format":"inboxlog","version":9,"id":"n","createdAt":0}\n')
    with pytest.raises(inboxlog.FormatUnsupportedError, match="newer inboxlog") as err:
        jsonl.verify("n")
    assert (err.value.path, err.value.line, err.value.seq) == (str(newer), 1, None)
