"""One session shared by several Python threads; core calls release the GIL."""

from __future__ import annotations

import threading
import time
from typing import Any

from conftest import m

import inboxlog


def test_concurrent_mutations_serialize(session: inboxlog.Session) -> None:
    notices: list[str] = []
    session.on_inbox(lambda n: notices.append(n["message"]["id"]))
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(150):
                session.inbox.append("next-turn", m(f"t{k}-{i}"))
                if i % 3 == 0:
                    assert session.inbox.remove(f"t{k}-{i}")
                session.append("tick", {"k": k, "i": i})
                session.inbox.has_pending  # noqa: B018 - a read under load
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    events = session.events()
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert len(events) == 4 * (150 + 50 + 150)
    assert len(session.inbox.next_turn) == 4 * 100
    assert len(notices) == 4 * (150 + 50)
    for k in range(4):  # each thread's own order is kept
        mine = [x["id"] for x in session.inbox.next_turn if x["id"].startswith(f"t{k}-")]
        assert mine == [f"t{k}-{i}" for i in range(150) if i % 3]


def test_a_blocked_call_releases_the_gil(session: inboxlog.Session) -> None:
    """Thread B waits inside the core (on publication, held by thread A's observer);
    the main thread must still run Python to release A — it could not if B held the
    GIL while waiting."""
    entered = threading.Event()
    gate = threading.Event()

    def observer(event: dict[str, Any]) -> None:
        if event["data"] == "first":
            entered.set()
            gate.wait(10)

    session.on_event(observer)
    a = threading.Thread(target=session.append, args=("note", "first"))
    b = threading.Thread(target=session.append, args=("note", "second"))
    a.start()
    assert entered.wait(10)
    b.start()
    time.sleep(0.2)
    gate.set()
    a.join(10)
    b.join(10)
    assert not a.is_alive() and not b.is_alive()
    assert [e["data"] for e in session.events()] == ["first", "second"]


def test_sessions_are_usable_from_threads_with_a_jsonl_store(jsonl: inboxlog.Store) -> None:
    with jsonl.create("t") as s:
        threads = [
            threading.Thread(
                target=lambda k=k: [s.append("n", {"k": k, "i": i}) for i in range(100)]
            )
            for k in range(3)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    header, events = jsonl.inspect("t")
    assert header["id"] == "t" and len(events) == 300


def test_quick_appends_wait_their_turn_on_a_busy_session(store: inboxlog.Store) -> None:
    """An append that keeps the GIL (no observer; memory, or JSONL without fsync)
    finds the session held by calls running without the GIL: it waits its turn,
    releasing the GIL meanwhile, and every append lands in order."""
    with store.create("busy") as s:
        for i in range(3000):
            s.append("n", {"i": i})
        done = threading.Event()
        reads: list[int] = []

        def reader() -> None:
            while not done.is_set():
                reads.append(len(s.events()))
                s.flush()

        readers = [threading.Thread(target=reader) for _ in range(2)]
        for t in readers:
            t.start()
        try:
            appended = [s.append("n", {"i": i})["seq"] for i in range(3000, 3500)]
        finally:
            done.set()
            for t in readers:
                t.join(60)
        assert appended == list(range(3000, 3500))
        assert [e["data"]["i"] for e in s.events()] == list(range(3500))
        assert all(3000 <= n <= 3500 for n in reads)
