"""PostgreSQL at fleet scale (issue #21), process by process against the real server:
thousands of sessions on one `Store` within its connection bound, workers killed,
stopped and cut off from the server, followers under many writers.

Each test works in a schema of its own and, where it counts connections, as a role of
its own created with a `CONNECTION LIMIT` (so the server itself refuses a connection
beyond what the test grants, and a store that overshoots fails here rather than
crowding the shared server); schema and role are dropped afterwards. Worker processes
run `pg_fleet_worker.py` and report what they did line by line; the checks read the
logs back with `psql` and compare them with those reports. No check is timed: waits
are for counted work, and a wait that sees nothing new for `HANG` seconds fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import pytest
from conftest import PG_URL, sql

import inboxlog
import inboxlog.aio
import inboxlog.types

WORKER = Path(__file__).with_name("pg_fleet_worker.py")
#: How long a wait may see nothing new before it fails (a hang guard, not a timing).
HANG = 120.0


# ---- the server side: a schema, roles, backends --------------------------------------


def home_pids(app: str) -> list[int]:
    """The backends of the store whose URL says `application_name=app` that hold an
    advisory lock: the handle's ownership ("home") connection."""
    out = sql(
        "SELECT DISTINCT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
        f"WHERE l.locktype = 'advisory' AND l.granted AND a.application_name = '{app}'"
    )
    return sorted(int(pid) for pid in out.split())


