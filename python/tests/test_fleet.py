"""Posting to a session from anywhere and following it (ARCHITECTURE.md#posting), from Python."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import m

import inboxlog


def test_a_post_is_taken_in_once_with_its_post_id(store: inboxlog.Store) -> None:
    store.create("s").close()
    post = store.post("s", "next-turn", m("a", content="hi"))
    assert isinstance(post, str) and post
    with store.open("s") as s:
        assert s.inbox.next_turn == [m("a", content="hi")]
        [event] = s.events()
        assert event["data"] == {
            "target": "next-turn",
            "start": 0,
            "inserted": [m("a", content="hi")],
            "post": post,
        }
        assert s.inbox.receive() == 0
        store.post("s", "next-step", m("b"))
        notices: list[str] = []
        s.on_inbox(lambda n: notices.append(n["type"]))
        assert s.inbox.receive() == 1
        assert notices == ["agent/inbox/inserted"]
        assert s.inbox.next_step == [m("b")]


def test_a_post_with_a_pending_id_is_rejected(store: inboxlog.Store) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", m("dup"))
        post = store.post("s", "next-turn", m("dup", v=2))
        s.open_turn()
        proposal = s.propose_step()  # takes posts in first
        assert proposal["messages"] == [m("dup")]
        rejected = [e for e in s.events() if e["type"] == "agent/inbox/rejected"]
        assert rejected == [
            {
                "type": "agent/inbox/rejected",
                "seq": 2,
                "time": rejected[0]["time"],
                "data": {
                    "message": m("dup", v=2),
                    "reason": {
                        "code": 8,
                        "kind": "duplicate_message",
                        "message": 'message "dup" is already pending',
                    },
                    "post": post,
                },
                "ignorable": True,
            }
        ]
        with pytest.raises(inboxlog.InvalidInputError, match="written only by inboxlog"):
            s.append("agent/inbox/rejected", {})


def test_posts_are_refused_for_missing_sessions_bad_ids_and_bad_values(
    store: inboxlog.Store,
) -> None:
    with pytest.raises(inboxlog.NotFoundError):
        store.post("nope", "next-turn", m("a"))
    with pytest.raises(inboxlog.InvalidInputError):
        store.post("../x", "next-turn", m("a"))
    store.create("s").close()
    with pytest.raises(inboxlog.InvalidInputError, match="target"):
        store.post("s", "later", m("a"))  # type: ignore[arg-type]
    with pytest.raises(inboxlog.InvalidInputError, match="id"):
        store.post("s", "next-turn", {"content": "no id"})
    with pytest.raises(TypeError):
        store.post("s", "next-turn", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(inboxlog.NotFoundError):
        store.follow("nope")


def test_pending_input_is_removed_and_replaced_from_anywhere(store: inboxlog.Store) -> None:
    store.create("s").close()
    posted = store.post("s", "next-turn", m("a"))
    removed = store.remove_pending("s", "a")  # after its post, from the same poster
    store.post("s", "next-step", m("b"))
    replaced = store.replace_pending("s", "b", m("b2", content="better"))
    assert len({posted, removed, replaced}) == 3
    with store.open("s") as s:
        assert s.inbox.next_turn == []
        assert s.inbox.next_step == [m("b2", content="better")]
        events = s.events()
        assert [e["data"].get("post") for e in events] == [
            posted,
            removed,
            events[2]["data"]["post"],
            replaced,
        ]
        assert events[1]["data"] == {
            "target": "next-turn",
            "start": 0,
            "removedCount": 1,
            "inserted": [],
            "outcome": "canceled",
            "post": removed,
        }
        # Live: the usual notifications, as for a local replace.
        notices: list[str] = []
        s.on_inbox(lambda n: notices.append(f"{n['type']} {n['message']['id']}"))
        store.replace_pending("s", "b2", m("b3"))
        assert s.inbox.receive() == 1
        assert notices == ["agent/inbox/discarded b2", "agent/inbox/inserted b3"]
        assert s.inbox.next_step == [m("b3")]
        assert s.inbox.receive() == 0


def test_an_edit_that_finds_nothing_to_change_is_rejected(store: inboxlog.Store) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", m("a"))
        s.inbox.append("next-step", m("b"))
        s.open_turn()
        s.propose_step()  # claims "b" (next-step) and "a"
        assert not s.inbox.has_pending
        s.inbox.append("next-turn", m("c"))
        p1 = store.remove_pending("s", "a")
        p2 = store.replace_pending("s", "c", m("c", v=2))
        p3 = store.post("s", "next-turn", m("d"))
        p4 = store.replace_pending("s", "d", m("c"))
        assert s.inbox.receive() == 4
        rejected = [e["data"] for e in s.events() if e["type"] == "agent/inbox/rejected"]
        assert rejected == [
            {
                "edit": {"op": "remove", "id": "a"},
                "reason": {"code": 5, "kind": "not_found", "message": 'message "a" is not pending'},
                "post": p1,
            },
            {
                "edit": {"op": "replace", "id": "d", "message": m("c")},
                "reason": {
                    "code": 8,
                    "kind": "duplicate_message",
                    "message": 'message "c" is already pending',
                },
                "post": p4,
            },
        ]
        assert s.inbox.next_turn == [m("c", v=2), m("d")]
        assert [e["data"].get("post") for e in s.events()][-3:-1] == [p2, p3]


def test_edits_are_refused_for_missing_sessions_empty_ids_and_bad_values(
    store: inboxlog.Store,
) -> None:
    with pytest.raises(inboxlog.NotFoundError):
        store.remove_pending("nope", "a")
    with pytest.raises(inboxlog.NotFoundError):
        store.replace_pending("nope", "a", m("b"))
    with pytest.raises(inboxlog.InvalidInputError):
        store.remove_pending("../x", "a")
    store.create("s").close()
    with pytest.raises(inboxlog.InvalidInputError, match="must not be empty"):
        store.remove_pending("s", "")
    with pytest.raises(inboxlog.InvalidInputError, match="id"):
        store.replace_pending("s", "a", {"content": "no id"})
    with pytest.raises(TypeError):
        store.replace_pending("s", "a", ["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        store.remove_pending("s", 7)  # type: ignore[arg-type]


def test_a_follower_yields_events_as_they_commit_and_resumes(store: inboxlog.Store) -> None:
    with store.create("s") as s:
        s.append("x/a", {"n": 0})
        follower = store.follow("s")
        assert repr(follower) == '<inboxlog.Follower of session "s">'
        assert follower.session == "s"
        first = follower.next(timeout=5)
        assert first is not None and first["seq"] == 0
        assert follower.next(timeout=0.01) is None

        def write() -> None:
            for i in range(1, 30):
                s.append("x/a", {"n": i})

        writer = threading.Thread(target=write)
        writer.start()
        seqs = []
        for event in follower:
            seqs.append(event["seq"])
            if len(seqs) == 10:
                break
        resume = follower.next_seq
        follower.close()
        with pytest.raises(inboxlog.ClosedError):
            follower.next(timeout=0)
        writer.join()
        with store.follow("s", since=resume) as again:
            while len(seqs) < 29:
                event = again.next(timeout=5)
                assert event is not None
                seqs.append(event["seq"])
        assert seqs == list(range(1, 30))


def test_a_follower_feeds_a_queue_projection(jsonl: inboxlog.Store) -> None:
    with jsonl.create("s") as s:
        follower = jsonl.follow("s")
        projection = inboxlog.QueueProjection()
        for i in range(40):
            s.inbox.append("next-turn" if i % 2 else "next-step", m(f"m{i}"))
            if i % 5 == 0:
                s.inbox.remove(f"m{i}")
        last = s.last_seq
        while projection.seq != last:
            event = follower.next(timeout=5)
            assert event is not None
            projection.apply(event)
        assert projection.baseline == s.baseline()


def test_a_post_from_another_process(tmp_path: Path) -> None:
    root = tmp_path / "logs"
    store = inboxlog.Store(root, durability="none")
    with store.create("s") as s:
        code = textwrap.dedent(f"""
            import inboxlog
            store = inboxlog.Store({str(root)!r})
            print(store.post("s", "next-turn", {{"id": "remote"}}))
        """)
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp_path,  # not python/, whose source tree has no built extension
        )
        post = done.stdout.strip()
        deadline = time.monotonic() + 5
        while not s.inbox.receive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert s.inbox.next_turn == [m("remote")]
        assert s.events()[-1]["data"]["post"] == post
