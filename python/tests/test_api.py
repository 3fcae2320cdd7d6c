"""Every call of the ARCHITECTURE.md#python surface, on both stores."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import m, next_seq, said, spliced, tool_call, tool_result

import inboxlog


def test_version_comes_from_cargo() -> None:
    cargo = (Path(__file__).parents[2] / "Cargo.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', cargo, re.MULTILINE)
    assert version is not None
    assert inboxlog.__version__ == version.group(1)
    assert inboxlog._native.__version__ == inboxlog.__version__


def test_public_names() -> None:
    for name in inboxlog.__all__:
        assert hasattr(inboxlog, name), name
    assert inboxlog.FORMAT_VERSION == 2
    assert inboxlog.MAX_DEPTH == 512


@pytest.mark.parametrize("durability", ["sync", "batched", "none"])
def test_store_path_and_durability(tmp_path: Path, durability: str) -> None:
    store = inboxlog.Store(str(tmp_path / "d"), durability)
    with store.create("a") as s:
        s.inbox.append("next-turn", m("m1"))
        s.flush()
    lines = (tmp_path / "d" / "a.jsonl").read_text().splitlines()
    assert lines[0].startswith('{"format":"inboxlog","version":2,"id":"a","createdAt":')
    assert lines[1].startswith('{"type":"agent/inbox/spliced","seq":0,"time":')
    # Format version 2: the event, then its checksum (never part of the event).
    event, seal = lines[1].split(',"synced":')
    assert event.endswith(',"data":{"target":"next-turn","start":0,"inserted":[{"id":"m1"}]}')
    assert re.fullmatch(r'[0-9]+,"crc32c":"[0-9a-f]{8}"\}', seal), seal
    assert "Store(" in repr(store)


def test_store_create_open_fork_inspect_list(store: inboxlog.Store) -> None:
    s = store.create("p", cwd="/w", agent_preset="coder")
    assert s.id == "p"
    header = s.header
    assert list(header) == ["format", "version", "id", "createdAt", "cwd", "agentPreset"]
    assert header["cwd"] == "/w" and header["agentPreset"] == "coder"
    s.inbox.append("next-turn", m("m1"))
    s.open_turn()
    s.propose_step()
    s.close()

    s = store.open("p")
    assert s.open_report == {"tornBytes": 0, "repairedTurn": 1, "repairedCompaction": None}
    assert [e["type"] for e in s.events()][-1] == "turn/end"
    s.inbox.append("next-turn", m("m2"))

    child = store.fork("p", "c", origin="subagent", delegation_depth=1)
    ch = child.header
    assert ch["parentSession"] == "p" and ch["cwd"] == "/w"
    assert ch["origin"] == "subagent" and ch["delegationDepth"] == 1
    assert ch["seedLength"] == len(s.events())
    assert child.inbox.next_turn == []
    assert child.events()[-1]["type"] == "session/end-seed"
    assert child.open_turn() == 2
    child.close()
    grandchild = store.fork("c", "g", origin="subagent", delegation_depth=2, agent_preset="x")
    assert (grandchild.header["delegationDepth"], grandchild.header["agentPreset"]) == (2, "x")
    grandchild.close()

    header, events = store.inspect("p")
    assert header == s.header
    assert events == s.events()
    assert [h["id"] for h in store.list()] == ["c", "g", "p"]
    s.close()


def test_create_with_seed(store: inboxlog.Store) -> None:
    with store.create("src") as src:
        src.append("note", {"a": 1})
        seed = src.events()
    with store.create("seeded", seed=seed, seed_length=1) as s:
        assert s.header["seedLength"] == 1
        assert [e["type"] for e in s.events()] == ["note", "session/end-seed"]


def test_session_fields_and_events(session: inboxlog.Session) -> None:
    assert session.last_seq is None
    assert session.current_turn is None
    assert session.events() == []
    # Host keys after the library's, in their order.
    called = tool_call(0, 0, "c1", "ls", "{}", z=1, a=[1, 2.5, None, True])
    e = session.append("tool/call", called)
    assert e == {"type": "tool/call", "seq": 0, "time": e["time"], "data": called}
    assert list(e["data"]) == ["turn", "step", "callId", "name", "arguments", "z", "a"]
    assert isinstance(e["time"], int) and e["time"] > 0
    e2 = session.append(
        "tool/result",
        tool_result(0, 0, "c1", "ok"),
        ignorable=True,
        surface_op="append",
        source_event_seqs=[0],
    )
    assert list(e2) == ["type", "seq", "time", "data", "ignorable", "surfaceOp", "sourceEventSeqs"]
    assert e2["surfaceOp"] == "append"
    assert session.append("user/message", m("u1"), surface_op="append")["surfaceOp"] == "append"
    e3 = session.append(
        "assistant/message", said(0, 0, "a1", "hi"), surface_op="append", source_event_seqs=[0, 1]
    )
    assert (e3["surfaceOp"], e3["sourceEventSeqs"]) == ("append", [0, 1])
    with pytest.raises(TypeError):
        session.append("tool/result", {}, surfaceop="append")  # type: ignore[call-arg]
    assert session.last_seq == 3
    assert [e["seq"] for e in session.events(since=2)] == [2, 3]
    assert session.events(99) == []
    session.flush()


def test_close_and_context_manager(store: inboxlog.Store) -> None:
    with store.create("x") as s:
        assert not s.closed
    assert s.closed
    s.close()  # idempotent
    with pytest.raises(inboxlog.ClosedError, match='session "x" is closed'):
        s.events()
    # Closing released the writer: the log opens again.
    store.open("x").close()


def test_inbox_reads_and_mutations(session: inboxlog.Session) -> None:
    inbox = session.inbox
    assert inbox.next_turn == [] and inbox.next_step == [] and not inbox.has_pending
    inbox.append("next-turn", m("b"))
    inbox.prepend("next-turn", m("a"))
    inbox.append("next-step", m("s"))
    assert inbox.has_pending
    assert [x["id"] for x in inbox.next_turn] == ["a", "b"]
    assert inbox.splice("next-turn", 1, 1, [m("c"), m("d")]) == [m("b")]
    assert [x["id"] for x in inbox.next_turn] == ["a", "c", "d"]
    assert inbox.splice("next-turn", 0, 0) == []
    assert inbox.replace("c", m("c2", text="new")) is True
    assert inbox.replace("nope", m("z")) is False
    assert inbox.remove("s") is True
    assert inbox.remove("s") is False
    assert [x["id"] for x in inbox.next_turn] == ["a", "c2", "d"]
    inbox.clear()
    assert not inbox.has_pending
    assert "Inbox" in repr(inbox)


def test_protocol_calls(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("m1"))
    assert session.open_turn() == 1
    assert session.current_turn == 1
    proposal = session.propose_step()
    assert proposal == {"turn": 1, "step": 1, "messages": [m("m1")]}
    decided = session.decide({"kind": "enter", "messages": proposal["messages"]})
    assert decided == {"kind": "step", "turn": 1, "step": 1}
    assert session.end_step("continue") is True
    session.propose_step()
    assert session.decide({"kind": "enter", "messages": []}) == {
        "kind": "step",
        "turn": 1,
        "step": 2,
    }
    assert session.end_step("max-tokens") is False
    assert session.close_turn() == {
        "kind": "turn-end",
        "turn": 1,
        "reason": {"kind": "max-tokens"},
    }
    assert session.current_turn is None

    session.inbox.append("next-turn", m("m2"))
    session.open_turn()
    session.propose_step()
    assert session.decide({"kind": "reject"}) == {
        "kind": "turn-end",
        "turn": 2,
        "reason": {"kind": "blocked"},
    }

    session.open_turn()
    session.fail({"message": "boom", "code": "E1", "retry": True})
    assert session.events()[-1]["data"] == {
        "turn": 3,
        "reason": {"kind": "error", "error": {"message": "boom", "code": "E1", "retry": True}},
    }

    for cause, expected in [
        (None, {"kind": "user"}),
        ("parent", {"kind": "parent"}),
        ({"kind": "hook", "reason": "policy"}, {"kind": "hook", "reason": "policy"}),
    ]:
        session.open_turn()
        session.cancel(cause)
        assert session.events()[-1]["data"]["reason"] == {"kind": "aborted", "reason": expected}


def test_fused_protocol_calls_write_what_the_separate_calls_write(
    store: inboxlog.Store,
) -> None:
    """``step_boundary`` and ``end_step_and_close`` answer and write as the calls they
    stand for, and refuse as the first of them, with nothing written."""

    def run(s: inboxlog.Session, fused: bool) -> list[Any]:
        seen: list[Any] = []

        def note(call: Callable[[], object]) -> None:
            try:
                seen.append(call())
            except inboxlog.ProtocolError as e:
                seen.append(("refused", str(e).replace(s.id, "<id>")))

        def boundary(end: Any, whole: bool = False) -> object:
            if fused:
                return s.step_boundary(end, whole_next_turn=whole)
            if end is not None and not s.end_step(end):
                return None
            proposal = s.propose_step(whole_next_turn=whole)
            decided = s.decide({"kind": "enter", "messages": proposal["messages"]})
            return {"proposal": proposal, "decided": decided}

        def end_and_close(outcome: Any) -> object:
            if fused:
                return s.end_step_and_close(outcome)
            return None if s.end_step(outcome) else s.close_turn()

        note(lambda: boundary("continue"))
        note(lambda: end_and_close("completed"))
        s.inbox.append("next-turn", m("t1"))
        s.inbox.append("next-turn", m("t2"))
        s.open_turn()
        note(lambda: boundary("continue"))
        note(lambda: boundary(None, whole=True))
        note(lambda: boundary(None))
        s.inbox.append("next-step", m("s1"))
        note(lambda: boundary("completed"))
        note(lambda: boundary("continue"))
        s.inbox.append("next-step", m("s2"))
        note(lambda: end_and_close("completed"))
        note(s.close_turn)
        note(lambda: boundary(None))
        note(lambda: end_and_close("max-tokens"))
        s.inbox.append("next-turn", m("t3"))
        s.open_turn()
        note(lambda: boundary(None))
        note(lambda: boundary("max-tokens"))
        note(s.close_turn)
        note(lambda: s.current_turn)
        return seen

    with store.create("separate") as a, store.create("fused") as b:
        separate, fused = run(a, False), run(b, True)
        assert fused == separate
        assert [(e["seq"], e["type"], e["data"]) for e in b.events()] == [
            (e["seq"], e["type"], e["data"]) for e in a.events()
        ]
    assert fused[0] == ("refused", separate[0][1])
    assert fused[5] == {
        "proposal": {"turn": 1, "step": 2, "messages": [m("s1")]},
        "decided": {"kind": "step", "turn": 1, "step": 2},
    }
    assert fused[7] is None and fused[8] == ("refused", separate[8][1])
    assert fused[-2:] == [{"kind": "turn-end", "turn": 2, "reason": {"kind": "max-tokens"}}, None]


def test_cancel_keep_inbox(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("a"))
    session.inbox.append("next-turn", m("b"))
    session.open_turn()
    session.propose_step()
    before = next_seq(session)
    session.cancel(keep_inbox=True)
    assert spliced(session, before) == []
    assert session.inbox.next_turn == [m("b")]
    # Idle with nothing pending: a cancel writes nothing.
    session.inbox.clear()
    seq = next_seq(session)
    session.cancel()
    assert next_seq(session) == seq


def test_observers(session: inboxlog.Session) -> None:
    events: list[dict[str, object]] = []
    notices: list[dict[str, object]] = []
    record = events.append
    assert session.on_event(record) is record
    session.on_inbox(notices.append)
    session.inbox.append("next-turn", m("a"))
    session.inbox.append("next-turn", m("b"))
    session.inbox.replace("b", m("b2"))
    session.open_turn()
    session.propose_step()
    assert [e["type"] for e in events] == [
        "agent/inbox/spliced",
        "agent/inbox/spliced",
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
    ]
    assert events == session.events()
    assert notices == [
        {"type": "agent/inbox/inserted", "message": m("a")},
        {"type": "agent/inbox/inserted", "message": m("b")},
        {"type": "agent/inbox/discarded", "message": m("b")},
        {"type": "agent/inbox/inserted", "message": m("b2")},
        {"type": "agent/inbox/claimed", "message": m("a"), "turn": 1},
    ]


def test_fold_and_queue_projection(session: inboxlog.Session) -> None:
    assert inboxlog.fold_consumed_work([]) == {"end": None, "droppedUnrun": False}
    base = session.baseline()
    assert base == {"seq": None, "next_turn": [], "next_step": []}
    projection = inboxlog.QueueProjection(base)
    session.inbox.append("next-turn", m("a"))
    session.inbox.append("next-step", m("s"))
    session.append("note", {})
    session.inbox.replace("a", m("a2"))
    for e in session.events():
        projection.apply(e)
    assert projection.seq == session.last_seq
    assert projection.next_turn == session.inbox.next_turn == [m("a2")]
    assert projection.next_step == [m("s")]
    assert projection.baseline == session.baseline()
    assert session.baseline(at=1) == {"seq": 1, "next_turn": [m("a")], "next_step": [m("s")]}
    replayed = inboxlog.QueueProjection.replay(session.events(), upto=0)
    assert replayed.baseline == {"seq": 0, "next_turn": [m("a")], "next_step": []}
    with pytest.raises(inboxlog.InvalidInputError, match="already in the projection"):
        projection.apply(session.events()[0])
    assert inboxlog.QueueProjection().baseline == {"seq": None, "next_turn": [], "next_step": []}


def test_baselines_past_the_end_are_refused_not_clamped(
    session: inboxlog.Session,
) -> None:
    """As in the C ABI: an `at`/`upto` past the last event names the log's length."""
    with pytest.raises(
        inboxlog.InvalidInputError,
        match=r"^upto 0 is past the end of the log \(0 events, last seq none\)$",
    ) as err:
        session.baseline(at=0)
    assert (err.value.kind, err.value.code) == ("invalid_input", 10)
    session.inbox.append("next-turn", m("a"))
    session.append("note", {})
    assert session.baseline(at=1) == session.baseline()
    with pytest.raises(
        inboxlog.InvalidInputError,
        match=r"^upto 2 is past the end of the log \(2 events, last seq 1\)$",
    ):
        session.baseline(at=2)
    events = session.events()
    assert inboxlog.QueueProjection.replay(events, upto=1).seq == 1
    with pytest.raises(inboxlog.InvalidInputError, match=r"^upto 5 is past the end of the log"):
        inboxlog.QueueProjection.replay(events, upto=5)
    with pytest.raises(inboxlog.InvalidInputError, match=r"^upto 0 is past the end"):
        inboxlog.QueueProjection.replay([], upto=0)
    assert inboxlog.QueueProjection.replay(events, replay_from=2).seq == 1
    with pytest.raises(
        inboxlog.InvalidInputError,
        match=r"^replay_from 3 is past the end of the events \(2 events, last seq 1\)$",
    ):
        inboxlog.QueueProjection.replay(events, replay_from=3)


