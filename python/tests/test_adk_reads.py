"""inboxlog.integrations.adk reads a session it does not hold from the end of its log:
``get_session`` with ``num_recent_events`` and ``list_sessions`` cost the last events and
the records since the session's last head, not the history. Work is counted (the events
the store hands back), never timed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types

import inboxlog
from inboxlog.integrations.adk import InboxlogSessionService, ids, stored
from inboxlog.types import Event as LogEvent


class Counting:
    """A store that counts the events its reads hand back, of ADK sessions' logs and of
    the shared state's, and refuses to be opened."""

    def __init__(self, store: inboxlog.Store) -> None:
        self.store = store
        self.events = 0
        self.scope_events = 0  # of the shared state's logs
        self.scope_bytes = 0  # their data, as JSON

    def count(self, id: str, events: list[LogEvent]) -> None:
        if id.startswith(ids.sessions_prefix("a")):
            self.events += len(events)
        else:
            self.scope_events += len(events)
            self.scope_bytes += sum(len(json.dumps(e["data"])) for e in events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def open(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a read took the session")

    def inspect(self, id: str) -> Any:
        header, events = self.store.inspect(id)
        self.count(id, events)
        return header, events

    def read(self, id: str, since: int = 0) -> list[LogEvent]:
        events = self.store.read(id, since)
        self.count(id, events)
        return events

    def tail(self, id: str, limit: int, types: Sequence[str] | None = None) -> list[LogEvent]:
        events = self.store.tail(id, limit, types)
        self.count(id, events)
        return events


def event(n: int, **delta: Any) -> Event:
    return Event(
        author="user" if n % 2 else "model",
        invocation_id=f"i{n // 2}",
        content=types.Content(role="user", parts=[types.Part(text=f"m{n} " + "w" * 200)]),
        actions=EventActions(state_delta=delta),
        timestamp=1000.0 + n,
    )


def delta(n: int) -> dict[str, Any]:
    """Every third event sets ``k``, every seventh ``user:u``, every eleventh ``temp:t``."""
    d: dict[str, Any] = {}
    if n % 3 == 0:
        d["k"] = n
    if n % 7 == 0:
        d["user:u"] = n
    if n % 11 == 0:
        d["temp:t"] = n
    return d


def same(one: Session | None, two: Session | None) -> None:
    assert one is not None and two is not None
    assert one.state == two.state
    assert one.last_update_time == two.last_update_time
    assert [e.model_dump() for e in one.events] == [e.model_dump() for e in two.events]
    assert one._storage_update_marker == two._storage_update_marker


async def grow(store: inboxlog.Store, session: Session, service: Any, upto: int) -> None:
    for n in range(len(session.events), upto):
        await service.append_event(session, event(n, **delta(n)))


def test_a_read_of_the_last_events_costs_them_not_the_history(store: inboxlog.Store) -> None:
    async def run() -> list[int]:
        writer = InboxlogSessionService(store)
        session = await writer.create_session(
            app_name="a", user_id="u", session_id="s", state={"k": -1, "init": "x" * 50}
        )
        counted = []
        for size in (40, 400, 1200):
            await grow(store, session, writer, size)
            counting = Counting(store)
            cold = InboxlogSessionService(counting)  # type: ignore[arg-type]
            for recent in (0, 1, 5, 30):
                counting.events = 0
                config = GetSessionConfig(num_recent_events=recent)
                got = await cold.get_session(
                    app_name="a", user_id="u", session_id="s", config=config
                )
                counted.append(counting.events)
                held = await writer.get_session(
                    app_name="a", user_id="u", session_id="s", config=config
                )
                same(got, held)
                assert len(got.events) == recent if got else False
            counting.events = 0
            listed = (await cold.list_sessions(app_name="a")).sessions
            whole = await writer.get_session(app_name="a", user_id="u", session_id="s")
            assert whole is not None and whole.state["user:u"] == max(range(0, size, 7))
            assert [(s.state, s.last_update_time) for s in listed] == [
                (whole.state, whole.last_update_time)
            ]
            assert counting.events <= 1 + 4 + 3
            assert not cold._held
        await writer.close()
        return counted

    counted = asyncio.run(run())
    # The same work at 40, 400 and 1,200 events: the last events and, at most, the few
    # events since the last head (an event of ~250 bytes, the head ~100: one in two).
    assert counted[:4] == counted[4:8] == counted[8:]
    # (The last records are read with 4 more than asked, in case some are not events.)
    assert all(
        c <= max(recent, 1) + 4 + 3 for c, recent in zip(counted, (0, 1, 5, 30) * 3, strict=True)
    )


def test_a_rare_head_is_read_from_its_record_on(
    store: inboxlog.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stored, "HEAD_AFTER", 30)

    async def run() -> None:
        writer = InboxlogSessionService(store)
        session = await writer.create_session(app_name="a", user_id="u", session_id="s")
        await grow(store, session, writer, 500)
        counting = Counting(store)
        cold = InboxlogSessionService(counting)  # type: ignore[arg-type]
        got = await cold.get_session(
            app_name="a", user_id="u", session_id="s", config=GetSessionConfig(num_recent_events=3)
        )
        whole = await InboxlogSessionService(store).get_session(
            app_name="a", user_id="u", session_id="s"
        )
        assert got is not None and whole is not None
        assert got.state == whole.state and got.events == whole.events[-3:]
        assert got._storage_update_marker == whole._storage_update_marker
        # A head every 30 heads' worth of events (~13 events of ~250 bytes each for a
        # head of ~110): the 3 events, then at most that many from the head on.
        assert 3 + 4 < counting.events <= 3 + 4 + 14
        await writer.close()

    asyncio.run(run())


def test_a_log_written_before_the_counts_is_read_whole_until_a_writer_adds_them(
    store: inboxlog.Store,
) -> None:
    async def run() -> None:
        log_id = ids.session_id("a", "u", "s")
        head = {"app": "a", "user": "u", "session": "s", "state": {"k": 0}, "time": 5.0}
        seed: LogEvent = {"type": stored.CREATED, "seq": 0, "time": 5000, "data": head}
        with store.create(log_id, seed=[seed]) as log:
            for n in range(1, 60):  # the older records: the event alone
                data = event(n, k=n).model_dump(mode="json", exclude_none=True)
                log.append(stored.EVENT, {"event": data})
        counting = Counting(store)
        cold = InboxlogSessionService(counting)  # type: ignore[arg-type]
        config = GetSessionConfig(num_recent_events=2)
        got = await cold.get_session(app_name="a", user_id="u", session_id="s", config=config)
        assert got is not None and got.state == {"k": 59}
        assert [e.timestamp for e in got.events] == [1058.0, 1059.0]
        assert got._storage_update_marker == "inboxlog:59"
        assert counting.events > 59  # folded whole
        writer = InboxlogSessionService(store)
        session = await writer.get_session(app_name="a", user_id="u", session_id="s")
        assert session is not None
        await writer.append_event(session, event(60, k=60))
        await writer.release(app_name="a", user_id="u", session_id="s")
        counting.events = 0
        got = await cold.get_session(app_name="a", user_id="u", session_id="s", config=config)
        assert got is not None and got.state == {"k": 60}
        assert [e.timestamp for e in got.events] == [1059.0, 1060.0]
        assert got._storage_update_marker == "inboxlog:60"
        assert counting.events == 2 + 4  # the new event carries the head
        # A session object read from the end appends like any other.
        await writer.append_event(got, event(61, k=61))
        assert got._storage_update_marker == "inboxlog:61"
        await writer.close()

    asyncio.run(run())


def test_shared_state_is_read_from_the_end_of_its_log(store: inboxlog.Store) -> None:
    """The records read cost at most about HEAD_AFTER + 1 times the state: one with the
    state, then deltas that weigh less than HEAD_AFTER times it."""

    async def run() -> list[tuple[int, int]]:
        writer = InboxlogSessionService(store)
        one = await writer.create_session(app_name="a", user_id="u", session_id="one")
        two = await writer.create_session(app_name="a", user_id="u", session_id="two")
        counted = []
        for size in (30, 300, 900):
            for n in range(size - 30 if size > 30 else 0, size):
                big = {"user:big": "b" * 300} if n % 50 == 0 else {}
                delta = {"user:u": n, "app:a": n % 5, **big}
                await writer.append_event((one, two)[n % 2], event(n, **delta))
            counting = Counting(store)
            cold = InboxlogSessionService(counting)  # type: ignore[arg-type]
            got = await cold.get_user_state(app_name="a", user_id="u")
            assert got == {"u": size - 1, "big": "b" * 300}
            assert got == stored.fold_scope(store.inspect(ids.user_scope("a", "u"))[1])
            counted.append((counting.scope_events, counting.scope_bytes))
            read = await cold.get_session(app_name="a", user_id="u", session_id="one")
            assert read is not None and read.state == {
                "user:u": size - 1,
                "user:big": "b" * 300,
                "app:a": (size - 1) % 5,
            }
        await writer.close()
        return counted

    counted = asyncio.run(run())
    state = len(json.dumps({"u": 899, "big": "b" * 300}))
    record = len(json.dumps({"delta": {"u": 899}, "from": ids.session_id("a", "u", "one")}))
    for events, read in counted:
        assert events >= 1 and read <= (stored.HEAD_AFTER + 1) * (state + record) + record
    assert counted[-1][0] < 900 / 4


def test_a_shared_state_log_written_before_the_bases_is_read_whole_until_written(
    store: inboxlog.Store,
) -> None:
    async def run() -> None:
        scope = ids.user_scope("a", "u")
        seed: LogEvent = {
            "type": stored.SCOPE,
            "seq": 0,
            "time": 1,
            "data": {"app": "a", "user": "u"},
        }
        with store.create(scope, seed=[seed]) as log:
            for n in range(40):
                log.append(stored.STATE, {"delta": {"u": n}, "from": "x", "seq": n})
        counting = Counting(store)
        cold = InboxlogSessionService(counting)  # type: ignore[arg-type]
        assert await cold.get_user_state(app_name="a", user_id="u") == {"u": 39}
        assert counting.scope_events > 40  # read whole
        writer = InboxlogSessionService(store)
        session = await writer.create_session(app_name="a", user_id="u", session_id="s")
        await writer.append_event(session, event(1, **{"user:v": 1}))
        counting.scope_events = 0
        assert await cold.get_user_state(app_name="a", user_id="u") == {"u": 39, "v": 1}
        assert counting.scope_events == 1  # the new record holds the state
        await writer.close()

    asyncio.run(run())


def test_records_of_other_types_between_the_events_are_read_past(
    store: inboxlog.Store,
) -> None:
    async def run() -> None:
        writer = InboxlogSessionService(store)
        session = await writer.create_session(app_name="a", user_id="u", session_id="s")
        for n in range(30):
            await writer.append_event(session, event(n, **delta(n)))
            log = writer.writer("a", "u", "s")
            assert log is not None
            for _ in range(n % 4 * 5):  # what a turn's records or posts put between
                log.append("other/record", {"n": n})
        cold = InboxlogSessionService(store)
        for recent in (0, 1, 2, 7, 40):
            config = GetSessionConfig(num_recent_events=recent)
            same(
                await cold.get_session(app_name="a", user_id="u", session_id="s", config=config),
                await writer.get_session(app_name="a", user_id="u", session_id="s", config=config),
            )
        await writer.close()

    asyncio.run(run())
