"""The one turn driver every framework integration runs on (SPEC §12,
ARCHITECTURE.md#framework-integrations): a framework run as one turn of a session, each
model call as one step, and one policy for how a turn ends.

An integration maps its framework's seam onto four points and nothing else:

- start (:meth:`Turn.start`): ``open_turn``; the posts waiting are taken in, then the
  run's own input joins ``next-turn`` behind what was pending there (one splice, durable
  before any model call); the first step claims the whole of ``next-turn``.
- each step boundary, at the framework's pre-model hook (:meth:`Turn.step`, or
  :meth:`Turn.step_async` from a coroutine): the step the previous call owed ends
  ``continue``, the inbox's input is claimed, the pre-step plugins decide
  (:func:`inboxlog.pre_step`), and the decision is recorded; a run with no input of its
  own and nothing pending enters a ``continue-turn-N`` marker at its first step, so it
  goes on from the history. Without plugins a boundary is one log call
  (``Session.step_boundary``), one durable write.
- the model stopped (:meth:`Turn.model_stopped`): the step ends ``completed`` or
  ``max-tokens`` and, when no other step is due, the turn closes (one log call,
  ``Session.end_step_and_close``); when steering waits in ``next-step`` (posted from
  another process during the call included: the session takes posts in before it
  answers) the framework makes one more model call.
- the run's end (:meth:`Turn.finish`, :meth:`Turn.end`), with one policy for every
  framework: ``completed`` or ``max-tokens`` as the last step reported (``max-tokens``
  is sticky for the turn, SPEC §4, so steering pending at a length stop gets one more
  model call like any other stop, and the turn still ends ``max-tokens``); ``blocked``
  when a plugin rejects a step (:class:`StepRejectedError`); ``error`` for an exception,
  which propagates; ``aborted`` (cause ``user``) for ``CancelledError``,
  ``KeyboardInterrupt`` and ``GeneratorExit``, the inbox (posts taken in first) cleared
  unless ``keep_inbox_on_cancel``; steering that no further model call of the run can take
  (the framework ended the run itself) ends the turn ``aborted`` (cause ``hook``) with
  the inbox kept, so the next run's first step takes it first. A process killed
  mid-run leaves the turn open; the next open closes it ``interrupted``.

The conversation (SPEC §15.5) is written through the same object, as it happens, with
the turn and step it belongs to filled in: each model response as one
``assistant/message`` (:meth:`Turn.said`), each tool run as ``tool/call`` before the tool
starts (:meth:`Turn.calling`: durable first, so a crash inside the tool is answered
``TOOL_OUTCOME_UNKNOWN`` on the next open, never run again by itself) and ``tool/result``
after it (:meth:`Turn.answered`). What a framework needs to get its own objects back
travels in the same events (``replay_state`` in the message's source, or extra keys):
the conversation is stored once. :func:`answers` reads the tool results the log holds
by call id, the ones repair wrote after a crash included.

Approvals (SPEC §17.4): a framework that stops a run for a person's approval maps each
pending call onto :meth:`Turn.ask` (after :meth:`Turn.calling`) and then :meth:`Turn.park`
with whatever it needs to resume the run; the run returns with the turn parked, never
ended. The next run on the session starts with :meth:`Turn.resume`: while approvals are
pending it raises :class:`inboxlog.ApprovalsPendingError` and writes nothing; once all
are decided (from the console, the CLI, any process) it writes ``turn/resumed`` (the one
commit that hands the run on) and gives back the framework's state and each decision, so
the framework resumes its own run, running each tool only when allowed. A call that was
not allowed is answered by the log itself (``TOOL_NOT_ALLOWED``), so :meth:`Turn.answered`
writes no second result for it.

Each method does its log work in one blocking call on the public :mod:`inboxlog` API, so
a coroutine runs it off the event loop with one worker-thread call
(:func:`inboxlog.integrations._common.call`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import inboxlog
from inboxlog.integrations._common import StepRejectedError, TurnEndedError, call, error_reason
from inboxlog.types import (
    ApprovalOutcome,
    Decided,
    Decision,
    Event,
    Message,
    Proposal,
    StepOutcome,
)

ABORTS = (asyncio.CancelledError, KeyboardInterrupt, GeneratorExit)
"""The exceptions that end a turn ``aborted`` rather than ``error``."""


def input_id() -> str:
    """A fresh inbox id for a run's own input."""
    return f"input-{uuid.uuid4().hex}"