def test_protocol_calls_take_host_extras(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("m1"))
    start = next_seq(session)
    trigger = {"kind": "message", "source": {"kind": "user"}}
    assert session.open_turn(trigger=trigger) == 1
    proposal = session.propose_step()
    session.decide({"kind": "enter", "messages": proposal["messages"]}, model="m-1")
    session.end_step("completed", usage={"out": 2**60})
    session.close_turn(z=1, a=None)
    session.open_turn()
    session.fail({"message": "boom", "code": "E"}, attempt=2)
    session.open_turn()
    session.cancel("user", keep_inbox=True, by="ui")
    data = [
        (e["type"], e["data"])
        for e in session.events(start)
        if e["type"].startswith(("turn/", "step/"))
    ]
    assert data == [
        ("turn/start", {"turn": 1, "trigger": trigger}),
        ("step/start", {"turn": 1, "step": 1, "model": "m-1"}),
        ("step/end", {"turn": 1, "step": 1, "usage": {"out": 2**60}}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}, "z": 1, "a": None}),
        ("turn/start", {"turn": 2}),
        (
            "turn/end",
            {
                "turn": 2,
                "reason": {"kind": "error", "error": {"message": "boom", "code": "E"}},
                "attempt": 2,
            },
        ),
        ("turn/start", {"turn": 3}),
        (
            "turn/end",
            {"turn": 3, "reason": {"kind": "aborted", "reason": {"kind": "user"}}, "by": "ui"},
        ),
    ]
    first_end = next(e for e in session.events(start) if e["type"] == "turn/end")
    assert list(first_end["data"]) == ["turn", "reason", "z", "a"]