def backends(app: str) -> int:
    """How many backends the server shows for `application_name=app`."""
    return int(sql(f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{app}'"))


def wait_until(done: Callable[[], bool], what: str) -> None:
    """Polls `done` until it holds; fails after `HANG` seconds."""
    deadline = time.monotonic() + HANG
    while not done():
        assert time.monotonic() < deadline, f"still waiting for {what} after {HANG} s"
        time.sleep(0.05)


def free_slots() -> int:
    """Connections the server would still accept from a role that is not a superuser."""
    return int(
        sql(
            "SELECT current_setting('max_connections')::int"
            " - current_setting('superuser_reserved_connections')::int"
            " - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend')"
        )
    )


def wait_for_room(needed: int) -> None:
    """Waits until the shared server has `needed` connection slots free (plus a few for
    the checks' own `psql`), as backends of earlier tests' killed processes go away; fails
    naming who holds them if they never do. The server is shared with everything else on
    the machine, so a test that takes dozens of connections asks before it starts."""
    deadline = time.monotonic() + HANG
    while free_slots() < needed + 4:
        if time.monotonic() >= deadline:
            held = sql(
                "SELECT usename, application_name, count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' GROUP BY 1, 2 ORDER BY 3 DESC"
            )
            pytest.fail(
                f"the server has {free_slots()} connection slots free after {HANG} s, "
                f"this test needs {needed + 4}; held by (user|application|count):\n{held}"
            )
        time.sleep(0.1)


class Backends:
    """Samples, on a thread, how many backends the server shows for one
    application_name: the most seen and how many samples were taken."""

    def __init__(self, app: str) -> None:
        self.app = app
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, backends(self.app))
            self.samples += 1
            self._stop.wait(0.05)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()

    def check(self, bound: int) -> None:
        """The store stayed within `bound` connections, and the sampler saw it."""
        assert self.samples >= 2, f"only {self.samples} samples of {self.app}"
        assert 1 <= self.most <= bound, (
            f"{self.app}: up to {self.most} backends at once, bound {bound}"
        )


@dataclass
class Role:
    """A login role of the test's own with a connection limit, granted the schema."""

    name: str
    limit: int
    tag: str

    def url(self, app: str) -> str:
        """The test server's URL as this role, with `application_name=app`."""
        parts = urlsplit(PG_URL)
        host = parts.netloc.rsplit("@", 1)[-1]
        query = f"{parts.query}&" if parts.query else ""
        return urlunsplit(
            (parts.scheme, f"{self.name}@{host}", parts.path, f"{query}application_name={app}", "")
        )

    def app(self, what: str) -> str:
        """An application_name unique to this test run."""
        return f"{self.tag}_{what}"


@dataclass
class Fleet:
    """A schema with the inboxlog tables, and the roles and processes a test made."""

    schema: str
    tmp: Path
    tag: str = field(default_factory=lambda: f"ilfs{os.getpid()}_{uuid.uuid4().hex[:6]}")
    roles: list[Role] = field(default_factory=list)
    children: list[Child] = field(default_factory=list)

    def role(self, limit: int) -> Role:
        """A new login role allowed `limit` connections, granted this schema, once the
        shared server has room for them (see `wait_for_room`)."""
        wait_for_room(limit)
        role = Role(f"{self.tag}_r{len(self.roles)}", limit, self.tag)
        s = f'"{self.schema}"'
        sql(
            f"CREATE ROLE {role.name} LOGIN CONNECTION LIMIT {limit}; "
            f"GRANT USAGE ON SCHEMA {s} TO {role.name}; "
            f"GRANT ALL ON ALL TABLES IN SCHEMA {s} TO {role.name}; "
            f"GRANT ALL ON ALL SEQUENCES IN SCHEMA {s} TO {role.name}"
        )
        self.roles.append(role)
        return role

    def store(self, role: Role, app: str, max_connections: int) -> inboxlog.Store:
        return inboxlog.Store.postgres(
            role.url(app), schema=self.schema, max_connections=max_connections
        )

    def spawn(
        self,
        name: str,
        role: Role,
        ids: list[str],
        *,
        create: bool = True,
        max_connections: int = 3,
        threads: int = 4,
    ) -> Child:
        """A worker process holding `ids` open on one store, appending in rounds."""
        child = Child(
            name,
            {
                "url": role.url(role.app(name)),
                "schema": self.schema,
                "max_connections": max_connections,
                "name": name,
                "ids": ids,
                "create": create,
                "threads": threads,
                "stop": str(self.tmp / f"stop-{name}"),
            },
            self.tmp,
        )
        self.children.append(child)
        return child

    def notes(self) -> dict[str, list[tuple[int, dict[str, Any]]]]:
        """Every `note` event stored in the schema: session id -> [(seq, data)] by seq."""
        out = sql(
            f'SELECT session, seq, line FROM "{self.schema}".events '
            "WHERE type = 'note' ORDER BY session, seq"
        )
        notes: dict[str, list[tuple[int, dict[str, Any]]]] = defaultdict(list)
        for row in out.splitlines():
            session, seq, line = row.split("|", 2)
            notes[session].append((int(seq), json.loads(line)["data"]))
        return notes


class Child:
    """A `pg_fleet_worker.py` process and the lines it reported so far."""

    def __init__(self, name: str, params: dict[str, Any], tmp: Path) -> None:
        self.name = name
        self.app: str = urlsplit(params["url"]).query.rsplit("application_name=", 1)[1]
        self.ids: list[str] = params["ids"]
        self.stop_file = Path(params["stop"])
        self.stderr = tmp / f"{name}.stderr"
        self.lines: list[list[str]] = []
        self._changed = threading.Condition()
        with self.stderr.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(WORKER), json.dumps(params)],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                cwd=tmp,  # not python/, whose source tree would shadow the built package
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n").split(" ", 2))
                self._changed.notify_all()
        self.proc.stdout.close()
        with self._changed:
            self.lines.append(["eof"])
            self._changed.notify_all()

    def count(self, kind: str) -> int:
        with self._changed:
            return sum(1 for line in self.lines if line[0] == kind)

    def wait(self, done: Callable[[], bool], what: str) -> None:
        """Waits until `done()` holds over the lines; fails when the process ends
        first, or after `HANG` seconds."""
        deadline = time.monotonic() + HANG
        with self._changed:
            while not done():
                assert not self.lines or self.lines[-1] != ["eof"], (
                    f"{self.name} ended (status {self.proc.wait()}) before {what}: "
                    f"{self.stderr.read_text()[-2000:]}"
                )
                assert time.monotonic() < deadline, f"{self.name}: no {what} after {HANG} s"
                self._changed.wait(1)

    def ready(self) -> None:
        self.wait(lambda: self.count("ready") == 1, "ready")

    def rounds_after(self, rounds: int, more: int) -> None:
        """Waits for `more` rounds beyond the first `rounds`."""
        self.wait(lambda: self.count("round") >= rounds + more, f"{more} more rounds")

    def finish(self) -> None:
        """Tells the worker to stop and waits for its `done` and a clean exit."""
        self.stop_file.touch()
        self.wait(lambda: self.count("done") == 1, "done")
        assert self.proc.wait() == 0, self.stderr.read_text()[-2000:]
        self._reader.join()

    def acked(self) -> dict[str, list[int]]:
        """Session id -> the rounds whose append returned, in order."""
        out: dict[str, list[int]] = defaultdict(list)
        with self._changed:
            for line in self.lines:
                if line[0] == "ack":
                    out[line[1]].append(int(line[2]))
        return out

    def reported(self, kind: str) -> set[str]:
        """The session ids of the `fenced` or `error` lines."""
        with self._changed:
            return {line[1] for line in self.lines if line[0] == kind}

    def errors(self) -> list[str]:
        with self._changed:
            return [" ".join(line).strip() for line in self.lines if line[0] == "error"]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    """A schema of the test's own with the inboxlog tables (made as the test server's
    user, so the roles the test makes need no right to create anything); afterwards the
    test's processes are killed, the roles' connections ended, schema and roles
    dropped."""
    schema = f"py_fleet_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        inboxlog.Store.postgres(PG_URL, schema=schema, max_connections=2)
    except inboxlog.UnavailableError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server at INBOXLOG_TEST_PG: {e}")
    fleet = Fleet(schema, tmp_path)
    try:
        yield fleet
    finally:
        for child in fleet.children:
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGCONT)
                child.proc.kill()
            child.proc.wait()
        for role in fleet.roles:
            sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE usename = '{role.name}'"
            )
        sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        for role in fleet.roles:
            sql(f"DROP OWNED BY {role.name}; DROP ROLE {role.name}")


def ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:05}" for i in range(n)]


def check_notes(notes: dict[str, list[tuple[int, dict[str, Any]]]], workers: list[Child]) -> None:
    """Nothing doubled (each writer's round at most once per log, seqs in writing order)
    and nothing acknowledged lost (every acked round of every worker is in the log)."""
    for session, rows in notes.items():
        written = [(d["w"], d["n"]) for _, d in rows]
        twice = [w for w, k in Counter(written).items() if k > 1]
        assert not twice, f"{session}: written twice: {twice}"
        by_writer: dict[str, list[int]] = defaultdict(list)
        for w, n in written:
            by_writer[w].append(n)
        for w, rounds in by_writer.items():
            assert rounds == sorted(rounds), f"{session}: {w}'s rounds out of order"
    for worker in workers:
        for session, rounds in worker.acked().items():
            stored = [d["n"] for _, d in notes.get(session, []) if d["w"] == worker.name]
            lost = sorted(set(rounds) - set(stored))
            assert not lost, f"{session}: rounds {lost} acked by {worker.name}, not stored"


# ---- one process, thousands of sessions ----------------------------------------------


def test_two_thousand_sessions_on_one_store_under_a_ten_connection_role(fleet: Fleet) -> None:
    """2,000 sessions held open by one store (default bound, 8) while the server lets
    its role have 10 connections: created, appended to, closed; then any other store
    opens them."""
    role = fleet.role(10)
    store = inboxlog.Store.postgres(role.url(role.app("one")), schema=fleet.schema)
    names = ids("s", 2000)
    with ThreadPoolExecutor(16) as pool:
        sessions = list(pool.map(store.create, names))
        assert [s.id for s in sessions] == names
        appended = list(pool.map(lambda s: s.append("note", {"w": "one", "n": 0}), sessions))
        assert {e["seq"] for e in appended} == {0}
        list(pool.map(lambda s: s.close(), sessions))
    notes = fleet.notes()
    assert sorted(notes) == names
    assert all(rows == [(0, {"w": "one", "n": 0})] for rows in notes.values())
    other = fleet.store(role, role.app("other"), max_connections=2)
    for name in names[::100]:
        other.open(name).close()


#: The connection bound of the 10,000-session stores.
BOUND = 4


def check_ten_thousand(fleet: Fleet, names: list[str], seen: Backends) -> None:
    """The store stayed within `BOUND` connections, and every log holds its two notes."""
    seen.check(BOUND)
    notes = fleet.notes()
    assert sorted(notes) == names
    assert {json.dumps(rows) for rows in notes.values()} == {
        json.dumps([[0, {"n": 0}], [1, {"n": 1}]])
    }


def test_ten_thousand_sessions_on_one_store_within_its_bound(fleet: Fleet) -> None:
    """10,000 sessions open at once on one `Store.postgres` handle of 4 connections:
    created and appended to, closed; opened again, appended to, closed. The server
    never shows more than 4 backends for the handle."""
    role = fleet.role(BOUND + 2)
    app = role.app("sync")
    names = ids("t", 10_000)
    with Backends(app) as seen, ThreadPoolExecutor(16) as pool:
        store = fleet.store(role, app, max_connections=BOUND)
        created = list(pool.map(store.create, names))
        assert [s.last_seq for s in created] == [None] * len(names)
        list(pool.map(lambda s: s.append("note", {"n": 0}), created))
        list(pool.map(lambda s: s.close(), created))
        opened = list(pool.map(store.open, names))
        assert [s.last_seq for s in opened] == [0] * len(names)
        list(pool.map(lambda s: s.append("note", {"n": 1}), opened))
        list(pool.map(lambda s: s.close(), opened))
    check_ten_thousand(fleet, names, seen)


