"""Observers: GIL re-acquired for callbacks, failures contained as warnings, no
re-entrant mutation."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from conftest import m

import inboxlog


def test_a_failing_callback_is_warned_and_contained(session: inboxlog.Session) -> None:
    seen: list[str] = []

    def broken(event: dict[str, Any]) -> None:
        raise ValueError("observer bug")

    session.on_event(broken)
    session.on_event(lambda e: seen.append(e["type"]))
    session.on_inbox(lambda n: 1 / 0)
    with pytest.warns(inboxlog.ObserverWarning) as record:
        session.inbox.append("next-turn", m("a"))
    messages = [str(w.message) for w in record]
    assert any(
        "on_event callback test_a_failing_callback_is_warned_and_contained.<locals>.broken "
        "raised ValueError: observer bug" in msg
        for msg in messages
    ), messages
    assert any("on_inbox callback" in x and "ZeroDivisionError" in x for x in messages)
    # Committed anyway, and the later observer still ran.
    assert seen == ["agent/inbox/spliced"]
    assert session.inbox.next_turn == [m("a")]
    assert record[0].filename == __file__


def test_warnings_as_errors_become_unraisable(session: inboxlog.Session) -> None:
    session.on_event(lambda e: 1 / 0)
    hooked: list[Any] = []
    import sys

    old = sys.unraisablehook
    sys.unraisablehook = hooked.append
    try:
        session.inbox.append("next-turn", m("a"))  # filterwarnings=error is in force
    finally:
        sys.unraisablehook = old
    assert len(hooked) == 1 and isinstance(hooked[0].exc_value, inboxlog.ObserverWarning)
    assert session.inbox.next_turn == [m("a")]


def test_observer_failures_are_warned_then_taken_and_bounded(session: inboxlog.Session) -> None:
    assert issubclass(inboxlog.ObserverWarning, RuntimeWarning)
    assert session.take_observer_failures() == []

    def broken(event: dict[str, Any]) -> None:
        raise KeyError(event["seq"])

    session.on_event(broken)
    with pytest.warns(inboxlog.ObserverWarning, match="raised KeyError: 0"):
        committed = session.append("note", {"n": 0})
    # The call returned its result and stayed committed.
    assert committed["seq"] == 0 and session.last_seq == 0
    assert session.take_observer_failures() == [
        (
            "event observer failed on seq 0: on_event callback test_observer_failures_are_"
            "warned_then_taken_and_bounded.<locals>.broken raised KeyError: 0"
        )
    ]
    assert session.take_observer_failures() == []

    # A host that never takes them holds the last 64 and a count, not all of them.
    def append_100() -> None:
        for n in range(1, 101):
            session.append("note", {"n": n})

    with pytest.warns(inboxlog.ObserverWarning) as record:
        append_100()
    assert len(record) == 100
    failures = session.take_observer_failures()
    assert len(failures) == 65
    assert failures[0] == "36 earlier observer failures were dropped (the last 64 are kept)"
    assert failures[1].startswith("event observer failed on seq 37:")
    assert failures[-1].endswith("raised KeyError: 100")


def test_observers_may_read_but_not_mutate(session: inboxlog.Session) -> None:
    seen: list[Any] = []
    refused: list[BaseException] = []

    def observer(notice: dict[str, Any]) -> None:
        seen.append((notice["type"], [x["id"] for x in session.inbox.next_turn]))
        for mutate in (
            lambda: session.inbox.append("next-turn", m("x")),
            lambda: session.inbox.clear(),
            lambda: session.append("note", {}),
            lambda: session.open_turn(),
        ):
            try:
                mutate()
            except inboxlog.ReentrantError as e:
                refused.append(e)

    session.on_inbox(observer)
    session.inbox.append("next-turn", m("a"))
    session.inbox.replace("a", m("b"))
    assert seen == [
        ("agent/inbox/inserted", ["a"]),
        ("agent/inbox/discarded", ["b"]),
        ("agent/inbox/inserted", ["b"]),
    ]
    assert len(refused) == 12
    assert [e["type"] for e in session.events()] == ["agent/inbox/spliced"] * 2


def test_another_session_may_be_mutated_from_an_observer(store: inboxlog.Store) -> None:
    with store.create("a") as a, store.create("b") as b:
        a.on_event(lambda e: b.append("mirror", {"seq": e["seq"]}))
        a.append("note", 1)
        a.append("note", 2)
        assert [e["data"] for e in b.events()] == [{"seq": 0}, {"seq": 1}]


def test_observer_runs_on_the_mutating_thread(session: inboxlog.Session) -> None:
    threads: list[str] = []
    session.on_event(lambda e: threads.append(threading.current_thread().name))
    worker = threading.Thread(target=lambda: session.append("x", 1), name="worker")
    worker.start()
    worker.join()
    session.append("x", 2)
    assert threads == ["worker", threading.current_thread().name]
