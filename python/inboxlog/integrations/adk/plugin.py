"""ADK's runs as inboxlog turns: :class:`InboxlogPlugin`, an ADK ``BasePlugin`` on the
one turn driver (:mod:`inboxlog.integrations._driver`, SPEC §12).

    service = InboxlogSessionService(store)
    app = App(name="app", root_agent=agent, plugins=[InboxlogPlugin(service)])
    runner = Runner(app=app, session_service=service)

The plugin needs the session service it was given (the runner's): the session's log is
held by that service as its one writer, and the turn is written through that handle.

- One invocation is one turn. ``on_user_message_callback`` tells the service to keep the
  run's own message out of the log for now (the session object gets it, as ADK expects);
  ``before_run_callback`` opens the turn and puts that message into the inbox's
  ``next-turn`` behind what was pending there (:meth:`Turn.start`: durable before any
  model call, so a crash loses nothing).
- Each model call is one step, claimed at ``before_model_callback``
  (:meth:`Turn.step_async`, with the pre-step ``plugins``). The messages that entered are
  appended to the session as ADK user events, in claim order (pending input first, then
  the run's own), each carrying its inbox id in ``custom_metadata["inboxlog"]``, and
  they replace the run's own message at the end of ``llm_request.contents``: so each
  reaches the model and ADK's history exactly once, in the same order in this call and
  in every later one (and in a history rebuilt from the log elsewhere). ``next-step``
  input posted while a tool runs (``store.post`` from any process) enters at the next
  model call.
- ``after_model_callback``: a response without function calls is the step's last; it
  ends ``completed``, or ``max-tokens`` for ``FinishReason.MAX_TOKENS``, when the run
  ends (``after_run_callback``, :meth:`Turn.finish`), after ADK stored the answer, so
  the answer is inside its turn. When steering waits in ``next-step`` then, SPEC §12 asks
  for one more model call, and ADK's flow has no seam to loop back: the plugin makes
  that call itself, inside the callback, through the agent's own model
  (``canonical_model``) with the same request, its contents extended by the model's
  answer and the steering that entered at a new step boundary. The first answer is
  appended to the session as the agent's event before the steering; the last answer is
  what the callback returns, so ADK records and acts on it as usual (function calls in
  it run as tools). Other plugins' model callbacks do not see the extra call.
- The conversation (SPEC §15.5), written through the turn as it happens: each model
  response ADK is about to store (``on_event_callback``, its function calls' ids given)
  as one ``assistant/message``, each tool run as ``tool/call`` before the tool starts
  (``before_tool_callback``: durable first, so a crash inside the tool leaves the call
  answered on the next open, never run again by itself) and ``tool/result`` after it
  (``after_tool_callback``; ``on_tool_error_callback`` marks an error; a call ADK seals
  for an aborted invocation is answered from that event, and one still unanswered when
  the run ends, before its turn ends). Each call is answered once, the first answer
  kept. The session service gives ADK the log's answers to calls a crash cut off
  (:mod:`inboxlog.integrations.adk.sessions`).
- Endings, as the driver decides them: ``completed`` / ``max-tokens`` when the run ends
  (``after_run_callback``); ``blocked`` (:class:`StepRejectedError`, which ADK re-raises as the
  ``__cause__`` of its ``RuntimeError`` for a failed plugin callback) and ``error`` (a
  model or run error, ``on_run_error_callback``), which propagate; ``aborted`` (cause
  ``user``) when the run's task is cancelled (no ADK callback runs then: the task's done
  callback records it, or the next run of the session in this process if the task lives
  on) and when the caller closes the event stream early, which ADK reports through
  ``after_run_callback`` as if the run had succeeded (the plugin sees the
  ``GeneratorExit`` or cancellation in flight there); ``interrupted``, written when a
  killed worker's session is next taken. After the turn ends the service lets the
  session go (``release=False`` keeps it held), so another worker may run the next turn.
- Approvals (SPEC §17.4, :mod:`inboxlog.integrations.adk.approvals`): ADK's
  ``adk_request_confirmation`` calls are asked (``approval/asked``), ADK's placeholder
  answer is no ``tool/result``, and the run ends with its turn parked. The next run of
  the session resumes it (``ApprovalsPendingError``, nothing written, while any is
  pending): ADK's confirmation response in its message is decided first, then the log's
  decisions reach ADK as its confirmation response, so a tool runs only when allowed.

Nothing is tied to one event loop: ``Runner.run`` runs ``run_async`` on a thread of its
own with its own loop, and the plugin's log work runs in worker threads from whichever
loop calls it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from inboxlog.integrations._common import StepRejectedError, TurnEndedError, call
from inboxlog.integrations._driver import ABORTS, Turn, text
from inboxlog.integrations.adk import approvals, convert
from inboxlog.integrations.adk.convert import adk_content, inbox_message
from inboxlog.integrations.adk.sessions import InboxlogSessionService
from inboxlog.types import Message, StepOutcome

CONTINUE = types.Content(role="user", parts=[types.Part(text="")])
"""The ``new_message`` of a run without input of its own (ADK's runner needs one): it
takes what is pending, or, with nothing pending, continues from the history."""
METADATA = "inboxlog"
"""The ``custom_metadata`` key of a user event that came through the inbox:
``{"id": <inbox id>}``."""


@dataclass
class _Run:
    """One invocation's turn and what the plugin keeps between its callbacks."""

    turn: Turn
    own: Message | None
    own_event: Event | None = None
    request: LlmRequest | None = None
    task: asyncio.Task[Any] | None = None
    ended: bool = False
    outcome: StepOutcome = "completed"
    started: bool = False
    keys: tuple[str, str, str] = ("", "", "")
    inv: str = ""
    asked: list[str] = field(default_factory=list)
    """The ids of the calls in this run's model responses, in order."""
    dispatched: set[str] = field(default_factory=set)
    """The calls whose ``tool/call`` this run wrote."""
    answered: set[str] = field(default_factory=set)
    """The calls whose ``tool/result`` this run wrote."""
    awaiting: set[str] = field(default_factory=set)
    """The calls waiting for a person's confirmation (their answer was ADK's placeholder)."""
    requests: list[types.FunctionCall] = field(default_factory=list)
    """The ``adk_request_confirmation`` calls this run asked."""


class InboxlogPlugin(BasePlugin):
    """Makes each ADK invocation on ``service``'s sessions one inboxlog turn.

    ``plugins`` are the pre-step listeners (:func:`inboxlog.pre_step`) asked at every
    model call; ``keep_inbox_on_cancel`` keeps pending input when a run is aborted;
    ``release`` lets the session go at the end of each run (another worker may then run
    its next turn).
    """

    def __init__(
        self,
        service: InboxlogSessionService,
        *,
        plugins: Sequence[Any] = (),
        keep_inbox_on_cancel: bool = False,
        release: bool = True,
        name: str = "inboxlog",
    ) -> None:
        super().__init__(name)
        self.service = service
        self.plugins = list(plugins)
        self.keep_inbox_on_cancel = keep_inbox_on_cancel
        self.release = release
        self._runs: dict[str, _Run] = {}
        self._own: dict[str, Message] = {}
        self._given: dict[str, dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    # -- the run's start ---------------------------------------------------------------

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        """Keeps the run's own message out of the log until its step enters it (a message
        of empty text, :data:`CONTINUE`, is no input: the run takes what is pending, or
        continues from the history)."""
        session = invocation_context.session
        given = approvals.responses(user_message)
        if given is not None:  # ADK's confirmation response: decisions, not input
            self._given[invocation_context.invocation_id] = given
        elif any(part.text or part.text is None for part in user_message.parts or ()):
            self._own[invocation_context.invocation_id] = inbox_message(user_message)
        self.service._defer(session, invocation_context.invocation_id)
        return None

    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        """Opens the turn; the run's own message joins ``next-turn``. On a session whose
        turn is parked, resumes that run instead (:mod:`.approvals`): ADK's confirmation
        response in the message is decided first; ``ApprovalsPendingError`` (nothing
        written) while any approval is pending."""
        inv = invocation_context.invocation_id
        session = invocation_context.session
        own = self._own.pop(inv, None)
        given = self._given.pop(inv, None) or {}
        log = await self.service._hold(session)
        for key, other in list(self._runs.items()):
            if other.turn.log is log:
                # A run of this session whose task was cancelled and lives on: its turn
                # ends now, before this one opens (the session stays held).
                del self._runs[key]
                await call(self._abandon, other)
        own_event = self.service._deferred_event(session, inv)
        try:
            resumed = await call(self._resume, log, given)
        except BaseException:
            if own_event is not None:
                session.events[:] = [e for e in session.events if e is not own_event]
            if self.release:
                await self.service.release(
                    app_name=session.app_name, user_id=session.user_id, session_id=session.id
                )
            raise
        if resumed is None:
            run = _Run(Turn(log, self.plugins, keep_inbox_on_cancel=self.keep_inbox_on_cancel), own)
        else:
            run = _Run(resumed[0], own)
        run.keys = (session.app_name, session.user_id, session.id)
        run.inv = inv
        run.own_event = own_event
        if given and own_event is not None:
            # ADK's confirmation response is no input, and ADK must not act on it: the
            # log's decisions reach ADK below, for a parked run only.
            session.events[:] = [e for e in session.events if e is not own_event]
            run.own_event = None
        if resumed is None:
            if log.current_turn is not None:  # left open by a cancelled run
                await call(log.cancel, {"kind": "user"}, self.keep_inbox_on_cancel)
            await call(run.turn.start, [own] if own is not None else [])
        else:
            turn, state, decisions = resumed
            calls = approvals.asked_calls(state)
            run.asked.extend(calls)
            run.dispatched.update(calls)  # their tool/call is written: never again
            if own is not None:  # input joins next-step: the resumed run's next call
                await call(_steer, turn, own)
            event = approvals.decision_event(inv, state, decisions, given)
            if event is not None:  # ADK runs the tools allowed, answers the rest
                await self.service.append_event(session, event)
        run.started = True
        self._runs[inv] = run
        self.service._before_let_go(session, lambda: self._abandon(run))
        task = asyncio.current_task()
        if task is not None:
            run.task = task
            task.add_done_callback(lambda _: self._task_done(inv))
        return None

    def _resume(
        self, log: Any, given: dict[str, dict[str, Any]]
    ) -> tuple[Turn, Any, dict[str, Any]] | None:
        """The parked run taken up (``None``: nothing parked), after ADK's confirmation
        responses are decided."""
        if given:
            approvals.decide(log, given)
        resumed = Turn.resume(log, self.plugins, keep_inbox_on_cancel=self.keep_inbox_on_cancel)
        if resumed is None:
            return None
        turn, state, decisions = resumed
        return turn, state, decisions

    # -- each model call ---------------------------------------------------------------

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        """The step boundary: claims, lets the pre-step plugins decide, and puts what
        entered into the request and the history."""
        run = self._runs.get(callback_context.invocation_id)
        if run is None or run.ended:
            return None
        context = callback_context._invocation_context
        await self._boundary(run, context, llm_request)
        run.request = llm_request
        return None

    async def _boundary(
        self, run: _Run, context: InvocationContext, llm_request: LlmRequest
    ) -> None:
        try:
            entered = await run.turn.step_async()
        except TurnEndedError:
            run.ended = True
            raise
        session = context.session
        own = run.own_event
        if own is not None:
            # The run's own message: ADK put it at the end of the request; it enters
            # below, in claim order, with whatever was pending before it.
            run.own_event = None
            session.events[:] = [e for e in session.events if e is not own]
            for i in range(len(llm_request.contents) - 1, -1, -1):
                if llm_request.contents[i] == own.content:
                    del llm_request.contents[i]
                    break
        for message in entered:
            metadata = {METADATA: {"id": message["id"]}}
            if own is not None and run.own is not None and message["id"] == run.own["id"]:
                # As ADK made it (its state_delta included), now in claim order, with
                # what the plugins entered.
                update = {"custom_metadata": metadata, "content": adk_content(message)}
                event = own.model_copy(update=update)
            else:
                content = adk_content(message)
                if content is None:
                    continue
                event = Event(
                    author="user",
                    invocation_id=context.invocation_id,
                    content=content,
                    custom_metadata=metadata,
                )
            await self.service.append_event(session, event)
            if event.content is not None:
                llm_request.contents.append(event.content)

    async def after_model_callback(
        self, *, callback_context: CallbackContext, llm_response: LlmResponse
    ) -> LlmResponse | None:
        """A final answer ends the step; with steering waiting, one more model call."""
        run = self._runs.get(callback_context.invocation_id)
        if run is None or run.ended or llm_response.partial:
            return None
        context = callback_context._invocation_context
        answer, replaced = llm_response, False
        while not convert.calls_tools(answer):
            stop = answer.finish_reason == types.FinishReason.MAX_TOKENS
            run.outcome = "max-tokens" if stop else "completed"
            if not await call(_steering_waits, run.turn):
                break  # the step and the turn end after ADK stored the answer (after_run)
            await call(run.turn.model_stopped, run.outcome)
            answer = await self._one_more_call(run, context, answer)
            replaced = True
        return answer if replaced else None

    async def _one_more_call(
        self, run: _Run, context: InvocationContext, answer: LlmResponse
    ) -> LlmResponse:
        """The model's answer joins the history, the steering enters at a new step, and
        the agent's model is asked again with the same request."""
        assert run.request is not None and context.agent is not None
        agent = context.agent
        request = run.request.model_copy(deep=True)
        if answer.content is not None:
            event = Event(
                author=agent.name,
                invocation_id=context.invocation_id,
                content=answer.content,
            )
            await self.service.append_event(context.session, event)
            await call(self._said, run, context, event)
            request.contents.append(answer.content)
        await self._boundary(run, context, request)
        run.request = request
        model = getattr(agent, "canonical_model", None)
        if model is None:  # pragma: no cover - only LLM agents call models
            raise TypeError(f"agent {agent.name} has no model to call again")
        last: LlmResponse | None = None
        async for response in model.generate_content_async(request, stream=False):
            if not response.partial:
                last = response
        if last is None:
            raise RuntimeError("the model gave no answer to the call for pending steering")
        return last

    # -- the conversation (SPEC §15.5) -------------------------------------------------

    async def on_event_callback(
        self, *, invocation_context: InvocationContext, event: Event
    ) -> Event | None:
        """A model response ADK is about to store (its function calls' ids given, before
        any of them runs) is written as ``assistant/message``; an answer ADK gives a call
        that no tool callback answered (ADK sealing an aborted invocation's calls) as its
        ``tool/result``."""
        run = self._runs.get(invocation_context.invocation_id)
        if run is None or run.ended:
            return None
        asked = approvals.requests(event)
        if asked:  # ADK asks for confirmation: approvals, not the model's words
            await call(self._ask, run, asked)
        elif convert.from_model(event):
            await call(self._said, run, invocation_context, event)
        waits = set(event.actions.requested_tool_confirmations or ()) | run.awaiting
        for answer in event.get_function_responses():
            if answer.id in waits:  # ADK's placeholder: the answer waits for a person
                continue
            if answer.id in run.asked and answer.id not in run.answered:
                response = answer.response or {}
                failure = None
                if "error" in response:
                    failure = {"name": "ToolError", "code": event.error_code or "TOOL_ERROR"}
                content = [text(convert.result_text(response))]
                await self._answered(run, answer.id, content, failure)
        return None

    def _ask(self, run: _Run, asked: list[types.FunctionCall]) -> None:
        for request in asked:
            run.awaiting.add(approvals.ask(run.turn, request))
            run.requests.append(request)

    def _said(self, run: _Run, context: InvocationContext, event: Event) -> None:
        provider, model = convert.source(context, event)
        waits = event.long_running_tool_ids or set()  # answered later, by the user
        run.asked.extend(c.id for c in event.get_function_calls() if c.id and c.id not in waits)
        run.turn.said(
            event.id,
            convert.blocks(event),
            provider=provider,
            model=model,
            usage=convert.usage(event.usage_metadata),
            interrupted=bool(event.interrupted),
        )

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        """The call is written as ``tool/call`` before the tool runs, durably where the
        store is ``sync``: a crash inside the tool leaves it answered on the next open
        (its outcome unknown), never run again by itself."""
        run = self._runs.get(tool_context.invocation_id)
        call_id = tool_context.function_call_id
        if run is not None and not run.ended and call_id and call_id not in run.dispatched:
            # (a call resumed after its confirmation has its tool/call already)
            arguments = json.dumps(tool_args, ensure_ascii=False, default=str)
            await call(run.turn.calling, call_id, tool.name, arguments)
            run.dispatched.add(call_id)
        return None

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        """The tool's result is written as ``tool/result`` (not a long-running tool's
        empty one: its answer comes later, as ADK's)."""
        run = self._runs.get(tool_context.invocation_id)
        call_id = tool_context.function_call_id
        if call_id in tool_context.actions.requested_tool_confirmations:
            if run is not None:  # ADK's placeholder: the call waits for a confirmation
                run.awaiting.add(call_id)
            return None
        if run is not None and call_id and (result or not tool.is_long_running):
            await self._answered(run, call_id, [text(convert.result_text(result))])
        return None

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        """The tool failed (or its call was cancelled): ``tool/result`` marked as an
        error, before the error ends the step; an answer another callback gives for the
        error reaches the model, the log keeps this first one."""
        if isinstance(error, asyncio.CancelledError):
            said = "The tool was cancelled while it ran: its outcome is unknown."
            failure = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
        else:
            said = f"{type(error).__name__}: {error}"
            failure = {"name": type(error).__name__, "code": "TOOL_ERROR"}
        run = self._runs.get(tool_context.invocation_id)
        call_id = tool_context.function_call_id
        if run is not None and call_id:
            await self._answered(run, call_id, [text(said)], failure)
        return None

    async def _answered(
        self,
        run: _Run,
        call_id: str,
        content: list[dict[str, Any]],
        error: dict[str, str] | None = None,
    ) -> None:
        """Writes call ``call_id``'s ``tool/result``, once (the first answer stays)."""
        if not run.turn.current or call_id in run.answered:
            return
        run.answered.add(call_id)
        is_error = error is not None
        await call(lambda: run.turn.answered(call_id, content, is_error=is_error, error=error))

    # -- endings -----------------------------------------------------------------------

    async def on_run_error_callback(
        self, *, invocation_context: InvocationContext, error: Exception
    ) -> None:
        """A model or run error: the turn ends ``error`` (ADK re-raises it)."""
        run = self._runs.get(invocation_context.invocation_id)
        if run is not None:
            await self._end(run, error)

    async def after_run_callback(self, *, invocation_context: InvocationContext) -> None:
        """The run ended: ``completed`` / ``max-tokens``, or ``aborted`` when the caller
        closed the event stream early (ADK calls this then too)."""
        run = self._runs.get(invocation_context.invocation_id)
        if run is None:
            return
        in_flight = sys.exc_info()[1]
        await self._end(run, in_flight if isinstance(in_flight, ABORTS) else None)

    async def _end(self, run: _Run, error: BaseException | None) -> None:
        with self._lock:
            ended, run.ended = run.ended, True
        if ended and not run.turn.current:
            await self._let_go(run)
            return
        try:
            await call(self._close, run, error)
        finally:
            await self._let_go(run)

    def _close(self, run: _Run, error: BaseException | None) -> None:
        """Answers the calls left unanswered, then ends the turn as the run ended."""
        _answer_the_rest(run)
        if error is None and run.requests and run.turn.current and run.turn.log.pending_approvals():
            # ADK stopped for confirmations: the turn parks, never ends with them open.
            state = approvals.park_state(run.inv, run.requests)
            run.turn.park(state)
        elif error is None:
            run.turn.finish(run.outcome)
        else:
            run.turn.end(error)

    async def _let_go(self, run: _Run) -> None:
        for inv, other in list(self._runs.items()):
            if other is run:
                del self._runs[inv]
        if self.release:
            app, user, session = run.keys
            await self.service.release(app_name=app, user_id=user, session_id=session)

    def _task_done(self, inv: str) -> None:
        """The run's task ended; a turn no callback ended (a cancelled run) is aborted
        here, on the loop (one log write)."""
        run = self._runs.pop(inv, None)
        if run is None or run.ended:
            return
        if self.release:
            self.service._let_go_now(*run.keys)  # which ends the turn first
        else:
            self._abandon(run)

    def _abandon(self, run: _Run) -> None:
        """A turn no callback ended (its run was cancelled) ends ``aborted`` before the
        service lets its session go."""
        with self._lock:
            if run.ended:
                return
            run.ended = True
        _answer_the_rest(run)
        run.turn.end(asyncio.CancelledError())


def _answer_the_rest(run: _Run) -> None:
    """Answers each call of the run still without a result as a step must before it
    ends (SPEC §15.4), blocking: outcome unknown when its tool started (a ``tool/call``),
    not started otherwise (the run ended between the model's answer and its tools)."""
    if not run.turn.current:
        return
    waiting = run.awaiting if run.turn.log.pending_approvals() else set()
    for call_id in [c for c in run.asked if c not in run.answered and c not in waiting]:
        run.answered.add(call_id)
        if call_id in run.dispatched:
            said = "The run ended while the tool ran: its outcome is unknown."
            error = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
        else:
            said = "The run ended before the tool started: it did not run."
            error = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
        run.turn.answered(call_id, [text(said)], is_error=True, error=error)


def _steer(turn: Turn, message: Message) -> None:
    """The run's own message joins the end of ``next-step`` (posts taken in first)."""
    inbox = turn.log.inbox
    inbox.receive()
    inbox.splice("next-step", len(inbox.next_step), 0, [message])


def _steering_waits(turn: Turn) -> bool:
    """Whether ``next-step`` holds input (posts taken in first)."""
    turn.log.inbox.receive()
    return bool(turn.log.inbox.next_step)


__all__ = [
    "CONTINUE",
    "METADATA",
    "InboxlogPlugin",
    "StepRejectedError",
    "TurnEndedError",
    "adk_content",
    "inbox_message",
]