def test_ten_thousand_sessions_on_one_aio_store_within_its_bound(fleet: Fleet) -> None:
    """The same through `inboxlog.aio`: 10,000 sessions as coroutines on one store of 4
    connections."""
    role = fleet.role(BOUND + 2)
    app = role.app("aio")
    names = ids("t", 10_000)

    async def run() -> None:
        store = await inboxlog.aio.Store.postgres(
            role.url(app), fleet.schema, max_connections=BOUND
        )
        created = await asyncio.gather(*(store.create(name) for name in names))
        assert [s.id for s in created] == names
        await asyncio.gather(*(s.append("note", {"n": 0}) for s in created))
        await asyncio.gather(*(s.close() for s in created))
        opened = await asyncio.gather(*(store.open(name) for name in names))
        assert [await s.last_seq() for s in opened[:10]] == [0] * 10
        await asyncio.gather(*(s.append("note", {"n": 1}) for s in opened))
        await asyncio.gather(*(s.close() for s in opened))

    with Backends(app) as seen:
        asyncio.run(run())
    check_ten_thousand(fleet, names, seen)


# ---- many processes: killed, stopped, cut off ------------------------------------------


def test_eight_workers_of_250_sessions_one_killed_mid_append(fleet: Fleet) -> None:
    """8 processes hold 250 sessions each (3 connections apiece) and append in rounds;
    one is SIGKILLed amid its appends. Once the server has seen it go, every one of its
    sessions opens elsewhere at the first attempt; nothing any worker was told was
    written is missing, nothing is written twice."""
    role = fleet.role(8 * 3 + 3)
    workers = [fleet.spawn(f"w{k}", role, ids(f"w{k}-", 250)) for k in range(8)]
    for w in workers:
        w.ready()
    doomed, others = workers[3], workers[:3] + workers[4:]
    # Amid its second round: its threads have appends in flight.
    doomed.wait(lambda: doomed.count("ack") >= 250 + 100, "a round and a half of acks")
    doomed.proc.send_signal(signal.SIGKILL)
    assert doomed.proc.wait() == -signal.SIGKILL
    wait_until(lambda: backends(doomed.app) == 0, f"the server to see {doomed.name} go")
    taker = fleet.store(role, role.app("taker"), max_connections=3)
    rounds = {w.name: w.count("round") for w in others}
    for id in doomed.ids:
        with taker.open(id) as s:  # LockedError here fails the test
            assert s.open_report["repairedTurn"] is None
            s.append("note", {"w": "taker", "n": 0})
    for w in others:
        w.rounds_after(rounds[w.name], 2)  # the others kept writing meanwhile
        w.finish()
        assert not w.errors() and not w.reported("fenced"), w.errors()
    notes = fleet.notes()
    check_notes(notes, workers)
    for id in doomed.ids:
        assert notes[id][-1][1] == {"w": "taker", "n": 0}, id
        taker.verify(id)
    for w in others:
        assert {id for id in notes if id.startswith(f"{w.name}-")} == set(w.ids)
        assert all(len(w.acked()[id]) >= 2 for id in w.ids)


def test_a_stopped_owner_is_fenced_on_exactly_the_sessions_taken_over(fleet: Fleet) -> None:
    """SIGSTOP the owner of 100 sessions, take 50 of them over from another process,
    SIGCONT: the owner gets FencedError on exactly those 50, keeps writing the other
    50, and nothing of its lands in a taken log after the takeover."""
    role = fleet.role(3 + 3)
    owner = fleet.spawn("owner", role, ids("o", 100), threads=2)
    owner.ready()
    owner.rounds_after(0, 1)
    owner.proc.send_signal(signal.SIGSTOP)
    taker = fleet.store(role, role.app("taker"), max_connections=3)
    taken_ids = owner.ids[::2]
    taken = {id: taker.open(id, takeover=True) for id in taken_ids}
    marks = {id: s.append("note", {"w": "taker", "n": 0})["seq"] for id, s in taken.items()}
    rounds = owner.count("round")
    owner.proc.send_signal(signal.SIGCONT)
    # The round it was stopped in, then two that touch every session it still holds.
    owner.rounds_after(rounds, 3)
    owner.finish()
    assert owner.reported("fenced") == set(taken_ids)
    assert not owner.errors(), owner.errors()
    for s in taken.values():
        s.append("note", {"w": "taker", "n": 1})
        s.close()
    notes = fleet.notes()
    check_notes(notes, [owner])
    acked = owner.acked()
    for id in taken_ids:
        late = [seq for seq, d in notes[id] if d["w"] == "owner" and seq > marks[id]]
        assert not late, f"{id}: the stopped owner wrote seqs {late} after the takeover"
        assert [d for _, d in notes[id]][-2:] == [{"w": "taker", "n": n} for n in (0, 1)]
    for id in owner.ids[1::2]:
        after = [n for n in acked[id] if n > rounds]
        assert len(after) >= 2, f"{id}: the owner wrote rounds {after} after SIGCONT"


