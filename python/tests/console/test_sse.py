"""The console's Server-Sent Events (SPEC §14.1, §14.4) under a real uvicorn: events
written by another process arrive in order and once, a reconnect resumes exactly, one
store follower serves every client of a session, a stalled client is dropped without
slowing a fast one, and the session list follows creations and deletions."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import PG_URL, sql
from sse import Event, Served, Where, connect, drain, parse, sse_ids, until, write

import inboxlog
from inboxlog.console import Limits, stream

TIMEOUT = httpx.Timeout(60.0)


@pytest.fixture(params=["jsonl", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Where]:
    if request.param == "jsonl":
        yield Where(str(tmp_path / "logs"), None, "none")
        return
    schema = f"console_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    try:
        inboxlog.Store.postgres(PG_URL, schema=schema)
    except inboxlog.UnavailableError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server at INBOXLOG_TEST_PG: {e}")
    yield Where(PG_URL, schema, "sync")
    sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def jsonl(tmp_path: Path) -> Where:
    return Where(str(tmp_path / "logs"), None, "none")


def follow(url: str, since: int | None = None, last_event_id: int | None = None) -> Iterator[Event]:
    """The events of one SSE connection to ``url`` (a generator: closing it closes the
    connection)."""
    headers = {} if last_event_id is None else {"last-event-id": str(last_event_id)}
    params = {} if since is None else {"since": since}
    with httpx.stream("GET", url, params=params, headers=headers, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        yield from parse(r.iter_lines())


def seqs_until(events: Iterator[Event], last: int, into: list[int] | None = None) -> list[int]:
    """The seqs of ``events`` up to and including ``last``."""
    got = [] if into is None else into
    comments = 0
    for event in events:
        if event.comment is not None:
            # Heartbeats every 10 s: events that never come end the test, not hang it.
            comments += 1
            assert comments < 12, f"no seq {last} after {got[-3:]}"
        if event.id is None:
            continue
        got.append(int(event.id))
        assert event.json()["seq"] == int(event.id)
        if int(event.id) >= last:
            break
    return got


def collect(url: str, last: int, since: int = 0) -> tuple[threading.Thread, list[int]]:
    """A thread that follows ``url`` from ``since`` until seq ``last`` arrives."""
    got: list[int] = []

    def run() -> None:
        seqs_until(follow(url, since), last, got)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, got


def test_events_written_by_another_process_arrive_in_order_once(where: Where) -> None:
    store = where.open()
    store.create("s").close()
    served = Served(store)
    try:
        url = f"{served.url}/api/sessions/s/follow"
        first, got_first = collect(url, 199)
        until(lambda: served.app.hub.clients() == 1, "the first client follows")
        writer = write(where, "s", 200)
        # A second client joins while the writer runs, from the start: older events
        # from the store, the rest from the shared feed.
        until(lambda: len(got_first) >= 50, "some events arrive")
        second, got_second = collect(url, 199)
        assert writer.wait(120) == 0
        first.join(60)
        second.join(60)
        assert got_first == list(range(200))
        assert got_second == list(range(200))
        assert served.app.hub.delivered >= 200
    finally:
        served.stop()


def test_a_reconnect_with_last_event_id_resumes_exactly(where: Where) -> None:
    store = where.open()
    store.create("s").close()
    assert write(where, "s", 100).wait(120) == 0
    served = Served(store)
    try:
        url = f"{served.url}/api/sessions/s/follow"
        stream_ = follow(url, since=0)
        first = next(stream_)
        assert first.retry == "1000"  # every stream starts with it
        assert seqs_until(stream_, 49) == list(range(50))
        stream_.close()
        # Last-Event-ID wins over `since` and resumes after it.
        resumed = follow(url, since=10, last_event_id=49)
        writer = write(where, "s", 100)
        got = seqs_until(resumed, 199)
        assert writer.wait(120) == 0
        assert got == list(range(50, 200))
        resumed.close()
        # `since` alone starts at that seq.
        assert seqs_until(follow(url, since=195), 199) == list(range(195, 200))
        with httpx.stream("GET", url, headers={"last-event-id": "x"}, timeout=TIMEOUT) as bad:
            assert bad.status_code == 400
            assert bad.read() and bad.json()["kind"] == "invalid_input"
    finally:
        served.stop()


def test_a_hundred_clients_of_one_session_share_one_follower(jsonl: Where) -> None:
    store = jsonl.open()
    store.create("s").close()
    store.create("t").close()
    served = Served(store)
    hub = served.app.hub

    async def client(session: str, ready: asyncio.Event, got: list[int], last: int) -> None:
        url = f"{served.url}/api/sessions/{session}/follow"
        async with (
            httpx.AsyncClient(timeout=TIMEOUT) as c,
            c.stream("GET", url, params={"since": 0}) as r,
        ):
            lines = r.aiter_lines()
            assert await anext(lines) == "retry: 1000"
            ready.set()
            data = None
            async for line in lines:
                if line.startswith("id: "):
                    data = int(line[4:])
                elif line == "" and data is not None:
                    got.append(data)
                    if data >= last:
                        return

    async def main() -> list[list[int]]:
        clients = [("s" if i < 100 else "t") for i in range(105)]
        readies = [asyncio.Event() for _ in clients]
        gots: list[list[int]] = [[] for _ in clients]
        tasks = [
            asyncio.create_task(client(session, readies[i], gots[i], 19))
            for i, session in enumerate(clients)
        ]
        for ready in readies:
            await ready.wait()
        assert (hub.followers(), hub.clients()) == (2, 105)
        writers = [write(jsonl, "s", 20), write(jsonl, "t", 20)]
        await asyncio.gather(*tasks)
        assert [w.wait(60) for w in writers] == [0, 0]
        return gots

    try:
        gots = asyncio.run(main())
        assert all(got == list(range(20)) for got in gots)
        # Every event read once from the store, however many clients took it.
        assert hub.delivered == 40
        until(lambda: hub.followers() == 0, "the followers stop with their last client")
    finally:
        served.stop()


def test_a_stalled_client_is_dropped_without_slowing_a_fast_one(jsonl: Where) -> None:
    # Bounds in bytes far above what is written: the stalled client falls behind by
    # leaving a send untaken for a second (its socket buffers full), not by its bytes.
    limits = Limits(client_bytes=64 << 20, clients_bytes=256 << 20, stall=1.0)
    store = jsonl.open()
    store.create("s").close()
    served = Served(store, limits=limits)
    with contextlib.ExitStack() as closing:
        closing.callback(served.stop)
        stalled = connect(served.url, "/api/sessions/s/follow")
        closing.callback(stalled.close)
        fast, got = collect(f"{served.url}/api/sessions/s/follow", 199)
        until(lambda: served.app.hub.clients() == 2, "both clients follow")
        # 200 events of 64 KiB: far more than the stalled client's socket buffers hold.
        writer = write(jsonl, "s", 200, 64 << 10)
        assert writer.wait(120) == 0
        fast.join(120)
        assert got == list(range(200))
        until(lambda: served.app.hub.drops == {"stall": 1}, "the stalled client is dropped")
        until(lambda: served.app.hub.clients() == 0, "the fast client has left too")
        # The stalled client, reading at last, finds its stream closed.
        received, _ = drain(stalled)
        seqs = sse_ids(received)
        assert seqs == list(range(len(seqs)))
        assert len(seqs) < 200


def test_an_idle_stream_sends_comments(jsonl: Where, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "HEARTBEAT", 0.05)
    store = jsonl.open()
    store.create("s").close()
    served = Served(store)
    try:
        for path in ["/api/sessions/s/follow", "/api/follow"]:
            events = follow(served.url + path)
            assert next(events).retry == "1000"
            assert [next(events).comment for _ in range(3)] == ["keep-alive"] * 3
            events.close()
    finally:
        served.stop()


def test_the_session_list_follows_creations_and_deletions(
    jsonl: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "LIST_EVERY", 0.02)
    store = jsonl.open()
    store.create("old").close()
    served = Served(store)
    try:
        raw = follow(served.url + "/api/follow")
        assert next(raw).retry == "1000"
        events = (e for e in raw if e.data)
        until(lambda: served.app.hub.list_task is not None, "the list is watched")
        store.create("n1").close()
        created = next(events).json()
        assert created == {"op": "created", "id": "n1", "header": store.inspect("n1")[0]}
        store.delete("n1")
        assert next(events).json() == {"op": "deleted", "id": "n1"}
        store.delete("old")
        assert next(events).json() == {"op": "deleted", "id": "old"}
        raw.close()
        until(lambda: served.app.hub.list_task is None, "the watcher stops with its client")
    finally:
        served.stop()


def test_a_followed_session_deleted_ends_its_streams_saying_so(
    jsonl: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stream, "HEARTBEAT", 0.1)
    store = jsonl.open()
    store.create("s").close()
    assert write(jsonl, "s", 3).wait(60) == 0
    served = Served(store)
    try:
        events = follow(served.url + "/api/sessions/s/follow")
        assert seqs_until(events, 2) == [0, 1, 2]
        store.delete("s")
        rest: list[Any] = []
        for n, event in enumerate(events):
            assert n < 600, "the stream goes on after its session was deleted"
            if event.event == "error":
                rest.append(event)
        assert [e.json()["kind"] for e in rest] == ["not_found"]
        assert rest[0].json()["code"] == 5
        until(lambda: served.app.hub.followers() == 0, "the feed stops")
    finally:
        served.stop()


def test_following_a_missing_session_is_404_and_starts_no_follower(
    jsonl: Where,
) -> None:
    store = jsonl.open()
    served = Served(store)
    try:
        r = httpx.get(served.url + "/api/sessions/none/follow", timeout=TIMEOUT)
        assert (r.status_code, r.json()["kind"]) == (404, "not_found")
        assert served.app.hub.followers() == 0
    finally:
        served.stop()
        shutil.rmtree(jsonl.path, ignore_errors=True)


def test_a_server_that_stops_ends_its_streams_and_the_next_one_resumes(jsonl: Where) -> None:
    store = jsonl.open()
    store.create("s").close()
    assert write(jsonl, "s", 10).wait(60) == 0
    served = Served(store)
    events = follow(served.url + "/api/sessions/s/follow")
    assert seqs_until(events, 4) == list(range(5))
    served.stop()
    # The stream (the rest of what it had) ends cleanly: a complete response, not a
    # broken connection.
    assert [int(e.id) for e in events if e.id is not None] == list(range(5, 10))
    assert not served.thread.is_alive()
    again = Served(store)
    try:
        resumed = follow(again.url + "/api/sessions/s/follow", last_event_id=4)
        assert seqs_until(resumed, 9) == list(range(5, 10))
        resumed.close()
    finally:
        again.stop()


def test_a_feed_that_fails_ends_its_clients_streams_saying_so(
    jsonl: Where, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(follower: inboxlog.Follower) -> list[tuple[int, bytes]]:
        raise RuntimeError("a bug in the feed")

    monkeypatch.setattr(stream, "_pull", broken)
    store = jsonl.open()
    store.create("s").close()
    served = Served(store)
    try:
        errors = [e for e in follow(served.url + "/api/sessions/s/follow") if e.event]
        assert [(e.event, e.json()["kind"]) for e in errors] == [("error", "internal")]
        until(lambda: served.app.hub.followers() == 0, "the feed is gone")
    finally:
        served.stop()
