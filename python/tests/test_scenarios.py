"""The reference scenarios of ARCHITECTURE.md#inbox to ARCHITECTURE.md#consumed-work-fold,
restated in Python on both stores."""

from __future__ import annotations

import math
from typing import Any

import pytest
from conftest import m, next_seq, spliced

import inboxlog


def test_three_splices_of_one_prompt(store: inboxlog.Store) -> None:
    m1 = m("m1", role="user", content="hi")
    with store.create("claim") as s:
        s.inbox.append("next-turn", m1)
        assert s.open_turn() == 1
        s.propose_step()  # the empty next-step claim writes nothing
        assert spliced(s) == [
            {"target": "next-turn", "start": 0, "inserted": [m1]},
            {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []},
        ]
        assert [e["type"] for e in s.events()] == [
            "agent/inbox/spliced",
            "turn/start",
            "agent/inbox/spliced",
        ]
    with store.create("cancel") as s:
        s.inbox.append("next-turn", m1)
        s.cancel()
        assert spliced(s)[-1] == {
            "target": "next-turn",
            "start": 0,
            "removedCount": 1,
            "inserted": [],
            "outcome": "canceled",
        }
        assert list(spliced(s)[-1]) == ["target", "start", "removedCount", "inserted", "outcome"]


def test_replace_across_both_lists(session: inboxlog.Session) -> None:
    notices: list[dict[str, Any]] = []
    session.inbox.append("next-turn", m("a"))
    session.inbox.append("next-step", m("b"))
    session.on_inbox(notices.append)
    since = next_seq(session)
    assert session.inbox.replace("b", m("b2", text="edited"))
    assert session.inbox.replace("a", m("a2"))
    assert spliced(session, since) == [
        {
            "target": "next-step",
            "start": 0,
            "removedCount": 1,
            "inserted": [m("b2", text="edited")],
            "outcome": "canceled",
        },
        {
            "target": "next-turn",
            "start": 0,
            "removedCount": 1,
            "inserted": [m("a2")],
            "outcome": "canceled",
        },
    ]
    assert notices == [
        {"type": "agent/inbox/discarded", "message": m("b")},
        {"type": "agent/inbox/inserted", "message": m("b2", text="edited")},
        {"type": "agent/inbox/discarded", "message": m("a")},
        {"type": "agent/inbox/inserted", "message": m("a2")},
    ]
    # Same id kept: allowed.
    assert session.inbox.replace("a2", m("a2", v=2))
    assert session.inbox.next_turn == [m("a2", v=2)]


def test_replacement_duplicating_a_pending_id_fails(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("a"))
    session.inbox.append("next-step", m("b"))
    seq = next_seq(session)
    with pytest.raises(inboxlog.DuplicateMessageError, match='message "b" is already pending'):
        session.inbox.replace("a", m("b"))
    assert next_seq(session) == seq
    assert session.inbox.next_turn == [m("a")]


def test_nan_nan_inserts_at_zero(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("a"))
    session.inbox.append("next-turn", m("b"))
    assert session.inbox.splice("next-turn", math.nan, math.nan, [m("x")]) == []
    assert [x["id"] for x in session.inbox.next_turn] == ["x", "a", "b"]
    assert spliced(session)[-1] == {"target": "next-turn", "start": 0, "inserted": [m("x")]}


def test_minus_one_one_removes_the_last(session: inboxlog.Session) -> None:
    for i in "abc":
        session.inbox.append("next-step", m(i))
    assert session.inbox.splice("next-step", -1, 1, []) == [m("c")]
    assert spliced(session)[-1] == {
        "target": "next-step",
        "start": 2,
        "removedCount": 1,
        "inserted": [],
        "outcome": "canceled",
    }


@pytest.mark.parametrize(
    ("start", "delete", "expect"),
    [
        (math.inf, 1, ["a", "b", "c", "x"]),
        (-math.inf, math.inf, ["x"]),
        (1.9, 1.9, ["a", "x", "c"]),
        (-1.5, 5, ["a", "b", "x"]),
        (-10, -2, ["x", "a", "b", "c"]),
        (10**400, 1, ["a", "b", "c", "x"]),
        (-(10**400), 10**400, ["x"]),
    ],
)
def test_javascript_coordinates(
    session: inboxlog.Session, start: float, delete: float, expect: list[str]
) -> None:
    for i in "abc":
        session.inbox.append("next-turn", m(i))
    session.inbox.splice("next-turn", start, delete, [m("x")])
    assert [x["id"] for x in session.inbox.next_turn] == expect