def test_a_killed_ownership_connection_fences_or_reacquires_every_session(
    fleet: Fleet,
) -> None:
    """The server ends the owner's ownership connection (`pg_terminate_backend`) while
    another store tries to open its 50 sessions: each session ends with one writer, the
    other store (and the owner fenced on it) or the owner (reacquired, still writing);
    never both."""
    role = fleet.role(3 + 3 + 1)
    owner = fleet.spawn("owner", role, ids("k", 50), threads=2)
    owner.ready()
    owner.rounds_after(0, 1)
    homes = home_pids(owner.app)
    assert len(homes) == 1, f"the owner's lock-holding backends: {homes}"
    other = fleet.store(role, role.app("other"), max_connections=3)
    rounds = owner.count("round")
    assert sql(f"SELECT pg_terminate_backend({homes[0]})").strip() == "t"
    won: dict[str, inboxlog.Session] = {}
    deadline = time.monotonic() + HANG
    while owner.count("round") < rounds + 3 and owner.proc.poll() is None:
        assert time.monotonic() < deadline, f"the owner did not finish 3 rounds in {HANG} s"
        for id in owner.ids:
            if id not in won:
                with contextlib.suppress(inboxlog.LockedError):
                    won[id] = other.open(id)
    owner.rounds_after(rounds, 3)
    assert not owner.errors(), owner.errors()
    assert owner.reported("fenced") == set(won), "fenced exactly where the other store won"
    marks = {id: s.append("note", {"w": "other", "n": 0})["seq"] for id, s in won.items()}
    kept = set(owner.ids) - set(won)
    if kept:
        # Reacquired: the owner's handle has a new home connection, and once it has
        # written every session again, what it kept is locked to anyone else.
        wait_until(lambda: home_pids(owner.app) not in ([], homes), "a new home connection")
        assert len(home_pids(owner.app)) == 1, home_pids(owner.app)
        owner.rounds_after(owner.count("round"), 2)
        for id in kept:
            with pytest.raises(inboxlog.LockedError):
                other.open(id)
    owner.finish()
    for s in won.values():
        s.close()
    notes = fleet.notes()
    check_notes(notes, [owner])
    acked = owner.acked()
    for id in won:
        first = min(seq for seq, d in notes[id] if d["w"] == "other")
        late = [seq for seq, d in notes[id] if d["w"] == "owner" and seq > first]
        assert first == marks[id] and not late, f"{id}: two writers, owner at {late}"
    for id in kept:
        assert len([n for n in acked[id] if n > rounds]) >= 2, f"{id} not reacquired"


def test_followers_of_64_sessions_under_64_writers_see_every_event_once_in_order(
    fleet: Fleet,
) -> None:
    """64 threads append 40 events each to their own session on one store while 64
    followers on another store read them: each follower sees exactly its log, in seq
    order, nothing skipped or repeated; each store stays within its bound."""
    writes, bound = 40, 4
    role = fleet.role(2 * bound + 2)
    names = ids("f", 64)
    wapp, rapp = role.app("writers"), role.app("followers")
    writer = fleet.store(role, wapp, max_connections=bound)
    reader = fleet.store(role, rapp, max_connections=bound)
    sessions = [writer.create(name) for name in names]
    followers = [reader.follow(name) for name in names]
    seen: dict[str, list[inboxlog.types.Event]] = {name: [] for name in names}

    def write(s: inboxlog.Session) -> None:
        for n in range(writes):
            s.append("note", {"w": "writer", "n": n})

    def follow(f: inboxlog.Follower) -> None:
        got = seen[f.session]
        while len(got) < writes:
            event = f.next(timeout=HANG)
            assert event is not None, f"{f.session}: nothing after {len(got)} events"
            got.append(event)

    with Backends(wapp) as wseen, Backends(rapp) as rseen, ThreadPoolExecutor(128) as pool:
        reading = [pool.submit(follow, f) for f in followers]
        list(pool.map(write, sessions))
        for r in reading:
            r.result()
    wseen.check(bound)
    rseen.check(bound)
    for s, f in zip(sessions, followers, strict=True):
        assert seen[s.id] == s.events(), f"{s.id}: the follower's view differs from the log"
        assert [e["seq"] for e in seen[s.id]] == list(range(writes))
        assert f.next(timeout=0) is None
        f.close()
        s.close()
