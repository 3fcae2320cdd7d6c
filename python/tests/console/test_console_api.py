"""The console's JSON API (SPEC §14.1) over every store: each endpoint's shape and each
error status, through Starlette's TestClient."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import m
from starlette.testclient import TestClient

import inboxlog
import inboxlog.console
from inboxlog.console import api


@pytest.fixture
def client(store: inboxlog.Store) -> Iterator[TestClient]:
    with TestClient(inboxlog.console.app(store)) as c:
        yield c


def write_turn(s: inboxlog.Session, n: int, content: str = "hi") -> None:
    """One turn with a user message and ``n`` host events."""
    s.inbox.append("next-turn", m(f"u{s.last_seq}", role="user", content=content))
    s.open_turn()
    proposal = s.propose_step()
    s.decide({"kind": "enter", "messages": proposal["messages"]})
    for i in range(n):
        s.append("assistant/chunk", {"text": f"part {i}"})
    s.end_step("completed")
    s.close_turn()


def test_health_says_ok_and_nothing_else(client: TestClient) -> None:
    r = client.get("/api/health")
    assert r.status_code == 200
    assert r.json() == {"ok": True}


def test_sessions_come_in_id_order_in_pages(store: inboxlog.Store, client: TestClient) -> None:
    for id in ["c", "a", "e", "b", "d"]:
        store.create(id).close()
    page = client.get("/api/sessions", params={"limit": 2}).json()
    assert [h["id"] for h in page["sessions"]] == ["a", "b"]
    assert page["next"] == "b"
    assert page["sessions"][0] == next(h for h in store.list() if h["id"] == "a")
    page = client.get("/api/sessions", params={"after": "b", "limit": 2}).json()
    assert [h["id"] for h in page["sessions"]] == ["c", "d"]
    page = client.get("/api/sessions", params={"after": page["next"], "limit": 2}).json()
    assert ([h["id"] for h in page["sessions"]], page["next"]) == (["e"], None)
    # An `after` that is no session's id still pages from where it sorts.
    page = client.get("/api/sessions", params={"after": "bb"}).json()
    assert ([h["id"] for h in page["sessions"]], page["next"]) == (["c", "d", "e"], None)
    assert client.get("/api/sessions").json()["next"] is None


def test_a_session_page_has_header_last_seq_open_turn_and_baseline(
    store: inboxlog.Store, client: TestClient
) -> None:
    empty = client.get("/api/sessions/s")
    assert empty.status_code == 404
    with store.create("s") as s:
        assert client.get("/api/sessions/s").json() == {
            "header": s.header,
            "lastSeq": None,
            "openTurn": None,
            "baseline": {"seq": None, "next_turn": [], "next_step": []},
            "approvals": [],
            "parked": None,
            "readOnly": False,
        }
        write_turn(s, 3)
        s.inbox.append("next-turn", m("p1", content="later"))
        s.inbox.append("next-step", m("p2"))
        s.open_turn()
        s.flush()  # visible to other readers (PostgreSQL with durability none)
        got = client.get("/api/sessions/s").json()
        assert got == {
            "header": s.header,
            "lastSeq": s.last_seq,
            "openTurn": s.current_turn,
            "baseline": s.baseline(),
            "approvals": [],
            "parked": None,
            "readOnly": False,
        }
        assert got["openTurn"] == 2
        # Brought up to date from where the last request left it.
        s.inbox.remove("p1")
        s.append("host/note", {"n": 1})
        s.flush()
        got = client.get("/api/sessions/s").json()
        assert (got["lastSeq"], got["baseline"]) == (s.last_seq, s.baseline())


def ask(s: inboxlog.Session, *approvals: tuple[str, str, Any, str]) -> None:
    """A turn with step 1 open and each of ``approvals`` (id, tool, arguments, reason)
    asked."""
    s.inbox.append("next-turn", m("u1", role="user", content="go"))
    s.open_turn()
    proposal = s.propose_step()
    s.decide({"kind": "enter", "messages": proposal["messages"]})
    for id, tool, arguments, reason in approvals:
        s.ask_approval(id, tool, None, arguments, reason)


def test_a_session_page_has_its_pending_approvals_and_parked_turn(
    store: inboxlog.Store, client: TestClient
) -> None:
    def seen() -> tuple[Any, Any]:
        got = client.get("/api/sessions/s").json()
        # A fold started afresh from the checkpoint agrees with one brought up to date.
        with TestClient(inboxlog.console.app(store)) as fresh:
            again = fresh.get("/api/sessions/s").json()
        peek = store.peek("s")
        assert (got["approvals"], got["parked"]) == (again["approvals"], again["parked"])
        assert (got["approvals"], got["parked"]) == (peek["approvals"], peek["parked"])
        return got["approvals"], got["parked"]

    with store.create("s") as s:
        client.get("/api/sessions/s")  # the fold starts before the approvals
        ask(s, ("a1", "rm", {"path": "x"}, "deletes a file"), ("a2", "send", "raw", "mails"))
        s.flush()
        first = {"id": "a1", "toolName": "rm", "arguments": {"path": "x"}}
        first["reason"] = "deletes a file"
        second = {"id": "a2", "toolName": "send", "arguments": "raw", "reason": "mails"}
        assert seen() == ([first, second], None)
        s.park({"run": 1})
        s.flush()
        assert seen() == ([first, second], {"turn": 1, "approvals": ["a1", "a2"], "ready": False})
        # Decided through the API and taken in by the owner, then in process.
        r = client.post("/api/sessions/s/approvals", json={"id": "a1", "outcome": "allowed-once"})
        assert r.status_code == 202, r.text
        assert seen()[0] == [first, second], "pending until the owner takes it in"
        s.inbox.receive()
        s.flush()
        assert seen() == ([second], {"turn": 1, "approvals": ["a1", "a2"], "ready": False})
        s.decide_approval("a2", "rejected")
        s.flush()
        assert seen() == ([], {"turn": 1, "approvals": ["a1", "a2"], "ready": True})
        s.resume_parked()
        s.flush()
        assert seen() == ([], None)
        s.ask_approval("a3", "rm", None, None, None)
        s.flush()
        assert seen() == ([{"id": "a3", "toolName": "rm"}], None)
        s.cancel()  # decides a3 cancelled and ends the turn
        s.flush()
        assert seen() == ([], None)


def test_a_read_only_console_says_so_in_the_session_json(store: inboxlog.Store) -> None:
    store.create("s").close()
    with TestClient(inboxlog.console.app(store, read_only=True)) as c:
        assert c.get("/api/sessions/s").json()["readOnly"] is True


def test_a_session_deleted_and_created_again_is_read_anew(
    store: inboxlog.Store, client: TestClient
) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", m("old"))
        s.append("host/note", {})
    assert client.get("/api/sessions/s").json()["lastSeq"] == 1
    store.delete("s")
    assert client.get("/api/sessions/s").status_code == 404
    with store.create("s") as s:
        s.inbox.append("next-turn", m("new"))
        s.append("host/other", {})
        s.append("host/other", {})
        expected = s.baseline()
    got = client.get("/api/sessions/s").json()
    assert (got["lastSeq"], got["baseline"]) == (2, expected)


def test_a_forks_seeded_events_leave_its_inbox_empty(
    store: inboxlog.Store, client: TestClient
) -> None:
    with store.create("parent") as p:
        write_turn(p, 1)
        p.inbox.append("next-turn", m("left-behind"))
    with store.fork("parent", "child") as c:
        c.inbox.append("next-step", m("own"))
        expected = (c.last_seq, c.baseline())
    got = client.get("/api/sessions/child").json()
    assert (got["lastSeq"], got["baseline"]) == expected
    assert got["header"]["seedLength"] > 0


def test_events_come_in_pages_from_a_seq(store: inboxlog.Store, client: TestClient) -> None:
    with store.create("s") as s:
        write_turn(s, 1200)
        s.flush()
        events = s.events()
    last = events[-1]["seq"]
    page = client.get("/api/sessions/s/events").json()
    assert page["events"] == events[:500]
    assert page["next"] == 500
    page = client.get("/api/sessions/s/events", params={"since": 10, "limit": 5}).json()
    assert page == {"events": events[10:15], "next": 15}
    # limit clamped to 1,000.
    page = client.get("/api/sessions/s/events", params={"since": 3, "limit": 100000}).json()
    assert (len(page["events"]), page["next"]) == (1000, 1003)
    page = client.get("/api/sessions/s/events", params={"since": last - 1}).json()
    assert page == {"events": events[-2:], "next": None}
    page = client.get("/api/sessions/s/events", params={"since": last + 1}).json()
    assert page == {"events": [], "next": None}


def test_the_baseline_at_every_seq_is_the_sessions(
    store: inboxlog.Store, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small snapshots, so a baseline starts from one and from none.
    monkeypatch.setattr(api, "SNAPSHOT_EVERY", 4)
    with store.create("s") as s:
        for i in range(6):
            s.inbox.append("next-turn" if i % 2 else "next-step", m(f"m{i}", n=i))
            s.append("host/x", {"i": i})
        s.inbox.replace("m1", m("m1b"))
        s.inbox.remove("m2")
        write_turn(s, 2)
        s.flush()
        last = s.last_seq
        assert last is not None
        for at in range(last + 1):
            got = client.get("/api/sessions/s/baseline", params={"at": at})
            assert got.status_code == 200
            assert got.json() == s.baseline(at), at
        assert client.get("/api/sessions/s/baseline").json() == s.baseline()
        past = client.get("/api/sessions/s/baseline", params={"at": last + 1})
    assert past.status_code == 400
    assert past.json()["kind"] == "invalid_input"
    assert past.json()["code"] == 10


def test_a_post_is_accepted_and_taken_in_by_the_owner(
    store: inboxlog.Store, client: TestClient
) -> None:
    with store.create("s") as s:
        r = client.post(
            "/api/sessions/s/inbox",
            json={"target": "next-step", "message": m("w1", content="steer")},
        )
        assert r.status_code == 202
        post = r.json()["post"]
        assert isinstance(post, str)
        assert s.inbox.receive() == 1
        assert list(s.inbox.next_step) == [m("w1", content="steer")]
        assert s.events()[-1]["data"]["post"] == post


def test_remove_and_replace_are_accepted_and_applied_by_the_owner(
    store: inboxlog.Store, client: TestClient
) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", m("a"))
        s.inbox.append("next-turn", m("b"))
        r = client.post("/api/sessions/s/inbox/remove", json={"id": "a"})
        assert r.status_code == 202
        assert isinstance(r.json()["post"], str)
        r = client.post("/api/sessions/s/inbox/replace", json={"id": "b", "message": m("c")})
        assert r.status_code == 202
        # Not pending: still accepted; the owner's log says so (never a 404).
        r = client.post("/api/sessions/s/inbox/remove", json={"id": "nope"})
        assert r.status_code == 202
        s.inbox.receive()
        assert list(s.inbox.next_turn) == [m("c")]
        rejected = [e for e in s.events() if e["type"] == "agent/inbox/rejected"]
        assert [e["data"]["edit"]["id"] for e in rejected] == ["nope"]


def test_a_move_is_accepted_and_applied_by_the_owner_or_rejected_by_name(
    store: inboxlog.Store, client: TestClient
) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", m("a"))
        s.inbox.append("next-turn", m("b"))
        s.inbox.append("next-step", m("c"))
        r = client.post("/api/sessions/s/inbox/move", json={"id": "b", "target": "next-step"})
        assert r.status_code == 202
        post = r.json()["post"]
        assert isinstance(post, str)
        r = client.post(
            "/api/sessions/s/inbox/move", json={"id": "c", "target": "next-turn", "index": 0}
        )
        assert r.status_code == 202
        # Not pending, or an index past the list: still accepted; the owner says why.
        r = client.post("/api/sessions/s/inbox/move", json={"id": "nope", "target": "next-step"})
        assert r.status_code == 202
        big = {"id": "a", "target": "next-step", "index": api.MAX_INDEX}
        assert client.post("/api/sessions/s/inbox/move", json=big).status_code == 202
        assert s.inbox.receive() == 4
        assert [x["id"] for x in s.inbox.next_turn] == ["c", "a"]
        assert [x["id"] for x in s.inbox.next_step] == ["b"]
        events = s.events()
        moved = [e["data"] for e in events if e["data"].get("outcome") == "moved"]
        assert [(r["target"], r["start"]) for r in moved] == [("next-turn", 1), ("next-step", 0)]
        into_step = [e["data"] for e in events if e["data"].get("post") == post]
        assert into_step == [
            {"target": "next-step", "start": 1, "inserted": [m("b")], "post": post}
        ]
        rejected = [e["data"] for e in events if e["type"] == "agent/inbox/rejected"]
        assert [(r["move"], r["reason"]["kind"]) for r in rejected] == [
            ({"id": "nope", "target": "next-step"}, "not_found"),
            (big, "invalid_splice"),
        ]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/sessions/nope", None),
        ("GET", "/api/sessions/nope/events", None),
        ("GET", "/api/sessions/nope/baseline", None),
        ("GET", "/api/sessions/nope/follow", None),
        ("POST", "/api/sessions/nope/inbox", {"target": "next-turn", "message": {"id": "x"}}),
        ("POST", "/api/sessions/nope/inbox/move", {"id": "x", "target": "next-step"}),
    ],
)
def test_an_absent_session_is_404_not_found(
    client: TestClient, method: str, path: str, body: Any
) -> None:
    r = client.request(method, path, json=body)
    assert r.status_code == 404
    got = r.json()
    assert (got["code"], got["kind"], got["session"]) == (5, "not_found", "nope")
    assert "nope" in got["message"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/api/sessions/..bad", None),
        ("GET", "/api/sessions?limit=x", None),
        ("GET", "/api/sessions?limit=0", None),
        ("GET", "/api/sessions/s/events?since=-1", None),
        ("GET", "/api/sessions/s/events?limit=1.5", None),
        ("GET", "/api/sessions/s/baseline?at=x", None),
        ("GET", "/api/sessions/s/follow?since=x", None),
        ("POST", "/api/sessions/s/inbox", {"target": "later", "message": {"id": "x"}}),
        ("POST", "/api/sessions/s/inbox", {"target": "next-turn"}),
        ("POST", "/api/sessions/s/inbox", {"target": "next-turn", "message": {"no": "id"}}),
        ("POST", "/api/sessions/s/inbox", ["not", "an", "object"]),
        ("POST", "/api/sessions/s/inbox/remove", {"id": 7}),
        ("POST", "/api/sessions/s/inbox/replace", {"id": "a"}),
        ("POST", "/api/sessions/s/inbox/move", {"target": "next-step"}),
        ("POST", "/api/sessions/s/inbox/move", {"id": 7, "target": "next-step"}),
        ("POST", "/api/sessions/s/inbox/move", {"id": "a"}),
        ("POST", "/api/sessions/s/inbox/move", {"id": "a", "target": "later"}),
        ("POST", "/api/sessions/s/inbox/move", {"id": "a", "target": "next-step", "index": -1}),
        ("POST", "/api/sessions/s/inbox/move", {"id": "a", "target": "next-step", "index": 1.5}),
        ("POST", "/api/sessions/s/inbox/move", {"id": "a", "target": "next-step", "index": "1"}),
        ("POST", "/api/sessions/s/inbox/move", {"id": "a", "target": "next-step", "index": True}),
        ("POST", "/api/sessions/s/inbox/move", {"id": "a", "target": "next-step", "index": 2**53}),
        ("POST", "/api/sessions/s/inbox/move", {"id": "a", "target": "next-step", "index": 2**64}),
        ("POST", "/api/sessions/s/inbox/move", ["a", "next-step"]),
    ],
)
def test_bad_input_is_400_invalid_input(
    store: inboxlog.Store, client: TestClient, method: str, path: str, body: Any
) -> None:
    store.create("s").close()
    r = client.request(method, path, json=body)
    assert r.status_code == 400, r.text
    assert (r.json()["code"], r.json()["kind"]) == (10, "invalid_input")


def test_a_body_that_is_not_json_is_400(store: inboxlog.Store, client: TestClient) -> None:
    store.create("s").close()
    r = client.post(
        "/api/sessions/s/inbox", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert r.json()["kind"] == "invalid_input"


def test_every_error_kind_has_its_status() -> None:
    expected = {
        "invalid_input": 400,
        "invalid_splice": 400,
        "protocol": 400,
        "not_found": 404,
        "locked": 409,
        "already_exists": 409,
        "duplicate_message": 409,
        "too_large": 413,
        "unavailable": 503,
        "corrupt": 500,
        "io": 500,
    }
    for kind, status in expected.items():
        error = next(
            cls("x")
            for cls in vars(inboxlog).values()
            if isinstance(cls, type)
            and issubclass(cls, inboxlog.InboxlogError)
            and cls is not inboxlog.InboxlogError
            and cls("x").kind == kind
        )
        assert api.status_of(error) == status, kind
        assert api.error_body(error) == {"code": error.code, "kind": kind, "message": "x"}


def test_an_unknown_api_path_is_a_json_404(client: TestClient) -> None:
    r = client.get("/api/nothing-here")
    assert r.status_code == 404
    assert r.json()["kind"] == "not_found"
    r = client.get("/api/sessions/s/inbox")
    assert r.status_code == 405
    assert r.json()["kind"] == "method_not_allowed"


def test_pages_are_served_at_the_root_and_per_session(client: TestClient) -> None:
    for path in ["/", "/sessions/any"]:
        r = client.get(path)
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/html")
        assert "<html" in r.text


def test_import_inboxlog_imports_neither_the_console_nor_starlette() -> None:
    code = (
        "import sys, inboxlog, inboxlog.aio\n"
        "loaded = [m for m in sys.modules if m.startswith(('inboxlog.console', 'starlette', "
        "'uvicorn'))]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_fold_reads_only_what_was_committed_since_the_last_request(
    jsonl: inboxlog.Store,
) -> None:
    class Counting:
        """The store, counting the followers opened and the events they hand out."""

        def __init__(self, store: inboxlog.Store) -> None:
            self.store, self.followers, self.events = store, 0, 0
            self.reads: list[str] = []

        def list(self) -> list[Any]:
            return self.store.list()

        def peek(self, id: str) -> Any:
            self.reads.append("peek")
            return self.store.peek(id)

        def tail(self, id: str, limit: int) -> Any:
            self.reads.append(f"tail {limit}")
            return self.store.tail(id, limit)

        def follow(self, id: str, since: int = 0) -> Any:
            self.followers += 1
            follower, outer = self.store.follow(id, since), self

            class Counted:
                def next_batch(self, timeout: float | None = None) -> list[Any]:
                    batch = follower.next_batch(timeout)
                    outer.events += len(batch)
                    return batch

                def close(self) -> None:
                    follower.close()

            return Counted()

    counting = Counting(jsonl)
    reader = api.Reader(counting)  # type: ignore[arg-type]
    with jsonl.create("s") as s:
        write_turn(s, 50)
        last = s.last_seq
        assert last is not None
        assert reader.summary("s")["lastSeq"] == last
        # The state from a peek, the latest events from a tail, a follower at the end.
        assert counting.reads == ["peek", f"tail {api.RECENT}"]
        assert (counting.followers, counting.events) == (1, 0)
        s.append("host/x", {})
        s.append("host/x", {})
        assert reader.summary("s")["baseline"] == s.baseline()
        # The same follower, two more events: nothing read again.
        assert (counting.followers, counting.events) == (1, 2)
        page = reader.events("s", 40, 500)
        assert page == {"events": s.events(40), "next": None}
        assert (counting.followers, counting.events) == (1, 2)
        assert counting.reads == ["peek", f"tail {api.RECENT}"]