@pytest.mark.parametrize("key", ["turn", "step", "reason"])
def test_an_extra_naming_a_library_key_is_refused(session: inboxlog.Session, key: str) -> None:
    before = next_seq(session)
    with pytest.raises(inboxlog.InvalidInputError, match=f'"{key}" is written by inboxlog'):
        session.open_turn(**{key: 1})
    assert next_seq(session) == before
    with pytest.raises(inboxlog.InvalidInputError, match=r'extra\["trigger"\]'):
        session.open_turn(trigger=object())
    assert next_seq(session) == before


def test_continue_after_max_tokens_concludes_the_turn(session: inboxlog.Session) -> None:
    session.inbox.append("next-turn", m("m1"))
    session.open_turn()
    session.decide({"kind": "enter", "messages": session.propose_step()["messages"]})
    assert session.end_step("max-tokens") is False
    session.propose_step()
    session.decide({"kind": "enter", "messages": [m("go-on")]})
    assert session.end_step("continue") is False  # max-tokens is sticky
    assert session.close_turn()["reason"] == {"kind": "max-tokens"}


def test_user_message_without_an_id_is_runtime_context(session: inboxlog.Session) -> None:
    event = session.append("user/message", {"text": "<context>"})
    assert event["data"] == {"text": "<context>"}
    assert not session.inbox.has_pending


