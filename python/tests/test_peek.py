"""``Store.peek``: what a log holds now, read without owning it (SPEC §7.7), on every
store: the writer's own inbox and turn while it holds the session, a turn left open
reported and not closed, and the errors ``open`` would raise."""

from __future__ import annotations

import pytest

import inboxlog


def msg(id: str) -> dict[str, str]:
    return {"id": id, "role": "user", "content": f"do {id}"}


def test_a_peek_reads_the_writers_state_without_taking_the_session(
    store: inboxlog.Store,
) -> None:
    with store.create("s") as s:
        s.inbox.append("next-turn", msg("a"))
        turn = s.open_turn()
        proposal = s.propose_step()
        s.decide({"kind": "enter", "messages": proposal["messages"]})
        s.inbox.append("next-step", msg("steer"))
        seen = store.peek("s")
        assert seen["baseline"] == s.baseline()
        assert seen["events"] == s.last_seq + 1  # type: ignore[operator]
        assert (seen["openTurn"], seen["openStep"]) == (turn, 1)
        assert seen["header"] == s.header and seen["tornBytes"] == 0
        # The writer still holds it.
        s.inbox.append("next-step", msg("more"))
    seen = store.peek("s")
    assert [m["id"] for m in seen["baseline"]["next_step"]] == ["steer", "more"]
    assert seen["openTurn"] == turn  # left open, not closed


def test_a_peek_raises_what_open_would(store: inboxlog.Store) -> None:
    with pytest.raises(inboxlog.NotFoundError):
        store.peek("nope")
    with pytest.raises(inboxlog.InvalidInputError):
        store.peek("../x")