class Turn:
    """One run's turn on ``log``: which turn, whether a step is open, what entered.

    ``plugins`` are the pre-step listeners asked at every step (plain, or ``async`` ones
    through :meth:`step_async`); ``keep_inbox_on_cancel`` keeps the inbox when the run
    is aborted. Not thread-safe: one run's hooks call it one at a time.
    """

    def __init__(
        self,
        log: inboxlog.Session,
        plugins: Sequence[Any] = (),
        *,
        keep_inbox_on_cancel: bool = False,
    ) -> None:
        self.log = log
        self.plugins = list(plugins)
        self.keep_inbox_on_cancel = keep_inbox_on_cancel
        self.number = 0
        """The turn's number (``0`` until :meth:`start`)."""
        self.steps = 0
        """The steps entered so far."""
        self.step_open = False
        """Whether a step is open (its model call owes an end)."""
        self.own = False
        """Whether the run brought input of its own."""
        self.parked = False
        """Whether the run stopped for approvals (:meth:`park`): the turn stays open."""
        self.asked: dict[str, str] = {}
        """The call each approval asked in this run is about, by approval id."""
        self.not_allowed: set[str] = set()
        """Calls a decision did not allow: the log answered them already."""

    @property
    def current(self) -> bool:
        """Whether this turn is still open on the log."""
        return self.number != 0 and self.log.current_turn == self.number

    # -- start ------------------------------------------------------------------------

    def start(self, own: Sequence[Message] = ()) -> int:
        """Opens the turn (refused while another run holds the session), then appends
        the run's own input to ``next-turn`` behind what was pending, posts included.
        Returns the turn's number."""
        self.number = self.log.open_turn()
        self.own = bool(own)
        if own:
            inbox = self.log.inbox
            inbox.receive()
            inbox.splice("next-turn", len(inbox.next_turn), 0, list(own))
        return self.number

    # -- each step boundary -----------------------------------------------------------

    def step(self) -> list[Message]:
        """The step boundary at a model call, blocking (plugins plain): ends the owed
        step, claims, lets the plugins decide and enters; returns the messages that
        entered. Raises :class:`StepRejectedError` or :class:`TurnEndedError` when the
        decision ended the turn."""
        if not self.plugins:
            return self._boundary()
        proposal = self.propose()
        return self.enter(proposal, inboxlog.pre_step(proposal, self.plugins))

    async def step_async(self) -> list[Message]:
        """:meth:`step` from a coroutine: the log's work in worker-thread calls, the
        plugins (plain or ``async``) on the loop between the claim and the decision."""
        if not self.plugins:
            return await call(self._boundary)
        proposal = await call(self.propose)
        decision = await inboxlog.pre_step_async(proposal, self.plugins)
        return await call(self.enter, proposal, decision)

    def propose(self) -> Proposal:
        """Ends the step the previous model call owed (``continue``) and claims: the
        whole of ``next-turn`` at the first step, ``next-step`` after."""
        if self.step_open:
            self.step_open = False
            self.log.end_step("continue")
        return self.log.propose_step(whole_next_turn=True)

    def enter(self, proposal: Proposal, decision: Decision) -> list[Message]:
        """Records ``decision`` for ``proposal``; returns the messages that entered."""
        if (
            decision["kind"] == "enter"
            and not decision["messages"]
            and not proposal["messages"]
            and self.steps == 0
            and not self.own
        ):
            # A run without input continues from the history: its first step enters
            # this marker (no model input), as a turn's first step must enter something.
            marker: Message = {"id": f"continue-turn-{proposal['turn']}", "continue": True}
            decision = {"kind": "enter", "messages": [marker]}
        return self._entered(decision, self.log.decide(decision))

    def _boundary(self) -> list[Message]:
        """:meth:`propose` and entering the claim unchanged, as one log call
        (``step_boundary``); the first step of a run that may need the marker takes the
        separate calls."""
        if self.steps == 0 and not self.own:
            proposal = self.propose()
            return self.enter(proposal, {"kind": "enter", "messages": proposal["messages"]})
        owed: StepOutcome | None = "continue" if self.step_open else None
        self.step_open = False
        boundary = self.log.step_boundary(owed, whole_next_turn=True)
        if boundary is None:
            # The owed step concluded the turn (a "continue" after "max-tokens") and no
            # steering waits: the turn ends as an empty decision would end it.
            decided: Decided = self.log.close_turn()
            return self._entered({"kind": "enter", "messages": []}, decided)
        messages = boundary["proposal"]["messages"]
        return self._entered({"kind": "enter", "messages": messages}, boundary["decided"])

    def _entered(self, decision: Decision, decided: Decided) -> list[Message]:
        if decided["kind"] != "step":
            reason = decided["reason"]
            if reason.get("kind") == "blocked":
                raise StepRejectedError(decided["turn"], reason)
            raise TurnEndedError(decided["turn"], reason)
        self.step_open = True
        self.steps += 1
        return list(decision["messages"]) if decision["kind"] == "enter" else []

    # -- the conversation (SPEC §15.5) -------------------------------------------------

    def said(
        self,
        id: str,
        content: Sequence[dict[str, Any]],
        *,
        provider: str,
        model: str,
        usage: dict[str, Any] | None = None,
        replay_state: Any = None,
        interrupted: bool = False,
        **extra: Any,
    ) -> Event:
        """Appends one model response as ``assistant/message``: its ``content`` blocks
        (``text``, ``reasoning``, ``tool-call``, …), who answered (``provider``,
        ``model``), ``usage`` in the reference's keys, and ``replay_state`` (whatever the
        framework needs to rebuild its own object) in the message's source; ``extra``
        keys go after the library's."""
        source: dict[str, Any] = {"kind": "model", "provider": provider, "model": model}
        if replay_state is not None:
            source["replayState"] = replay_state
        data: dict[str, Any] = {
            "turn": self.number,
            "step": self.steps,
            "message": {"id": id, "role": "assistant", "content": list(content), "source": source},
        }
        if usage is not None:
            data["usage"] = usage
        if interrupted:
            data["interrupted"] = True
        data.update(extra)
        return self.log.append("assistant/message", data)

    def calling(self, call_id: str, name: str, arguments: str, **extra: Any) -> Event:
        """Appends ``tool/call`` for a call the model made, before the tool starts
        (``arguments`` is the model's raw JSON text)."""
        data = {"turn": self.number, "step": self.steps, "callId": call_id, "name": name}
        data["arguments"] = arguments
        data.update(extra)
        return self.log.append("tool/call", data)

    def answered(
        self,
        call_id: str,
        content: Sequence[dict[str, Any]],
        *,
        is_error: bool = False,
        error: dict[str, str] | None = None,
        **extra: Any,
    ) -> Event | None:
        """Appends the ``tool/result`` of call ``call_id``: ``content`` blocks inside one
        ``tool-result`` block, marked ``isError`` (with ``error`` ``{"name", "code"}``
        when known); ``extra`` keys go after the library's. A call a decision did not
        allow was answered by the log: nothing is written (``None``)."""
        if call_id in self.not_allowed:  # answered TOOL_NOT_ALLOWED by the decision
            return None
        block: dict[str, Any] = {"type": "tool-result", "toolCallId": call_id}
        block["content"] = list(content)
        if is_error:
            block["isError"] = True
        data: dict[str, Any] = {
            "turn": self.number,
            "step": self.steps,
            "message": {
                "id": f"tool-result-{call_id}",
                "role": "user",
                "content": [block],
                "source": {"kind": "tool", "callId": call_id},
            },
        }
        if error is not None:
            data["error"] = error
        data.update(extra)
        return self.log.append("tool/result", data)

    # -- approvals --------------------------------------------------------------------

    def ask(
        self,
        approval_id: str,
        tool_name: str,
        call_id: str | None = None,
        arguments: Any = None,
        reason: str | None = None,
    ) -> None:
        """Asks for a person's approval of call ``call_id`` (``approval/asked``; its
        ``tool/call`` comes first, :meth:`calling`)."""
        self.log.ask_approval(approval_id, tool_name, call_id, arguments, reason)
        if call_id is not None:
            self.asked[approval_id] = call_id

    def park(self, state: Any = None) -> None:
        """The framework stopped the run for the approvals asked: parks the turn with
        ``state`` (JSON: what the framework needs to resume its run) and what the driver
        needs to take the turn up again. The run then returns; the turn stays open."""
        driver = {"steps": self.steps, "stepOpen": self.step_open, "calls": self.asked}
        self.log.park({"driver": driver, "framework": state})
        self.parked = True

    @classmethod
    def resume(
        cls,
        log: inboxlog.Session,
        plugins: Sequence[Any] = (),
        *,
        keep_inbox_on_cancel: bool = False,
    ) -> tuple[Turn, Any, dict[str, ApprovalOutcome]] | None:
        """The run parked on ``log``, handed on to this worker: ``None`` when the
        session's turn is not parked (start a new run); else the turn taken up, the
        framework's state and each decision by approval id. Raises
        :class:`inboxlog.ApprovalsPendingError` (writing nothing) while any approval is
        pending; a second worker resuming at once is fenced or refused, never both run."""
        if log.parked() is None:
            return None
        resumed = log.resume_parked()
        state = resumed["parked"].get("state") or {}
        driver = state.get("driver") or {}
        turn = cls(log, plugins, keep_inbox_on_cancel=keep_inbox_on_cancel)
        turn.number = resumed["turn"]
        turn.steps = int(driver.get("steps", 0))
        turn.step_open = bool(driver.get("stepOpen", False))
        turn.own = True
        decisions = {d["id"]: d["outcome"] for d in resumed["decisions"]}
        calls: dict[str, str] = driver.get("calls") or {}
        turn.not_allowed = {
            call for aid, call in calls.items() if decisions.get(aid) != "allowed-once"
        }
        return turn, state.get("framework"), decisions

    # -- the model stopped ------------------------------------------------------------

    def model_stopped(self, outcome: StepOutcome = "completed") -> bool:
        """The model answered without asking for tools: ends the step with ``outcome``
        and, when no other step is due, the turn. Returns ``True`` when steering waits
        in ``next-step`` (the turn goes on: the framework makes one more model call)."""
        self.step_open = False
        return self.log.end_step_and_close(outcome) is None  # takes the posts in first

    # -- the run's end ----------------------------------------------------------------

    def finish(self, outcome: StepOutcome = "completed") -> None:
        """The run returned: ends the turn if :meth:`model_stopped` did not (the framework
        ended after a tool without asking the model again, or before any model call).
        Steering no further call of this run can take ends it ``aborted`` (``hook``),
        the inbox kept for the next run. A parked turn is left open."""
        if self.parked or not self.current:
            return
        if self.steps == 0:  # no model call at all: a balanced no-step turn
            self.log.propose_step()
            self.log.decide({"kind": "enter", "messages": []})
            return
        if self.step_open:
            self.step_open = False
            if self.log.end_step_and_close(outcome) is not None:
                return
        else:  # the model stopped with steering waiting, and no call followed
            self.log.inbox.receive()
            if not self.log.inbox.next_step:  # removed meanwhile
                self.log.close_turn()
                return
        reason = "steering arrived after the run's last model call"
        self.log.cancel({"kind": "hook", "reason": reason}, True)

    def end(self, error: BaseException, outcome: StepOutcome | None = None) -> None:
        """The run raised ``error``: a turn still open ends ``aborted`` for a
        cancellation or an interrupt, ``error`` for anything else, or, with ``outcome``
        (a length stop the framework raises), as :meth:`finish` ends it. A
        :class:`TurnEndedError` needs nothing: its step boundary ended the turn. A parked
        turn is left open: the run already returned its state."""
        if self.parked or not self.current:
            return
        if isinstance(error, ABORTS):
            if not self.keep_inbox_on_cancel:
                self.log.inbox.receive()  # what was posted so far is cleared too
            self.log.cancel({"kind": "user"}, self.keep_inbox_on_cancel)
        elif outcome is not None:
            self.finish(outcome)
        else:
            self.log.fail(error_reason(error))

    async def end_async(self, error: BaseException, outcome: StepOutcome | None = None) -> None:
        """:meth:`end` from a coroutine, in a worker thread; for ``GeneratorExit`` (the
        coroutine is being closed, so it must not wait) in the caller's thread."""
        if isinstance(error, GeneratorExit):
            self.end(error, outcome)
        else:
            await call(self.end, error, outcome)


def text(value: str) -> dict[str, Any]:
    """A ``text`` block."""
    return {"type": "text", "text": value}


def answers(events: Sequence[Event]) -> dict[str, dict[str, Any]]:
    """The ``tool/result`` data among ``events`` by call id (the last one for an id):
    what a resumed run gives its framework as each call's result, those that repair
    wrote for calls a crash cut off included."""
    found: dict[str, dict[str, Any]] = {}
    for event in events:
        if event["type"] != "tool/result":
            continue
        for block in event["data"].get("message", {}).get("content", []):
            if isinstance(block, dict) and block.get("type") == "tool-result":
                found[str(block.get("toolCallId"))] = event["data"]
    return found


def result_text(data: dict[str, Any]) -> str:
    """The text of a ``tool/result``'s ``tool-result`` block (its text blocks joined)."""
    for block in data.get("message", {}).get("content", []):
        if isinstance(block, dict) and block.get("type") == "tool-result":
            inner = block.get("content", [])
            return "\n".join(
                str(b.get("text", "")) for b in inner if isinstance(b, dict) and "text" in b
            )
    return ""


__all__ = ["ABORTS", "Turn", "answers", "input_id", "result_text", "text"]
