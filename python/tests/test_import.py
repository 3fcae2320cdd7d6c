"""Importing the reference harness's logs (ARCHITECTURE.md#import): `inboxlog.import_reference`
and `python -m inboxlog import`."""

from __future__ import annotations

import faulthandler
import os
import threading
from pathlib import Path

import pytest

import inboxlog
from inboxlog.__main__ import main

FIXTURES = Path(__file__).resolve().parents[2] / "core" / "tests" / "fixtures" / "reference"
T = 1_700_000_000_000


def chunk(seq: int, time: int, text: str) -> dict[str, object]:
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": time,
        "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}},
    }


def test_a_reference_log_becomes_a_session(store: inboxlog.Store) -> None:
    with inboxlog.import_reference(FIXTURES / "text.jsonl", store) as s:
        assert s.id == "ref-text"
        assert s.header["cwd"] == "/work/app"
        assert s.header["agentPreset"] == "default"
        events = s.events()
        assert len(events) == 13
        assert events[5:9] == [
            chunk(5, T + 10, "Hel"),
            chunk(6, T + 14, "lo, "),
            chunk(7, T + 14, '"wörld"'),
            chunk(8, T + 25, "!\n"),
        ]
        assert events[4]["surfaceOp"] == "append"
        assert [m["id"] for m in s.inbox.next_turn] == ["m2"]
        assert s.open_report["repairedTurn"] is None
        assert s.open_turn() == 2
    with store.open("ref-text") as again:
        assert again.events()[:13] == events


def test_a_tool_call_run_keeps_id_and_name() -> None:
    store = inboxlog.Store.memory()
    s = inboxlog.import_reference(str(FIXTURES / "tool-call-named.jsonl"), store)
    assert [e["data"]["chunk"] for e in s.events()[2:4]] == [
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "call_1",
            "name": "read_file",
            "argumentsDelta": '{"pa',
        },
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "call_1",
            "name": "read_file",
            "argumentsDelta": 'th":"a.txt"}',
        },
    ]


def test_a_zstd_log_imports_like_the_plain_one() -> None:
    store = inboxlog.Store.memory()
    plain = inboxlog.import_reference(FIXTURES / "text.jsonl", store)
    zipped = inboxlog.import_reference(FIXTURES / "text.jsonl.zstd", store)
    assert zipped.id == "text-zstd"
    assert zipped.events() == plain.events()


def test_ids_are_derived_or_chosen(jsonl: inboxlog.Store) -> None:
    derived = inboxlog.import_reference(FIXTURES / "fork.jsonl", jsonl)
    assert derived.id.startswith("team_fork_1-")
    assert derived.header["parentSession"].startswith("team_main-")
    assert derived.header["seedLength"] == 5
    assert [m["id"] for m in derived.inbox.next_turn] == ["c2"]
    chosen = inboxlog.import_reference(FIXTURES / "fork.jsonl", jsonl, id="child")
    assert chosen.id == "child"
    with pytest.raises(inboxlog.InvalidInputError, match="session id"):
        inboxlog.import_reference(FIXTURES / "fork.jsonl", jsonl, id="../child")
    assert sorted(h["id"] for h in jsonl.list()) == sorted([derived.id, "child"])


def test_a_broken_log_is_refused_naming_its_line(jsonl: inboxlog.Store) -> None:
    with pytest.raises(inboxlog.InvalidInputError, match=r"line 4: .*3 gaps in \"dt\"") as e:
        inboxlog.import_reference(FIXTURES / "broken-dt.jsonl", jsonl)
    assert e.value.kind == "invalid_input"
    with pytest.raises(inboxlog.InvalidInputError, match="line 4: invalid persisted inbox"):
        inboxlog.import_reference(FIXTURES / "broken-splice.jsonl", jsonl)
    assert jsonl.list() == []


def test_an_existing_session_is_not_overwritten(jsonl: inboxlog.Store) -> None:
    inboxlog.import_reference(FIXTURES / "text.jsonl", jsonl).close()
    with pytest.raises(inboxlog.AlreadyExistsError):
        inboxlog.import_reference(FIXTURES / "reasoning.jsonl", jsonl, id="ref-text")
    assert len(jsonl.inspect("ref-text")[1]) == 13


def test_wrong_argument_types_are_type_errors() -> None:
    with pytest.raises(TypeError):
        inboxlog.import_reference(FIXTURES / "text.jsonl", "not a store")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        inboxlog.import_reference(42, inboxlog.Store.memory())  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_the_gil_is_released_while_importing(tmp_path: Path) -> None:
    """The import blocks in the core until a writer opens and fills the pipe; the main
    thread can only be that writer if the importing thread released the GIL."""
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    store = inboxlog.Store.memory()
    imported: list[inboxlog.Session] = []
    t = threading.Thread(target=lambda: imported.append(inboxlog.import_reference(pipe, store)))
    # A held GIL would deadlock this test: end the process loudly instead of hanging.
    faulthandler.dump_traceback_later(60, exit=True)
    try:
        t.start()
        with open(pipe, "wb") as w:
            w.write((FIXTURES / "reasoning.jsonl").read_bytes())
        t.join()
    finally:
        faulthandler.cancel_dump_traceback_later()
    assert [s.id for s in imported] == ["ref-reasoning"]


def test_the_import_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "logs"
    assert main(["import", str(root), str(FIXTURES / "text.jsonl")]) == 0
    out = capsys.readouterr().out
    assert out == f"ref-text: imported 13 events from {FIXTURES / 'text.jsonl'}\n"
    assert main(["import", str(root), str(FIXTURES / "interrupted.jsonl"), "--id", "cut"]) == 0
    assert "cut: imported 6 events" in capsys.readouterr().out.replace("\n", "")
    assert main(["verify", str(root)]) == 0
    assert "ref-text: ok, 13 events, 1 pending" in capsys.readouterr().out


def test_the_import_command_reports_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "logs"
    assert main(["import", str(root), str(FIXTURES / "broken-invariant.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("inboxlog: invalid_input: cannot import ")
    assert "line 4: step/start" in err
    assert list(root.iterdir()) == []
    assert main(["import", str(root), str(FIXTURES / "text.jsonl")]) == 0
    assert main(["import", str(root), str(FIXTURES / "text.jsonl")]) == 1
    assert "already_exists" in capsys.readouterr().err
