"""The turn driver's own paths that no framework reaches on demand (the rest runs through
every framework in ``test_conformance.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import inboxlog
from inboxlog.integrations._common import StepRejectedError, TurnEndedError
from inboxlog.integrations._driver import Turn, input_id


@pytest.fixture
def log() -> Iterator[inboxlog.Session]:
    with inboxlog.Store.memory().create("s") as session:
        yield session


def ends(log: inboxlog.Session) -> list[dict[str, Any]]:
    return [e["data"]["reason"] for e in log.events() if e["type"] == "turn/end"]


def own(text: str) -> dict[str, Any]:
    return {"id": input_id(), "content": text}


def stepped(log: inboxlog.Session, *steering: str) -> Turn:
    """A turn started with input of its own, in its first step; then ``steering``
    appended to ``next-step``."""
    turn = Turn(log)
    turn.start([own("hi")])
    turn.step()
    for id in steering:
        log.inbox.append("next-step", {"id": id, "content": "steer"})
    return turn


@pytest.mark.parametrize("error", [asyncio.CancelledError, KeyboardInterrupt, GeneratorExit])
def test_each_abort_ends_the_turn_aborted_and_clears_the_inbox(
    log: inboxlog.Session, error: type[BaseException]
) -> None:
    turn = stepped(log, "s")
    turn.end(error())
    assert ends(log) == [{"kind": "aborted", "reason": {"kind": "user"}}]
    assert not log.inbox.has_pending


def test_an_exception_ends_the_turn_error_and_a_turn_already_ended_is_left_alone(
    log: inboxlog.Session,
) -> None:
    turn = stepped(log)
    turn.end(ValueError("bad"))
    turn.end(ValueError("again"))
    assert ends(log) == [{"kind": "error", "error": {"message": "bad", "code": "ValueError"}}]


def test_steering_no_further_call_can_take_ends_the_turn_aborted_with_the_inbox_kept(
    log: inboxlog.Session,
) -> None:
    turn = stepped(log, "s")
    turn.finish()
    reason = "steering arrived after the run's last model call"
    assert ends(log) == [{"kind": "aborted", "reason": {"kind": "hook", "reason": reason}}]
    assert [m["id"] for m in log.inbox.next_step] == ["s"]


def test_a_run_that_stopped_with_steering_but_made_no_more_calls_keeps_it_too(
    log: inboxlog.Session,
) -> None:
    turn = stepped(log, "s")
    assert turn.model_stopped("completed")
    turn.finish()
    assert ends(log)[0]["reason"]["kind"] == "hook"
    assert [m["id"] for m in log.inbox.next_step] == ["s"]


def test_a_run_that_made_no_model_call_ends_as_a_balanced_no_step_turn(
    log: inboxlog.Session,
) -> None:
    turn = Turn(log)
    turn.start()
    turn.finish()
    assert ends(log) == [{"kind": "completed"}]


def test_a_step_owed_after_a_sticky_max_tokens_with_nothing_pending_ends_the_turn(
    log: inboxlog.Session,
) -> None:
    """A step cut for length with steering pending goes on (one more step takes it);
    when that step asks for tools, the turn stays concluded ``max-tokens``, so the next
    boundary ends it instead of claiming."""
    turn = stepped(log, "s")
    assert turn.model_stopped("max-tokens")
    assert [m["id"] for m in turn.step()] == ["s"]
    with pytest.raises(TurnEndedError) as ended:
        turn.step()
    assert ended.value.reason == {"kind": "max-tokens"}
    assert ends(log) == [{"kind": "max-tokens"}]


def test_plugins_decide_each_step_and_a_reject_raises(log: inboxlog.Session) -> None:
    def reject_second(proposal: Any, next: Any) -> Any:
        return {"kind": "reject"} if proposal["step"] == 2 else next()

    turn = Turn(log, [reject_second])
    turn.start([own("hi")])
    assert [m["content"] for m in turn.step()] == ["hi"]
    with pytest.raises(StepRejectedError):
        turn.step()
    assert [r["kind"] for r in ends(log)] == ["blocked"]


def test_the_async_step_asks_async_plugins_between_the_claim_and_the_decision(
    log: inboxlog.Session,
) -> None:
    seen: list[str] = []

    async def listen(proposal: Any, next: Any) -> Any:
        seen.extend(m["content"] for m in proposal["messages"])
        return await next()

    turn = Turn(log, [listen])
    turn.start([own("hi")])
    entered = asyncio.run(turn.step_async())
    assert [m["content"] for m in entered] == seen == ["hi"]
    assert not turn.model_stopped()
    assert ends(log) == [{"kind": "completed"}]


def test_steering_taken_away_before_the_run_ended_lets_the_turn_close(
    log: inboxlog.Session,
) -> None:
    turn = stepped(log, "s")
    assert turn.model_stopped("max-tokens")
    assert log.inbox.remove("s")
    turn.finish()
    assert ends(log) == [{"kind": "max-tokens"}]


def test_a_coroutine_closed_mid_run_ends_the_turn_aborted_without_waiting(
    log: inboxlog.Session,
) -> None:
    """``GeneratorExit`` comes into a coroutine being closed, which must not suspend:
    ``end_async`` ends the turn in the caller's thread (awaiting a worker would raise
    ``RuntimeError: coroutine ignored GeneratorExit``)."""
    turn = stepped(log)

    async def run() -> None:
        try:
            await asyncio.sleep(0)  # suspended here when closed
        except BaseException as error:
            await turn.end_async(error)
            raise

    coroutine = run()
    coroutine.send(None)
    coroutine.close()
    assert ends(log) == [{"kind": "aborted", "reason": {"kind": "user"}}]


def test_end_async_ends_any_other_error_from_a_worker_thread(log: inboxlog.Session) -> None:
    turn = stepped(log)
    asyncio.run(turn.end_async(RuntimeError("down")))
    assert ends(log) == [{"kind": "error", "error": {"message": "down", "code": "RuntimeError"}}]


def test_the_conversation_is_written_in_the_turn_and_step_it_belongs_to(tmp_path: Any) -> None:
    from inboxlog.integrations._driver import answers, result_text, text

    store = inboxlog.Store(tmp_path)
    log = store.create("c")
    turn = stepped(log)
    call = {"type": "tool-call", "id": "c1", "name": "pay", "arguments": "{}"}
    said = turn.said(
        "a1",
        [text("paying"), call],
        provider="scripted",
        model="m",
        usage={"inputTokens": 1, "outputTokens": 2},
        replay_state={"raw": 1},
        framework="x",
    )
    assert said["data"]["turn"] == 1 and said["data"]["step"] == 1
    assert said["data"]["message"]["source"]["replayState"] == {"raw": 1}
    assert said["data"]["framework"] == "x"
    turn.calling("c1", "pay", "{}")
    turn.calling("c2", "pay", "{}")  # dispatched, but its block is in no response
    done = turn.answered("c1", [text("paid")])
    assert result_text(done["data"]) == "paid"
    log.close()  # the worker stops before its step ends
    assert list(answers(store.read("c", 0))) == ["c1"]
    with store.open("c") as again:
        # c1 has its result and c2 was made by no response: repair answers nothing.
        after = again.events(done["seq"] + 1)
        assert [e["type"] for e in after] == ["step/end", "turn/end"]
    turn2 = Turn(store.open("c"))
    turn2.start([own("again")])
    turn2.step()
    turn2.said(
        "a2",
        [{"type": "tool-call", "id": "c3", "name": "pay", "arguments": "{}"}],
        provider="p",
        model="m",
    )
    turn2.calling("c3", "pay", "{}")
    turn2.log.close()
    reopened = store.open("c")
    found = answers(reopened.events())
    assert found["c3"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert "unknown" in result_text(found["c3"])
    reopened.close()


def test_a_parked_run_resumes_once_with_its_state_and_no_second_answer(tmp_path: Any) -> None:
    # SPEC §17.4 through the driver: ask, park, finish leaves the turn open; a resume
    # while pending raises and writes nothing; after the decision it takes the turn up
    # where it was, and the call not allowed gets no second result.
    store = inboxlog.Store(tmp_path)
    with store.create("s") as log:
        turn = stepped(log)
        call = {"type": "tool-call", "id": "c1", "name": "rm", "arguments": "{}"}
        turn.said("m1", [call], provider="p", model="m")
        turn.calling("c1", "rm", "{}")
        turn.ask("a1", "rm", "c1", {})
        turn.park({"framework": "run-state"})
        turn.finish()
        assert log.current_turn == 1 and ends(log) == []
    with store.open("s") as log:
        seq = log.last_seq
        with pytest.raises(inboxlog.ApprovalsPendingError, match='"a1"'):
            Turn.resume(log)
        assert log.last_seq == seq
    store.decide("s", "a1", "rejected")
    with store.open("s") as log:
        resumed = Turn.resume(log)
        assert resumed is not None
        again, state, decisions = resumed
        assert state == {"framework": "run-state"}
        assert decisions == {"a1": "rejected"}
        assert (again.number, again.steps, again.step_open) == (1, 1, True)
        assert again.answered("c1", [{"type": "text", "text": "not run"}]) is None
        assert Turn.resume(log) is None  # handed on once
        again.finish()
        assert ends(log) == [{"kind": "completed"}]
