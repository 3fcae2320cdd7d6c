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

Nothing is tied to one event loop: ``Runner.run`` runs ``run_async`` on a thread of its
own with its own loop, and the plugin's log work runs in worker threads from whichever
loop calls it.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.adk.agents.callback_context import CallbackContext
from google.adk.agents.invocation_context import InvocationContext
from google.adk.events.event import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins.base_plugin import BasePlugin
from google.genai import types

from inboxlog.integrations._common import StepRejectedError, TurnEndedError, call
from inboxlog.integrations._driver import ABORTS, Turn, input_id
from inboxlog.integrations.adk.sessions import InboxlogSessionService
from inboxlog.types import Message, StepOutcome

CONTINUE = types.Content(role="user", parts=[types.Part(text="")])
"""The ``new_message`` of a run without input of its own (ADK's runner needs one): it
takes what is pending, or, with nothing pending, continues from the history."""
METADATA = "inboxlog"
"""The ``custom_metadata`` key of a user event that came through the inbox:
``{"id": <inbox id>}``."""


def inbox_message(content: types.Content, id: str | None = None) -> Message:
    """An ADK user message as an inbox message: its text as ``content`` and the whole
    ``types.Content`` as JSON under ``adk``."""
    text = "".join(part.text or "" for part in content.parts or ())
    return {
        "id": id or input_id(),
        "role": "user",
        "content": text,
        "adk": content.model_dump(mode="json", exclude_none=True),
    }


def adk_content(message: Message) -> types.Content | None:
    """An inbox message as the ``types.Content`` the model sees (``None`` for the
    continuation marker, which carries no input): its ``adk`` JSON while that still says
    what its ``content`` says (a pre-step plugin may have rewritten it), else its text."""
    content = message.get("content")
    if "adk" in message:
        adk = types.Content.model_validate(message["adk"])
        if content is None or content == "".join(p.text or "" for p in adk.parts or ()):
            return adk
    if content is None:
        return None
    text = content if isinstance(content, str) else str(content)
    return types.Content(role="user", parts=[types.Part(text=text)])


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
        self._lock = threading.Lock()

    # -- the run's start ---------------------------------------------------------------

    async def on_user_message_callback(
        self, *, invocation_context: InvocationContext, user_message: types.Content
    ) -> types.Content | None:
        """Keeps the run's own message out of the log until its step enters it (a message
        of empty text, :data:`CONTINUE`, is no input: the run takes what is pending, or
        continues from the history)."""
        session = invocation_context.session
        if any(part.text or part.text is None for part in user_message.parts or ()):
            self._own[invocation_context.invocation_id] = inbox_message(user_message)
        self.service._defer(session, invocation_context.invocation_id)
        return None

    async def before_run_callback(
        self, *, invocation_context: InvocationContext
    ) -> types.Content | None:
        """Opens the turn; the run's own message joins ``next-turn``."""
        inv = invocation_context.invocation_id
        session = invocation_context.session
        own = self._own.pop(inv, None)
        log = await self.service._hold(session)
        for key, other in list(self._runs.items()):
            if other.turn.log is log:
                # A run of this session whose task was cancelled and lives on: its turn
                # ends now, before this one opens (the session stays held).
                del self._runs[key]
                await call(self._abandon, other)
        run = _Run(Turn(log, self.plugins, keep_inbox_on_cancel=self.keep_inbox_on_cancel), own)
        run.keys = (session.app_name, session.user_id, session.id)
        run.own_event = self.service._deferred_event(session, inv)
        if log.current_turn is not None:  # left open by a cancelled run
            await call(log.cancel, {"kind": "user"}, self.keep_inbox_on_cancel)
        await call(run.turn.start, [own] if own is not None else [])
        run.started = True
        self._runs[inv] = run
        self.service._before_let_go(session, lambda: self._abandon(run))
        task = asyncio.current_task()
        if task is not None:
            run.task = task
            task.add_done_callback(lambda _: self._task_done(inv))
        return None

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
        while not _calls_tools(answer):
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
            if error is None:
                await call(run.turn.finish, run.outcome)
            else:
                await call(run.turn.end, error)
        finally:
            await self._let_go(run)

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
        run.turn.end(asyncio.CancelledError())


def _steering_waits(turn: Turn) -> bool:
    """Whether ``next-step`` holds input (posts taken in first)."""
    turn.log.inbox.receive()
    return bool(turn.log.inbox.next_step)


def _calls_tools(response: LlmResponse) -> bool:
    return bool(
        response.content and any(part.function_call for part in response.content.parts or ())
    )


__all__ = [
    "CONTINUE",
    "METADATA",
    "InboxlogPlugin",
    "StepRejectedError",
    "TurnEndedError",
    "adk_content",
    "inbox_message",
]