@pytest.mark.parametrize(
    ("baseline", "needle"),
    [
        ({"next_turn": [], "next_step": []}, "missing field `seq`"),
        ({"seq": None, "next_step": []}, "missing field `next_turn`"),
        ({"seq": 0, "next_turn": []}, "missing field `next_step`"),
        ({"seq": 0, "next_turn": [], "next_step": [], "x": 1}, "unknown field `x`"),
        ({"seq": 2**53, "next_turn": [], "next_step": []}, "larger than 2^53-1"),
        ({"seq": 0, "next_turn": [{"role": "user"}], "next_step": []}, "next_turn[0]"),
    ],
)
def test_a_baseline_needs_every_key(baseline: dict[str, Any], needle: str) -> None:
    # The same strict parser as the C ABI's: a missing key is refused, never defaulted.
    with pytest.raises(inboxlog.InvalidInputError) as err:
        inboxlog.QueueProjection(baseline)
    assert needle in str(err.value)
    with pytest.raises(TypeError, match="baseline must be a dict"):
        inboxlog.QueueProjection([0, [], []])  # type: ignore[arg-type]


def test_store_delete(store: inboxlog.Store) -> None:
    with store.create("keep") as s:
        s.append("host/x", {})
    s = store.create("d")
    with pytest.raises(inboxlog.LockedError, match='"d" is locked by a writer') as locked:
        store.delete("d")
    assert (locked.value.kind, locked.value.code) == ("locked", 3)
    assert store.inspect("d")[0]["id"] == "d"
    s.close()
    assert store.delete("d") is None
    assert [h["id"] for h in store.list()] == ["keep"]
    with pytest.raises(inboxlog.NotFoundError, match='no session "d"'):
        store.delete("d")
    with pytest.raises(inboxlog.NotFoundError):
        store.open("d")
    with pytest.raises(inboxlog.InvalidInputError):
        store.delete("../keep")
    with pytest.raises(TypeError):
        store.delete(None)  # type: ignore[arg-type]
    # The id is free again; the other session is untouched.
    with store.create("d") as s:
        assert s.last_seq is None
    assert len(store.inspect("keep")[1]) == 1


@pytest.mark.parametrize(
    ("call", "keyword"),
    [
        ("create", "delegationDepth"),
        ("create", "agentPreset"),
        ("create", "seedLength"),
        ("fork", "delegationDepth"),
        ("fork", "agentPreset"),
        ("append", "surfaceOp"),
        ("append", "sourceEventSeqs"),
    ],
)
def test_keywords_have_one_spelling(store: inboxlog.Store, call: str, keyword: str) -> None:
    """Keyword arguments are snake case only; the log's camelCase names are dict keys."""
    value: Any = [0] if keyword == "sourceEventSeqs" else ("x" if "Preset" in keyword else 1)
    with store.create("p") as p:
        p.append("note", {})
        calls: dict[str, Callable[[], object]] = {
            "create": lambda: store.create("c", **{keyword: value}),
            "fork": lambda: store.fork("p", "c", **{keyword: value}),
            "append": lambda: p.append("tool/result", {}, **{keyword: value}),
        }
        with pytest.raises(TypeError, match=keyword):
            calls[call]()
        assert [e["type"] for e in p.events()] == ["note"]
    assert [h["id"] for h in store.list()] == ["p"]
