"""`Session._append_behind` and the `Behind` the integrations await: an append written
by a writer thread while the caller goes on, its outcome, its order and its wake-up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
from pathlib import Path
from typing import Any

import pytest

import inboxlog
from inboxlog.integrations._common import Behind


def types(session: inboxlog.Session) -> list[str]:
    return [e["type"] for e in session.events()]


def test_an_append_behind_lands_in_order_with_what_the_session_wrote_before(
    session: inboxlog.Session,
) -> None:
    session.append("host/first", {"n": 0})
    behind = [session._append_behind("host/behind", {"n": n}) for n in range(1, 20)]
    for written in behind:
        written.wait()
        assert written.done and written.appended
    events = session.events()
    assert [e["data"]["n"] for e in events] == list(range(20))
    assert {e["type"] for e in events[1:]} == {"host/behind"}


def test_its_error_raises_at_wait_once_and_nothing_is_appended(
    session: inboxlog.Session,
) -> None:
    written = session._append_behind("turn/start", {"turn": 9})  # a reserved type
    with pytest.raises(inboxlog.InvalidInputError, match="turn/start is written only by"):
        written.wait()
    assert written.done and not written.appended
    written.wait()  # reported once
    assert types(session) == []


def test_an_append_behind_a_closed_session_raises_closed(store: inboxlog.Store) -> None:
    session = store.create("s")
    session.close()
    written = session._append_behind("host/late", {})
    with pytest.raises(inboxlog.ClosedError):
        written.wait()


def test_data_that_is_not_json_is_refused_at_the_call(session: inboxlog.Session) -> None:
    with pytest.raises(inboxlog.InvalidInputError, match="NaN is not a JSON number"):
        session._append_behind("host/x", {"x": float("nan")})
    with pytest.raises(inboxlog.InvalidInputError, match="is not a JSON value"):
        session._append_behind("host/x", {"x": object()})
    assert types(session) == []


def test_receive_takes_the_posts_in_after_the_append(tmp_path: Path) -> None:
    store = inboxlog.Store(tmp_path, durability="none")
    session = store.create("s")
    post = store.post("s", "next-step", {"id": "p1", "content": "steer"})
    written = session._append_behind("host/response", {}, True)
    written.wait()
    assert [m["id"] for m in session.inbox.next_step] == ["p1"]
    assert types(session) == ["host/response", "agent/inbox/spliced"]
    assert session.events()[-1]["data"]["post"] == post


def test_the_wake_socket_turns_readable_when_the_append_ends(tmp_path: Path) -> None:
    session = inboxlog.Store(tmp_path, durability="sync").create("s")
    seen = 0
    for n in range(50):
        written = session._append_behind("host/x", {"n": n})
        fd = written.wake_fd()
        if fd is None:  # ended before it was asked
            assert written.done
            continue
        seen += 1
        while not written.done:
            readable, _, _ = select.select([fd], [], [], 10)
            assert readable, "no wake-up within 10 s"
            with contextlib.suppress(BlockingIOError):
                os.read(fd, 4096)
        written.wait()
    assert len(session.events()) == 50
    assert seen > 0  # some fsync outlasted the call that asked for it


def test_behind_waits_on_the_loop_through_a_cancellation(tmp_path: Path) -> None:
    """`Behind.outcome()` is awaited while the write goes on; a cancellation meanwhile is
    re-raised only once the append has ended, so the caller knows what it wrote."""
    session = inboxlog.Store(tmp_path, durability="sync").create("s")

    async def main() -> None:
        behind = [Behind(session._append_behind("host/x", {"n": n})) for n in range(30)]

        async def wait_all() -> None:
            for b in behind:
                await b.outcome()

        task = asyncio.create_task(wait_all())
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert behind[0].written.done
        for b in behind:
            await b.outcome()

    asyncio.run(main())
    assert [e["data"]["n"] for e in session.events()] == list(range(30))


def test_behind_raises_the_append_error_on_the_loop(session: inboxlog.Session) -> None:
    async def main() -> None:
        behind = Behind(session._append_behind("step/start", {"turn": 1, "step": 1}))
        with pytest.raises(inboxlog.InvalidInputError):
            await behind.outcome()

    asyncio.run(main())


def test_an_append_behind_in_a_forked_child_is_written(tmp_path: Path) -> None:
    """The writer threads do not survive a fork; a child starts its own."""
    store = inboxlog.Store(tmp_path, durability="none")
    with store.create("parent") as parent:
        parent._append_behind("host/x", {}).wait()  # the parent's writer thread runs
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            with inboxlog.Store(tmp_path, durability="none").create("child") as child:
                child._append_behind("host/child", {"ok": True}).wait()
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [e["type"] for e in store.inspect("child")[1]] == ["host/child"]


def test_a_step_boundary_behind_answers_what_step_boundary_does(store: inboxlog.Store) -> None:
    """The same answers and the same events as the call itself, in two sessions: a
    turn's first boundary, one that ends a step and claims steering, and one whose step
    concludes the turn (``None``: nothing claimed)."""

    def turn(s: inboxlog.Session, behind: bool) -> list[Any]:
        def boundary(end: Any, whole: bool = True) -> Any:
            if behind:
                return s._step_boundary_behind(end, whole_next_turn=whole).wait()
            return s.step_boundary(end, whole_next_turn=whole)

        s.inbox.append("next-turn", {"id": "m1", "content": "hi"})
        s.open_turn()
        answers = [boundary(None)]
        s.inbox.append("next-step", {"id": "m2", "content": "steer"})
        answers.append(boundary("continue"))
        answers.append(boundary("completed"))
        s.close_turn()
        return answers

    plain, behind = store.create("plain"), store.create("behind")
    answers = turn(behind, True)
    assert answers == turn(plain, False)
    assert [m["id"] for m in answers[1]["proposal"]["messages"]] == ["m2"]
    assert answers[2] is None

    def untimed(s: inboxlog.Session) -> list[tuple[str, Any]]:
        return [
            (e["type"], {k: v for k, v in e["data"].items() if k != "time"}) for e in s.events()
        ]

    assert untimed(behind) == untimed(plain)


def test_a_step_boundary_behind_out_of_order_raises_at_wait(session: inboxlog.Session) -> None:
    written = session._step_boundary_behind("continue")  # no turn open
    with pytest.raises(inboxlog.ProtocolError):
        written.wait()
    assert written.done and not written.appended
    assert types(session) == []