def test_clear_cancels_next_step_first(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("t1"))
    session.inbox.append("next-turn", m("t2"))
    session.inbox.append("next-step", m("s1"))
    since = next_seq(session)
    session.inbox.clear()
    assert spliced(session, since) == [
        {
            "target": "next-step",
            "start": 0,
            "removedCount": 1,
            "inserted": [],
            "outcome": "canceled",
        },
        {
            "target": "next-turn",
            "start": 0,
            "removedCount": 2,
            "inserted": [],
            "outcome": "canceled",
        },
    ]
    seq = next_seq(session)
    session.inbox.clear()
    assert next_seq(session) == seq


def test_steering_mid_turn(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("p"))
    session.open_turn()
    session.decide(inboxlog.pre_step(session.propose_step(), []))
    session.inbox.append("next-step", m("steer"))
    session.inbox.append("next-turn", m("later"))
    assert session.end_step("completed") is True  # steering arrived
    with pytest.raises(inboxlog.ProtocolError, match="steering message"):
        session.close_turn()
    proposal = session.propose_step()
    assert proposal["messages"] == [m("steer")]
    session.decide({"kind": "enter", "messages": proposal["messages"]})
    assert session.end_step("completed") is False
    assert session.close_turn()["reason"] == {"kind": "completed"}
    assert session.inbox.next_turn == [m("later")]


def run_turn(s: inboxlog.Session, decision: str = "enter", steps: int = 1) -> None:
    s.open_turn()
    p = s.propose_step()
    if decision == "reject":
        s.decide({"kind": "reject"})
        return
    s.decide({"kind": "enter", "messages": p["messages"] if steps else []})
    if steps:
        s.end_step("completed")
        s.close_turn()


def test_fold_cases(store: inboxlog.Store) -> None:
    fold = inboxlog.fold_consumed_work
    with store.create("f") as s:
        assert fold(s.events()) == {"end": None, "droppedUnrun": False}

        # A balanced no-step turn with no input accounts for nothing.
        run_turn(s, steps=0)
        assert fold(s.events())["end"] is None

        # A stepped turn accounts for its work.
        s.inbox.append("next-turn", m("a"))
        run_turn(s)
        end = fold(s.events())["end"]
        assert end is not None and end == s.events()[-1]
        assert end["data"] == {"turn": 2, "reason": {"kind": "completed"}}

        # A claimed, blocked turn accounts too (not completed).
        s.inbox.append("next-turn", m("b"))
        run_turn(s, "reject")
        result = fold(s.events())
        assert result["end"] == s.events()[-1] and result["droppedUnrun"] is False

        # A replacement keeps work pending: not dropped.
        s.inbox.append("next-turn", m("c"))
        s.inbox.replace("c", m("c2"))
        assert fold(s.events())["droppedUnrun"] is False

        # A bare cancel drops work unrun.
        s.cancel()
        assert fold(s.events())["droppedUnrun"] is True

        # The next accounting turn resets it.
        s.inbox.append("next-turn", m("d"))
        run_turn(s)
        assert fold(s.events()) == {"end": s.events()[-1], "droppedUnrun": False}

        # An owned suffix folds the same way.
        since = next_seq(s)
        s.inbox.append("next-turn", m("e"))
        s.open_turn()
        s.propose_step()
        s.fail({"message": "model down", "code": "E_MODEL"})
        result = fold(s.events(since))
        assert result["end"] is not None
        assert result["end"]["data"]["reason"]["kind"] == "error"


def test_interrupted_turn_is_repaired_and_inbox_replayed(store: inboxlog.Store) -> None:
    s = store.create("crash")
    s.inbox.append("next-turn", m("a"))
    s.inbox.append("next-turn", m("b"))
    s.inbox.append("next-step", m("s"))
    s.open_turn()
    p = s.propose_step()
    s.decide({"kind": "enter", "messages": p["messages"]})
    s.inbox.append("next-step", m("late"))
    stored = len(s.events())
    s.close()  # the writer stops mid-step
    with store.open("crash") as again:
        assert again.open_report["repairedTurn"] == 1
        tail = again.events(stored)
        assert [(e["type"], e["data"]) for e in tail] == [
            ("step/end", {"turn": 1, "step": 1}),
            ("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}}),
        ]
        assert all(e["time"] == tail[0]["time"] for e in tail)
        assert again.inbox.next_turn == [m("b")]
        assert again.inbox.next_step == [m("late")]
        assert inboxlog.fold_consumed_work(again.events())["end"] == tail[-1]
    with store.open("crash") as third:
        assert third.open_report["repairedTurn"] is None
        assert len(third.events()) == stored + 2
