"""Steering posted by another process during a turn's last step (SPEC §4, §11.1, §12).

While the model makes what would be its last call (the step entered, not yet ended),
a subprocess posts a message to the session's ``next-step``. Whichever way the step
ends (``end_step``, ``end_step_and_close``, ``step_boundary``), the session takes the
post in before it answers, so the turn goes on and the next step claims the message
exactly once. On every store another process reaches (JSONL and PostgreSQL); the
memory store, which no other process reaches, gets the post from the same process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import PG_URL, m, sql

import inboxlog

STEER = m("steer", role="user", content="stop")


@pytest.fixture(params=["memory", "jsonl", "postgres"])
def shared(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[inboxlog.Store, str | None]]:
    """A store, with the Python that opens it again in another process (``None`` for
    the memory store, which no other process reaches)."""
    if request.param == "memory":
        yield inboxlog.Store.memory(), None
        return
    if request.param == "jsonl":
        root = tmp_path / "logs"
        yield inboxlog.Store(root, durability="none"), f"inboxlog.Store({str(root)!r})"
        return
    schema = f"py_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    try:
        store = inboxlog.Store.postgres(PG_URL, schema=schema, durability="sync")
    except inboxlog.UnavailableError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server at INBOXLOG_TEST_PG: {e}")
    yield store, f"inboxlog.Store.postgres({PG_URL!r}, schema={schema!r})"
    del store
    sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def post_from_another_process(opener: str, session: str, cwd: Path) -> str:
    """Posts STEER to ``next-step`` of ``session`` from a subprocess; its post id."""
    code = textwrap.dedent(f"""
        import inboxlog
        store = {opener}
        print(store.post({session!r}, "next-step", {STEER!r}))
    """)
    done = subprocess.run(
        [sys.executable, "-P", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,  # not python/, whose source tree has no built extension
    )
    return done.stdout.strip()


@pytest.mark.parametrize("way", ["end_step", "end_step_and_close", "step_boundary"])
def test_steering_posted_by_another_process_during_the_last_step_is_claimed_once(
    shared: tuple[inboxlog.Store, str | None], way: str, tmp_path: Path
) -> None:
    store, opener = shared
    with store.create(way) as s:
        s.inbox.append("next-turn", m("q", role="user", content="go"))
        s.open_turn()
        first = s.step_boundary()
        assert first is not None
        assert first["proposal"]["messages"] == [m("q", role="user", content="go")]
        # The model's last call: it answers without tools while steering is posted.
        if opener is None:
            post = store.post(way, "next-step", STEER)
        else:
            post = post_from_another_process(opener, way, tmp_path)
        if way == "end_step":
            assert s.end_step("completed") is True
            claimed = s.propose_step()["messages"]
            s.decide({"kind": "enter", "messages": claimed})
        elif way == "end_step_and_close":
            assert s.end_step_and_close("completed") is None
            claimed = s.propose_step()["messages"]
            s.decide({"kind": "enter", "messages": claimed})
        else:
            boundary = s.step_boundary("completed")
            assert boundary is not None
            assert boundary["decided"] == {"kind": "step", "turn": 1, "step": 2}
            claimed = boundary["proposal"]["messages"]
        assert claimed == [STEER]
        ended = s.end_step_and_close("completed")
        assert ended is not None and ended["reason"] == {"kind": "completed"}
        events = s.events()
        taken = [e for e in events if e["type"] == "agent/inbox/spliced" and "post" in e["data"]]
        assert [e["data"]["post"] for e in taken] == [post]
        entered = [e for e in events if e["type"] == "user/message" and e["data"]["id"] == "steer"]
        assert len(entered) == 1
        assert s.inbox.receive() == 0
    with store.open(way) as again:
        assert len(again.events()) == len(events)
        assert not again.inbox.next_step and not again.inbox.next_turn
