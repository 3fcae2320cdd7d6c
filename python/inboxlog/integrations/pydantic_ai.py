"""Pydantic AI on an inboxlog session: its message history, its turns, its steering.

    pip install "./python[pydantic-ai]"

    import inboxlog
    from pydantic_ai import Agent
    from inboxlog.integrations.pydantic_ai import InboxlogCapability

    agent = Agent(model, capabilities=[InboxlogCapability(inboxlog.Store("sessions"))])
    result = await agent.run("What's the weather in Paris?", conversation_id="chat-1")

Written against ``pydantic-ai-slim`` 2.68, whose capability API has every hook this
module uses (``wrap_run``, ``before_model_request``, ``prepare_model_request``,
``after_node_run``, ``wrap_tool_execute``). :class:`InboxlogCapability` is an
``AbstractCapability``, one instance for all of an agent's runs (each run's state is
kept under its ``run_id``, so runs may go on at once); the run's ``conversation_id``
names the session (the capability opens it, creating it when it does not exist, for the
length of the run and closes it after, so one worker writes it at a time), or
``InboxlogCapability(session)`` uses a session already open. Every way of running the
agent (``run``, ``run_sync``, ``iter``, ``run_stream``) is one inboxlog turn:

- ``turn/start`` when the run starts; then the run's prompt is appended to the inbox's
  ``next-turn`` (durable before any model sees it, so a crash loses nothing).
- The conversation is written as it happens (SPEC §15.5): each model response as one
  ``assistant/message`` (text, reasoning and tool-call blocks, ``usage``, who answered)
  carrying the response whole, ``ModelMessagesTypeAdapter``'s JSON, in its
  ``source.replayState`` under ``"pydantic-ai"`` (:data:`REPLAY`); each tool run as
  ``tool/call``, durable before the tool starts (``wrap_tool_execute``), then
  ``tool/result`` (a retry the tool asks for, ``TOOL_RETRY``, or an exception it raises,
  ``TOOL_ERROR``, marked an error), whose ``"pydantic-ai"`` key holds what Pydantic AI's
  ``ToolReturnPart`` needs beside the text: the tool's name and, unless the text is it,
  the return value's JSON (``"json": true`` when the text is that JSON); a call answered
  without a run (its arguments failed validation, an output tool) is answered as its
  request is recorded, and a tool still running when the run ends on an exception (a
  cancellation) as the turn ends (``TOOL_CANCELLED``, its outcome unknown).
- The message history comes from the log: the responses from their
  ``assistant/message``, the requests (each once it is prepared, before the model is
  called, with the tool results and the steering it carries; the rest when the run ends)
  from ``pydantic-ai/messages`` events ``{"messages": [...]}``, which keep only what no
  conversation event holds (instructions, system prompts, timestamps, run ids, retry
  prompts): a prompt a step entered stands as a reference to its ``user/message``, a
  tool's return to its ``tool/result`` (``{"eventSeq": seq, ...}``, :data:`REF`, with
  the part's keys the event does not hold), so the conversation is stored once. A hook
  that rewrote earlier history (a history processor, compaction) is recorded as one
  ``pydantic-ai/history`` event holding the whole new history. :func:`fold_messages`
  reads the history back, in log order (earlier releases kept requests whole in their
  records, and the one before them responses too: their logs read the same); the
  capability puts it in front of the run, so a run needs no ``message_history=``, and a
  run resumed on another worker after a crash sees exactly what was committed, every
  tool call answered: a call a crash cut off inside its tool is answered on the next
  open (``TOOL_OUTCOME_UNKNOWN``, SPEC §15.4), and the resumed request carries that
  answer as a ``ToolReturnPart`` (:func:`answer_calls`), so the tool is not run again
  by itself.
  Each record's ``from`` is the seq of the last ``pydantic-ai/history`` (0 before
  any), so a run on a new worker reads the log from there, not from its start: what it
  reads is the current history (which Pydantic AI sends whole to the model), not what a
  compaction dropped; a record cites only events from its ``from`` on. Between the runs
  of one capability the history stays in memory: a run reads only the events appended
  since its last run (by another worker, say).
The turn runs on the turn driver every integration shares
(``inboxlog/integrations/_driver.py``); this module maps Pydantic AI's hooks onto it:

- Each model request is one step, taken through the step-boundary protocol in
  ``before_model_request``: ``propose_step`` claims the inbox's input (at the first
  request all of ``next-turn``: what was pending first, then the run's own prompt;
  later, everything in ``next-step``, including what ``store.post`` delivered from other
  processes), the pre-step ``plugins`` decide (:func:`inboxlog.pre_step_async`) and
  ``decide`` records the step and its ``user/message`` events (the first request's
  claim is ``propose_step(whole_next_turn=True)``: pure claims, nothing canceled).
  Without plugins there is nothing to ask between the claim and the decision, so each
  boundary (the previous step's end, the claim, the decision) is one call,
  ``Session.step_boundary``, written in one durable append (one fsync under ``sync``)
  with the events of the separate calls; the last step's end and the turn's close are
  one too (``Session.end_step_and_close``).
  The messages that entered become ``UserPromptPart`` parts of the request about to be
  sent, so the model sees them in that request and the history keeps them, exactly
  once; the request's ``metadata["inboxlog"]["messages"]`` lists their inbox ids.
- When the agent would end (``after_node_run`` sees the ``End``), the model stopped: the
  step ends and, with nothing in ``next-step`` (posts from other processes taken in
  first, also those that arrived during the last response), the turn closes; while
  ``next-step`` holds input, the capability sends one more request carrying it (it
  turns the ``End`` into a ``ModelRequestNode``), as Pydantic AI's own
  ``enqueue(..., priority="asap")`` does. ``next-turn`` input waits for the next run.
- ``turn/end``: ``completed`` when the run returns; ``max-tokens`` when the last response
  stopped for length (``finish_reason == "length"``; with steering pending, one more
  request takes it and the turn still ends ``max-tokens``; raised as
  ``IncompleteToolCall`` / ``OutputTokenLimitExceeded``, the error propagates and
  steering pending then waits for the next run, as below); ``blocked`` when a plugin
  rejects a step (:class:`StepRejectedError`); ``error`` on any other exception
  (re-raised); ``aborted`` when the run is cancelled (also by ``KeyboardInterrupt``
  or ``GeneratorExit``). A process killed mid-run
  leaves the turn open; the next open of the session closes it ``interrupted`` and a run
  with no prompt continues from the stored history.

Approvals (SPEC §17.4): a run that stops for deferred tools needing approval
(``requires_approval=True``, ``ApprovalRequired``; its output ``DeferredToolRequests``)
parks its turn, never ends it: each call's ``tool/call`` (unless its tool ran and asked)
and ``approval/asked`` (the call's arguments, ``metadata["reason"]`` as the reason),
then ``turn/parked`` holding the requests' JSON. Decided from anywhere, the next run on
the session (``agent.run(conversation_id=...)``, on any worker, without
``deferred_tool_results=``) takes the turn up (``Turn.resume``: ``ApprovalsPendingError``,
writing nothing, while any is pending) and resumes Pydantic AI's own run, its first node
given the decisions as ``DeferredToolResults``: ``ToolApproved`` for ``allowed-once``,
else ``ToolDenied`` with the text of the ``TOOL_NOT_ALLOWED`` result the log wrote, so
the tool runs only when allowed, once, and every call is answered once. A prompt given
to that run follows the tool results. External calls (``CallDeferred``) are not
approvals: they are left to the caller, as before.

Under ``run_stream`` Pydantic AI runs no node hook for the final streamed response, so a
steering message that arrives during that last response cannot get one more request:
the turn ends ``aborted`` (cause ``hook``) with the inbox kept, and the next run's first
request takes that message first.

The log's blocking calls run off the event loop on the integrations' worker threads
(public :mod:`inboxlog` calls only), each hook's in at most one call: a run of n model
requests and t tool runs (no plugins) makes 3n + 2t + 3 of them: the turn's start; per
request the step, the request's record and the response's; per tool run its call and
its result; the model's stop (the last step's end with the turn's close); the
session's release. The hooks wait for each but the response's: it is written while
the run goes on, and a tool waits until it is durable before its call is written (as
does the next hook, which raises its error, ending the turn ``error``).
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

try:
    from pydantic import TypeAdapter
    from pydantic_ai.agent import CallToolsNode, ModelRequestNode, UserPromptNode
    from pydantic_ai.capabilities import AbstractCapability
    from pydantic_ai.capabilities.abstract import (
        AgentNode,
        NodeResult,
        ValidatedToolArgs,
        WrapRunHandler,
        WrapToolExecuteHandler,
    )
    from pydantic_ai.exceptions import (
        ApprovalRequired,
        CallDeferred,
        IncompleteToolCall,
        OutputTokenLimitExceeded,
        ToolRetryError,
    )
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        TextPart,
        ThinkingPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.tools import (
        DeferredToolRequests,
        DeferredToolResults,
        RunContext,
        ToolApproved,
        ToolDefinition,
        ToolDenied,
    )
    from pydantic_graph import End
except ModuleNotFoundError as error:  # pragma: no cover - exercised in a subprocess
    if error.name not in ("pydantic_ai", "pydantic_graph", "pydantic") and not (
        error.name or ""
    ).startswith(("pydantic_ai.", "pydantic_graph.")):
        raise
    raise ImportError(
        "inboxlog.integrations.pydantic_ai needs the pydantic-ai-slim package: "
        'pip install "inboxlog[pydantic-ai]"'
    ) from error

import inboxlog
from inboxlog.integrations._common import (
    Job,
    StepRejectedError,
    TurnEndedError,
    call,
    open_or_create,
    start,
)
from inboxlog.integrations._driver import Turn, answers, input_id, result_text, text
from inboxlog.types import ApprovalOutcome, Event, Message, StepOutcome

MESSAGES = "pydantic-ai/messages"
"""The event type of requests added to the history: ``{"messages": [...], "from": seq}``
(``from``: the seq of the last ``pydantic-ai/history`` before it, or 0); a request part a
``user/message`` or ``tool/result`` holds is a reference to it (:data:`REF`)."""
HISTORY = "pydantic-ai/history"
"""The event type of a rewritten history, replacing all before it: ``{"messages": [...],
"from": seq}`` (``from``: its own seq, or an earlier one), whole: a new worker reads
from it, not the events before it."""

REPLAY = "pydantic-ai"
"""The key of an ``assistant/message``'s ``source.replayState`` holding the response
whole, in ``ModelMessagesTypeAdapter``'s JSON: Pydantic AI's own ``ModelResponse``."""

REF = "eventSeq"
"""The key of a request part in a record that stands for a conversation event: the
event's seq, beside the part's keys the event does not hold (e.g. ``timestamp``)."""

_USER_PROMPT: TypeAdapter[UserPromptPart] = TypeAdapter(UserPromptPart)
_PART: TypeAdapter[ModelRequestPart] = TypeAdapter(cast("type[ModelRequestPart]", ModelRequestPart))
_RESPONSE: TypeAdapter[ModelResponse] = TypeAdapter(ModelResponse)
_REQUESTS: TypeAdapter[DeferredToolRequests] = TypeAdapter(DeferredToolRequests)


class InboxlogCapability(AbstractCapability[Any]):
    """Keeps an agent's conversation in an inboxlog session and steers its runs from the
    session's inbox (see the module documentation).

    ``InboxlogCapability(store)`` opens the session the run's ``conversation_id`` names
    (``agent.run(..., conversation_id="chat-1")``) for the length of each run;
    ``InboxlogCapability(session)`` runs every conversation on that open session and
    leaves closing it to its owner. ``plugins`` are pre-step listeners (plain or
    ``async``) asked at every model request; ``keep_inbox_on_cancel`` keeps the inbox
    when a run is cancelled (by default a cancelled run clears it, as ``cancel`` does).
    """

    def __init__(
        self,
        target: inboxlog.Store | inboxlog.Session,
        *,
        plugins: Iterable[inboxlog.AsyncListener] = (),
        keep_inbox_on_cancel: bool = False,
    ) -> None:
        if not isinstance(target, (inboxlog.Store, inboxlog.Session)):
            raise TypeError(
                "InboxlogCapability: expected an inboxlog.Store or inboxlog.Session, "
                f"got {type(target).__name__}"
            )
        self.target = target
        self.plugins = list(plugins)
        self.keep_inbox_on_cancel = keep_inbox_on_cancel
        self._runs: dict[str | None, _Run] = {}  # the runs in progress, by run id
        self._histories = _Histories()

    @property
    def session(self) -> inboxlog.Session | None:
        """The session of the run in progress, else ``None`` (also while several runs are
        in progress at once: the run's hooks find theirs by ``ctx.run_id``)."""
        runs = list(self._runs.values())
        return runs[0].log if len(runs) == 1 and hasattr(runs[0], "log") else None

    # No ``for_run``: one instance serves every run, sequential or concurrent, so that
    # nothing is rebuilt per run (neither this capability nor the agent's combination of
    # its capabilities); each run's state is a ``_Run`` kept under its run id.

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        """Opens the session and the turn, puts the stored history in front of the run,
        runs it, and ends the turn as the run ended."""
        run = _Run(self.plugins, self.keep_inbox_on_cancel, ctx.prompt, self._histories)
        if self._runs.setdefault(ctx.run_id, run) is not run:
            raise RuntimeError(f'InboxlogCapability: a run with id "{ctx.run_id}" is in progress')
        try:
            await call(run.begin, self.target, ctx.conversation_id, list(ctx.messages))
        except BaseException:
            del self._runs[ctx.run_id]
            raise
        try:
            ctx.messages[:0] = run.loaded
            run.recorded = ctx.messages[: run.held]  # not an answer the log holds elsewhere
            if (
                ctx.prompt is None
                and run.pending
                and not run.resuming
                and not _ends_with_request(ctx.messages)
            ):
                # No prompt, but input waits: a request for the first step to carry.
                run.placeholder = ModelRequest(parts=[])
                ctx.messages.append(run.placeholder)
            result = await handler()
            await run.written()  # normally done already, by the hook after the last response
        except GeneratorExit as error:  # the run's coroutine is closed: it must not wait
            run.end(run.history(ctx), error, None)
            raise
        except BaseException as error:
            await run.written(quietly=True)
            length = isinstance(error, (IncompleteToolCall, OutputTokenLimitExceeded))
            await call(run.end, run.history(ctx), error, "max-tokens" if length else None)
            raise
        else:
            await call(run.end, result.all_messages(), None, run.outcome())
            return result
        finally:
            del self._runs[ctx.run_id]

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """The step boundary: claims the inbox's input, asks the plugins, records the
        step and adds the messages that entered to the request about to be sent."""
        run = self._active(ctx)
        await run.written()
        entered = await run.turn.step_async()
        target = ctx.messages[-1] if ctx.messages else None
        shared = (
            isinstance(target, ModelRequest)
            and bool(request_context.messages)
            and request_context.messages[-1] is target
        )
        if isinstance(target, ModelRequest) and shared:
            parts = run.request_parts(target, entered)
            if parts is not None:
                target.parts = parts
                target.metadata = _with_ids(target.metadata, entered)
        elif entered:
            request = ModelRequest(
                parts=[p for m in entered for p in message_parts(m)],
                metadata=_with_ids(None, entered),
            )
            request_context.messages = [*request_context.messages, request]
            ctx.messages.append(request)
        return request_context

    async def prepare_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Appends the prepared request (and what came before it) to the log, before the
        model is called."""
        run = self._active(ctx)
        await run.written()
        if run.has_new(ctx.messages):  # a further attempt at the same request has none
            await call(run.record_new, ctx.messages)
        return request_context

    async def before_node_run(
        self, ctx: RunContext[Any], *, node: AgentNode[Any]
    ) -> AgentNode[Any]:
        """A run that took up a parked turn resumes Pydantic AI's own run: its first node
        gets the decisions as ``DeferredToolResults`` (the log's decisions win over
        approvals the caller passed)."""
        run = self._active(ctx)
        if isinstance(node, UserPromptNode) and run.resuming:
            run.resuming = False
            node.deferred_tool_results = _merged(node.deferred_tool_results, run.deferred)
        return node

    async def after_node_run(
        self, ctx: RunContext[Any], *, node: AgentNode[Any], result: NodeResult[Any]
    ) -> NodeResult[Any]:
        """Appends a model response to the log as soon as it is in the history, while the
        tools run (the next hook waits until it is durable); at an ``End``, the model
        stopped: one more request while ``next-step`` holds input, else the turn ends."""
        run = self._active(ctx)
        await run.written()
        if isinstance(node, ModelRequestNode):
            run.write_behind(ctx.messages)
            run.last_response = next(
                (m for m in reversed(ctx.messages) if isinstance(m, ModelResponse)), None
            )
            return result
        # Only a CallToolsNode's End: run_stream ends on a node of its own (its result is
        # already handed out, so no request could follow).
        stopped = isinstance(result, End) and isinstance(node, CallToolsNode)
        if stopped and isinstance(result, End) and _asks(result.data.output):
            await call(run.park, ctx.messages, result.data.output)
            return result
        if stopped and run.turn.step_open and await call(run.stop, ctx.messages):
            request = ModelRequest(parts=[])
            run.placeholder = request
            return ModelRequestNode(request=request)
        return result

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: ValidatedToolArgs,
        handler: WrapToolExecuteHandler,
    ) -> Any:
        """Runs a tool between its ``tool/call``, durable before the tool starts, and its
        ``tool/result``."""
        return await self._active(ctx).execute(call, args, handler)

    def _active(self, ctx: RunContext[Any] | None) -> _Run:
        run = None if ctx is None else self._runs.get(ctx.run_id)
        if run is None:
            raise RuntimeError(
                "InboxlogCapability: a hook ran outside a run (its wrap_run was skipped)"
            )
        return run


class _Run:
    """One run: its turn on the log (:class:`~inboxlog.integrations._driver.Turn`) and
    what of the history is in the log.

    Its methods without ``async`` do the log's blocking work; each hook runs what it
    needs of them in one worker-thread call, never on the event loop.
    """

    log: inboxlog.Session
    """The run's session (set by :meth:`begin`)."""
    turn: Turn
    """The run's turn (set by :meth:`begin`)."""

    def __init__(
        self,
        plugins: list[inboxlog.AsyncListener],
        keep_inbox_on_cancel: bool,
        prompt: Any,
        histories: _Histories,
    ) -> None:
        self.plugins = plugins
        self.keep_inbox_on_cancel = keep_inbox_on_cancel
        self.prompt = prompt
        self.histories = histories
        self.owned = False
        self.loaded: list[ModelMessage] = []
        self.held = 0  # how many of the first messages of the run's history the log holds
        self.start = 0  # the ``from`` of this run's records
        self.pending = False
        self.prompt_id = input_id()
        self.recorded: list[ModelMessage] = []
        self.live: list[ModelMessage] | None = None  # the run's history, as the hooks see it
        self.placeholder: ModelRequest | None = None
        self.last_response: ModelResponse | None = None
        self.writing: Job | None = None  # the response record in flight
        self.answered: set[str] = set()  # the tool calls this run wrote a result for
        self.running: dict[str, ToolCallPart] = {}  # the tools called and not answered
        self.results: dict[str, Event] = {}  # the tool/result events a record may cite
        self.users: list[Event] = []  # the user/message events no record cites yet
        self.seen = 0  # the last seq looked at for user/message events
        self.resuming = False  # a parked turn taken up, its first node not yet run
        self.deferred: DeferredToolResults | None = None  # the decisions, as Pydantic AI's
        self.asked_by: dict[str, str] = {}  # a parked run's calls by approval id

    def begin(
        self,
        target: inboxlog.Store | inboxlog.Session,
        conversation_id: str,
        given: list[ModelMessage],
    ) -> None:
        """Opens the session (unless given one), reads its history and starts the turn
        with the run's prompt."""
        if isinstance(target, inboxlog.Session):
            self.log = target
        else:
            self.log, self.owned = open_or_create(target, conversation_id), True
        log = self.log
        self.turn = Turn(log, self.plugins, keep_inbox_on_cancel=self.keep_inbox_on_cancel)
        try:
            store = None if isinstance(target, inboxlog.Session) else target
            if given and log.parked() is not None:
                raise ValueError(
                    f'session "{log.id}" is parked: resume it without message_history='
                )
            # A parked run is taken up (ApprovalsPendingError, writing nothing, while any
            # approval is pending), or the turn starts below.
            resumed = Turn.resume(log, self.plugins, keep_inbox_on_cancel=self.keep_inbox_on_cancel)
            if resumed is not None:
                self.turn, state, decisions = resumed
                self.asked_by = _asked(state)
            skip = set(self.asked_by.values())  # Pydantic AI's own resume answers them
            self.loaded, self.held, self.start, read = self.histories.load(log, store, skip)
            self.answered = _returned(self.loaded)
            for event in read:  # a result repair wrote, for the resumed request to cite
                if event["type"] == "tool/result" and event["seq"] >= self.start:
                    self.results.update(dict.fromkeys(answers([event]), event))
            if self.loaded and given:
                raise ValueError(
                    f'session "{log.id}" holds a history: run the agent without message_history='
                )
            if resumed is None:
                own = [] if self.prompt is None else [self.prompt_message()]
                self.turn.start(own)  # refused while another run holds the session
            else:
                self.resume(state, decisions)
            self.seen = log.last_seq or 0
        except BaseException:
            self.release()
            raise
        try:
            if given:
                self.seed(given)  # a given history seeds the log
                self.held = len(given)
            self.pending = log.inbox.has_pending
        except BaseException as error:
            self.end([], error, None)
            raise

    def resume(self, state: Any, decisions: Mapping[str, ApprovalOutcome]) -> None:
        """Takes up a parked run: its ``DeferredToolRequests`` and the decisions become
        the ``DeferredToolResults`` its first node gets (``before_node_run``):
        ``ToolApproved`` for a call allowed once, else ``ToolDenied`` with the text of the
        ``tool/result`` the log wrote for it (``TOOL_NOT_ALLOWED``), which the request's
        record cites, so the call is answered once. A prompt given waits in
        ``next-step``, for the request after the tools."""
        requests = _REQUESTS.validate_python(state.get("requests") or {})
        denied = {
            call_id
            for approval_id, call_id in self.asked_by.items()
            if decisions.get(approval_id) != "allowed-once"
        }
        if denied - self.results.keys():  # read before a cached history's tail: read it
            for event in self.log.events(self.start):
                if event["type"] == "tool/result":
                    self.results.update(dict.fromkeys(answers([event]), event))
        approvals: dict[str, bool | ToolApproved | ToolDenied] = {}
        for call_id in self.asked_by.values():
            if call_id not in denied:
                approvals[call_id] = ToolApproved()
            elif call_id in self.results:
                approvals[call_id] = ToolDenied(result_text(self.results[call_id]["data"]))
        self.deferred = requests.build_results(approvals=approvals)
        self.resuming = True
        if self.prompt is not None:
            inbox = self.log.inbox
            inbox.splice("next-step", len(inbox.next_step), 0, [self.prompt_message()])

    def park(self, messages: list[ModelMessage], requests: DeferredToolRequests) -> None:
        """The run stopped for approvals (its output ``DeferredToolRequests``): records
        the history, asks for each call (its ``tool/call`` first, for a call no tool run
        wrote one for: ``requires_approval=True``) and parks the turn with the requests
        in ``DeferredToolRequests``' JSON and the approval ids by call."""
        self.record_new(messages)
        asked: dict[str, str] = {}
        for part in requests.approvals:
            call_id = part.tool_call_id
            if call_id not in self.running:
                self.turn.calling(call_id, part.tool_name, part.args_as_json_str())
            self.running.pop(call_id, None)
            approval_id = f"approval-{uuid.uuid4().hex[:12]}"
            reason = (requests.metadata.get(call_id) or {}).get("reason")
            reason = reason if isinstance(reason, str) else None
            self.turn.ask(approval_id, part.tool_name, call_id, part.args_as_dict(), reason)
            asked[approval_id] = call_id
        state = {"requests": _REQUESTS.dump_python(requests, mode="json"), "approvals": asked}
        self.turn.park(state)

    def prompt_message(self) -> Message:
        """The inbox message the run's own prompt travels as."""
        if isinstance(self.prompt, str):
            return {"id": self.prompt_id, "role": "user", "content": self.prompt}
        part = _USER_PROMPT.dump_python(UserPromptPart(self.prompt), mode="json")
        return {"id": self.prompt_id, "role": "user", "content": part["content"]}

    def request_parts(
        self, request: ModelRequest, entered: list[Message]
    ) -> list[ModelRequestPart] | None:
        """The parts of ``request`` once the messages that entered are in it, in claim
        order (the run's own prompt is the part Pydantic AI already made, unless a plugin
        rewrote it); ``None`` when nothing changes."""
        own = [m for m in entered if m.get("id") == self.prompt_id]
        if not own and not any(message_parts(m) for m in entered):
            return None
        kept = list(request.parts)
        prompt_parts: list[ModelRequestPart] = []
        if own:
            for i in range(len(kept) - 1, -1, -1):
                part = kept[i]
                if isinstance(part, UserPromptPart) and part.content == self.prompt:
                    prompt_parts = [kept.pop(i)]
                    break
        added: list[ModelRequestPart] = []
        for m in entered:
            # The part Pydantic AI made, unless a plugin rewrote the prompt.
            if m.get("id") == self.prompt_id and prompt_parts and m == self.prompt_message():
                added.extend(prompt_parts)
            else:
                added.extend(message_parts(m))
        return [*kept, *added]

    def write_behind(self, messages: list[ModelMessage]) -> None:
        """On the loop: starts recording what the history gained (a response) in a
        worker thread while the loop goes on (the tools run); :meth:`written` waits for
        it."""
        self.live = messages
        self.writing = start(self.record_new, list(messages))

    async def written(self, *, quietly: bool = False) -> None:
        """Waits until the response record in flight is durable; its error raises here.

        ``quietly``, for a run already ending on another exception, which it re-raises
        once the turn is ended: nothing raises, not even a second cancellation, so that
        ending the turn is never skipped."""
        pending = self.writing
        if pending is None:
            return
        try:
            await pending.outcome()  # the tools of one response may wait for it at once
        except BaseException:
            if not quietly:
                raise
        finally:
            if self.writing is pending:
                self.writing = None

    async def execute(
        self, part: ToolCallPart, args: ValidatedToolArgs, handler: WrapToolExecuteHandler
    ) -> Any:
        """Runs one tool: its ``tool/call`` is durable before it starts (after the response
        that made the call), so a crash inside it leaves the call answered on the next
        open, never run again by itself; its ``tool/result`` follows, a retry the tool
        asked for or an exception it raised marked an error."""
        await self.written()
        await call(self.calling, part)
        try:
            result = await handler(args)
        except ToolRetryError as error:
            answer = error.tool_retry
            if isinstance(answer, ToolReturnPart):
                await call(self.answer, answer)
            raise
        except (CallDeferred, ApprovalRequired):
            raise  # no result yet: its request answers it, when the run resumes
        except Exception as error:
            failed = ToolReturnPart(part.tool_name, str(error), part.tool_call_id, outcome="failed")
            await call(self.answer, failed, {"name": type(error).__name__, "code": "TOOL_ERROR"})
            raise
        returned = ToolReturnPart(part.tool_name, result, part.tool_call_id)
        await call(self.answer, returned)
        return result

    def calling(self, part: ToolCallPart) -> None:
        if part.tool_call_id not in self.asked_by.values():  # else written before it parked
            self.turn.calling(part.tool_call_id, part.tool_name, part.args_as_json_str())
        self.running[part.tool_call_id] = part

    def abandon(self, error: BaseException) -> None:
        """Answers the tools still running as the run ends on ``error`` (a cancellation
        unwinds them only after the run): their outcome is unknown."""
        told = "The run ended before the tool returned: its outcome is unknown."
        reason = {"name": type(error).__name__, "code": "TOOL_CANCELLED"}
        for part in list(self.running.values()):
            returned = ToolReturnPart(part.tool_name, told, part.tool_call_id, outcome="failed")
            self.answer(returned, reason)

    def answer(self, part: ToolReturnPart, error: dict[str, str] | None = None) -> None:
        """Appends the ``tool/result`` that ``part`` (a tool's return, or a retry the model
        is asked for) stands for, once per call."""
        self.running.pop(part.tool_call_id, None)
        if part.tool_call_id in self.answered:
            return
        self.answered.add(part.tool_call_id)
        failed = part.outcome != "success"
        if failed and error is None and part.outcome == "retried":
            error = {"name": "ModelRetry", "code": "TOOL_RETRY"}
        said = part.model_response_str()
        event = self.turn.answered(
            part.tool_call_id,
            [text(said)],
            is_error=failed,
            error=error,
            **_returned_as(part, said),
        )
        if event is not None:  # None: a decision answered it (TOOL_NOT_ALLOWED)
            self.results[part.tool_call_id] = event

    def said(self, response: ModelResponse) -> None:
        """Appends ``response`` as one ``assistant/message``; its tool calls are pending
        until answered."""
        content: list[dict[str, Any]] = []
        for part in response.parts:
            if isinstance(part, TextPart):
                content.append(text(part.content))
            elif isinstance(part, ThinkingPart):
                content.append({"type": "reasoning", "text": part.content})
            elif isinstance(part, ToolCallPart):
                content.append(_call_block(part))
        self.turn.said(
            response.provider_response_id or f"pydantic-ai-{uuid.uuid4().hex}",
            content,
            provider=response.provider_name or "unknown",
            model=response.model_name or "unknown",
            usage=_usage(response),
            replay_state={REPLAY: _RESPONSE.dump_python(response, mode="json")},
        )

    def converse(self, added: Sequence[ModelMessage]) -> None:
        """Answers the tool calls the requests among ``added`` answer and no tool run
        answered already (arguments that failed validation, an output tool)."""
        for message in added:
            if isinstance(message, ModelRequest):
                for part in message.parts:
                    if isinstance(part, ToolReturnPart):
                        self.answer(part)

    def stop(self, messages: list[ModelMessage]) -> bool:
        """The model stopped (an ``End``): records the history, then ends the step and,
        when no steering waits, the turn; ``True`` when one more request must take the
        steering."""
        self.record_new(messages)
        return self.turn.model_stopped(self.outcome())

    def outcome(self) -> StepOutcome:
        last = self.last_response
        return "max-tokens" if last is not None and last.finish_reason == "length" else "completed"

    def end(
        self, messages: list[ModelMessage], error: BaseException | None, outcome: StepOutcome | None
    ) -> None:
        """Records the rest of the history, ends the turn as the run ended (the driver's
        policy: ``outcome`` for a run that returned or stopped for length, else by
        ``error``), then closes the session if this run opened it."""
        try:
            self.settle(messages)
            if error is None:
                self.turn.finish(outcome or "completed")
                self.histories.keep(self.log, self.recorded, self.start)
            else:
                self.abandon(error)
                self.turn.end(error, outcome)
        finally:
            self.release()

    def release(self) -> None:
        """Closes the session if this run opened it."""
        if self.owned and not self.log.closed:
            self.log.close()

    def record(self, messages: Sequence[ModelMessage], kind: str = MESSAGES) -> None:
        """Appends ``messages`` in order: each response a run added as its
        ``assistant/message`` (which carries it whole, so it is stored once), the rest in
        ``kind`` records; a given history, and a rewritten one (``HISTORY``), whole."""
        if kind == HISTORY:
            # Its own seq, or an earlier one if another event comes first: reading from
            # an earlier seq only reads more.
            last = self.log.last_seq
            self.start = 0 if last is None else last + 1
            self._append(kind, messages)
            return
        batch: list[ModelMessage] = []
        for message in messages:
            if isinstance(message, ModelResponse):
                self._append(kind, batch)
                batch = []
                self.said(message)
            else:
                batch.append(message)
        self._append(kind, batch)

    def seed(self, messages: Sequence[ModelMessage]) -> None:
        """Appends a given history as one record: it was said before this log."""
        self._append(MESSAGES, messages, cite=False)

    def _append(self, kind: str, messages: Sequence[ModelMessage], *, cite: bool = True) -> None:
        """Appends one record of ``messages``; in a ``pydantic-ai/messages`` record a
        request's part that a conversation event holds (a prompt a step entered, a tool's
        return) is that event's seq and what the event does not hold (:data:`REF`)."""
        if not messages:
            return
        data = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
        if kind == MESSAGES and cite:
            for message in data:
                if message.get("kind") == "request":
                    message["parts"] = [self._cite(part) for part in message["parts"]]
        self.log.append(kind, {"messages": data, "from": self.start})

    def _cite(self, part: dict[str, Any]) -> dict[str, Any]:
        """``part`` as a reference to the event that holds it, when one does (at or after
        this run's ``from``, so that a new worker reads it); else ``part`` whole."""
        kind = part.get("part_kind")
        if kind == "tool-return":
            event = self.results.get(str(part.get("tool_call_id")))
            return part if event is None else _reference(part, event, self.start)
        if kind != "user-prompt":
            return part
        if self.log.last_seq is not None and self.log.last_seq > self.seen:
            news = self.log.events(self.seen + 1)
            self.users.extend(e for e in news if e["type"] == "user/message")
            self.seen = self.log.last_seq
        for i, event in enumerate(self.users):
            cited = _reference(part, event, self.start)
            if cited is not part:
                del self.users[i]  # a prompt entered once is one part
                return cited
        return part

    def has_new(self, messages: list[ModelMessage]) -> bool:
        """Whether the history differs from what the log holds (checked on the loop)."""
        done = self.recorded
        return len(messages) != len(done) or (bool(done) and not _same(messages[-1], done[-1]))

    def record_new(self, messages: list[ModelMessage]) -> None:
        """Appends what the history gained since the last record; the whole history when
        a hook rewrote what was already recorded."""
        self.live = messages
        done = self.recorded
        if len(messages) >= len(done) and all(map(_same, messages, done)):
            added, kind = messages[len(done) :], MESSAGES
            if not added:
                return
            self.converse(added)  # its responses are said as they are recorded
        else:
            added, kind = messages, HISTORY
            kept = {id(m) for m in done}
            self.converse(
                [m for m in messages if id(m) not in kept and isinstance(m, ModelRequest)]
            )
        self.record(added, kind)
        self.recorded = list(messages)

    def history(self, ctx: RunContext[Any]) -> list[ModelMessage]:
        """The run's history: the hooks' view of it once a hook ran (the graph replaces the
        list ``wrap_run`` saw when it starts)."""
        return ctx.messages if self.live is None else self.live

    def settle(self, messages: list[ModelMessage]) -> None:
        """Records what is left of the history, without the placeholder request that no
        step filled."""
        if self.placeholder is not None and not self.placeholder.parts:
            messages = [m for m in messages if m is not self.placeholder]
        if messages and not self.log.closed:
            self.record_new(messages)


class _Histories:
    """The history each session's last run left, kept between the runs of one capability
    so that a run reads only what other writers appended since, not the whole log.

    A run takes its session's entry (so a failed run leaves none) and a run that
    completed puts back what it wrote, with the seq of the log's last event then, the
    header's ``createdAt`` (a session deleted and created again is read afresh) and its
    records' ``from``. Without an entry, a run reads the log from the last record's
    ``from`` (from its start when it has only the session, not its store).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[str, tuple[int | None, int, list[ModelMessage], int]] = {}

    def load(
        self, log: inboxlog.Session, store: inboxlog.Store | None, skip: set[str]
    ) -> tuple[list[ModelMessage], int, int, list[Event]]:
        """The session's history, how many of its first messages the records hold as
        they are (the rest answer calls from ``tool/result`` events, :func:`answer_calls`,
        but those in ``skip``), the ``from`` of its next records and the events read."""
        with self._lock:
            kept = self._by_id.pop(log.id, None)
        if kept is not None:
            seq, created, messages, start = kept
            last = log.last_seq
            if seq is not None and created == log.header["createdAt"] and last is not None:
                if last == seq:
                    return list(messages), len(messages), start, []
                tail = log.events(seq + 1) if last > seq else []
                if tail and not any(e["type"] == HISTORY for e in tail):
                    try:
                        recorded = _history_json(tail)
                    except _Unresolved:  # a record cites an event before the tail
                        pass
                    else:
                        added = ModelMessagesTypeAdapter.validate_python(recorded)
                        return (*_answer_calls([*messages, *added], tail, skip), start, tail)
        start = 0 if store is None else history_start(store, log.id)
        events = log.events(start)
        history = [e for e in events if e["type"] == HISTORY]
        if history:  # written by a worker whose records carry no ``from``
            start = history[-1]["seq"]
        messages = ModelMessagesTypeAdapter.validate_python(_history_json(events))
        return (*_answer_calls(messages, events, skip), start, events)

    def keep(self, log: inboxlog.Session, messages: list[ModelMessage], start: int) -> None:
        with self._lock:
            self._by_id[log.id] = (log.last_seq, log.header["createdAt"], list(messages), start)


def history_start(store: inboxlog.Store, id: str) -> int:
    """Where the history of session ``id`` starts: the ``from`` of its last
    ``pydantic-ai/messages`` or ``pydantic-ai/history`` record (0 for a log without
    one, or written before records carried it)."""
    last = store.tail(id, 1, [MESSAGES, HISTORY])
    return int(last[0]["data"].get("from", 0)) if last else 0


def message_parts(message: Message) -> list[ModelRequestPart]:
    """The request parts an inbox message stands for.

    ``{"id", "content"}`` stands for one ``UserPromptPart`` (content a str, or a list of
    Pydantic AI user content in its JSON form, e.g. ``{"kind": "image-url", "url": ...}``);
    a message with no content (the marker a run without input enters with) for none.
    Other keys (``role``, ``source``, ...) stay in the log only.
    """
    content = message.get("content")
    if content is None:
        return []
    if isinstance(content, str):
        return [UserPromptPart(content)]
    if isinstance(content, list):
        return [_USER_PROMPT.validate_python({"content": content, "part_kind": "user-prompt"})]
    raise ValueError(f'message "{message.get("id")}": "content" must be a string or a list')


def fold_messages(events: Iterable[Mapping[str, Any]]) -> list[ModelMessage]:
    """The Pydantic AI message history a log's events hold: the responses of the
    ``assistant/message`` events and the requests of the ``pydantic-ai/messages``
    records in log order, from the last ``pydantic-ai/history`` on, each request part a
    record cites (:data:`REF`) rebuilt from the ``user/message`` or ``tool/result`` it
    cites, and every tool call that only a ``tool/result`` answers (one repair wrote for
    a call a crash cut off) answered as a ``ToolReturnPart``.

    Reads any log, e.g. ``store.inspect(id)[1]``, or its events from
    :func:`history_start` on; a record citing an event not among ``events`` raises
    ``ValueError``. The result is what ``agent.run(..., message_history=...)`` takes.
    """
    events = list(events)
    return answer_calls(ModelMessagesTypeAdapter.validate_python(_history_json(events)), events)


def answer_calls(
    messages: list[ModelMessage], events: Sequence[Mapping[str, Any]]
) -> list[ModelMessage]:
    """``messages`` with each tool call they leave unanswered that a ``tool/result``
    among ``events`` answers given its result: a ``ToolReturnPart`` with the result's
    text (``outcome="failed"`` for an error), in a request after the call's response
    (after the request that follows it, when one does).
    A run resumed from the history then sends the model its calls answered, and runs
    none of them again by itself."""
    return _answer_calls(messages, events)[0]


def _answer_calls(
    messages: list[ModelMessage], events: Sequence[Mapping[str, Any]], skip: Collection[str] = ()
) -> tuple[list[ModelMessage], int]:
    """:func:`answer_calls` (but for the calls in ``skip``), and how many of the first
    messages it left as they were. A request that follows the call's response already is
    in a record, so the answers go in a request of their own after it (Pydantic AI
    merges the two, tool results first): a record is never written twice."""
    results = answers([cast("Event", e) for e in events if e["type"] == "tool/result"])
    held = len(messages)
    if not results:
        return messages, held
    done = _returned(messages) | set(skip)
    out: list[ModelMessage] = []
    carried: list[ModelRequestPart] = []
    for i, message in enumerate(messages):
        out.append(message)
        if carried:  # ``message`` is the request that followed the response
            out.append(ModelRequest(parts=carried))
            carried = []
        if not isinstance(message, ModelResponse):
            continue
        returns: list[ModelRequestPart] = [
            ToolReturnPart(
                part.tool_name,
                result_text(results[part.tool_call_id]),
                part.tool_call_id,
                outcome="failed" if _is_error(results[part.tool_call_id]) else "success",
            )
            for part in message.parts
            if isinstance(part, ToolCallPart)
            and part.tool_call_id in results
            and part.tool_call_id not in done
        ]
        if not returns:
            continue
        if i + 1 < len(messages) and isinstance(messages[i + 1], ModelRequest):
            held, carried = min(held, i + 2), returns
        else:
            held = min(held, i + 1)
            out.append(ModelRequest(parts=returns))
    return out, held


def _same(message: ModelMessage, recorded: ModelMessage) -> bool:
    """Whether ``message`` is the recorded one, or a copy of it with the same parts (a
    request a run without a prompt sends again; the response a run resumed with
    ``deferred_tool_results`` answers): nothing to record."""
    if message is recorded:
        return True
    return type(message) is type(recorded) and message.parts is recorded.parts


def _returned(messages: Sequence[ModelMessage]) -> set[str]:
    """The ids of the tool calls the requests among ``messages`` answer."""
    return {
        part.tool_call_id
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if isinstance(part, ToolReturnPart)
    }


def _is_error(result: Mapping[str, Any]) -> bool:
    content = result.get("message", {}).get("content", [])
    return any(isinstance(b, dict) and b.get("isError") for b in content)


class _Unresolved(ValueError):
    """A record cites an event that is not among the events read."""


def _history_json(events: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The history's messages in ``ModelMessagesTypeAdapter``'s JSON, each part a record
    cites (:data:`REF`) rebuilt from the event it cites (only the messages a later
    rewrite did not replace: a record a rewrite dropped may cite what was not read)."""
    events = list(events)
    held = {e["seq"]: e for e in events if e["type"] in ("user/message", "tool/result")}
    messages: list[Any] = []
    for event in events:
        kind = event["type"]
        if kind == MESSAGES:
            messages.extend(event["data"]["messages"])
        elif kind == HISTORY:
            messages = list(event["data"]["messages"])
        elif kind == "assistant/message":
            source = event["data"].get("message", {}).get("source", {})
            state = source.get("replayState") if isinstance(source, dict) else None
            if isinstance(state, dict) and REPLAY in state:
                messages.append(state[REPLAY])
    return [_resolved(m, held) for m in messages]


def _resolved(message: Any, held: Mapping[int, Mapping[str, Any]]) -> Any:
    """A recorded message with the parts it cites rebuilt from ``held`` (by seq)."""
    if not isinstance(message, dict) or message.get("kind") != "request":
        return message
    parts = message.get("parts")
    if not isinstance(parts, list) or not any(isinstance(p, dict) and REF in p for p in parts):
        return message
    rebuilt: list[Any] = []
    for part in parts:
        if isinstance(part, dict) and REF in part:
            event = held.get(part[REF])
            if event is None:
                raise _Unresolved(
                    f"a pydantic-ai/messages record cites event {part[REF]}, not read"
                )
            part = _rebuilt(part, event)
        rebuilt.append(part)
    return {**message, "parts": rebuilt}


def _held(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The keys of a request part's JSON that a conversation event holds: a
    ``UserPromptPart``'s for a ``user/message`` (a message a step entered), a
    ``ToolReturnPart``'s for a ``tool/result`` (with its ``pydantic-ai`` key, written
    as the tool returned: the tool's name and its return value's JSON, when the text
    does not say it)."""
    data = event["data"]
    if event["type"] == "user/message":
        if not isinstance(data, dict) or not isinstance(data.get("content"), (str, list)):
            return None
        try:
            found = message_parts(cast("Message", data))
        except ValueError:  # content Pydantic AI does not take: no part to give back
            return None
        if len(found) != 1:
            return None
        prompt: dict[str, Any] = _PART.dump_python(found[0], mode="json")
        prompt.pop("timestamp", None)
        return prompt
    if event["type"] == "tool/result":
        ids = list(answers([cast("Event", event)]))
        if len(ids) != 1:
            return None
        extra = data.get(REPLAY)
        extra = extra if isinstance(extra, dict) else {}
        held = {"tool_call_id": ids[0], "part_kind": "tool-return"}
        said = result_text(data)
        held["content"] = extra.get("content", _json(said) if extra.get("json") else said)
        held["outcome"] = "failed" if _is_error(data) else "success"
        if "tool_name" in extra:
            held["tool_name"] = extra["tool_name"]
        return held
    return None


def _rebuilt(reference: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    """The part JSON ``reference`` stands for, the rest of it from ``event``."""
    held = _held(event)
    if held is None:
        raise _Unresolved(f"event {event['seq']} holds no request part")
    return {**held, **{k: v for k, v in reference.items() if k != REF}}


def _reference(part: dict[str, Any], event: Mapping[str, Any], start: int) -> dict[str, Any]:
    """``part`` (JSON) as a reference to ``event``: its seq and the keys the event does
    not hold (those with a default value left out when reading fills them in); ``part``
    itself when the event does not give it back exactly, or a new worker would not read
    the event (before ``start``)."""
    held = _held(event) if event["seq"] >= start else None
    if held is None or any(k not in part for k in held):
        return part
    rest = {k: v for k, v in part.items() if k not in held or held[k] != v}
    lean = {k: v for k, v in rest.items() if v is not None and v != []}
    for kept in (lean, rest):
        reference = {REF: event["seq"], **kept}
        try:
            if (
                _PART.dump_python(_PART.validate_python(_rebuilt(reference, event)), mode="json")
                == part
            ):
                return reference
        except ValueError:
            pass
    return part


def _returned_as(part: ToolReturnPart, said: str) -> dict[str, Any]:
    """The ``tool/result``'s extra key for a tool's return: what the request's
    ``ToolReturnPart`` needs beside the text, its tool's name and, unless the text is
    it, ``"json": true`` when the text is the return value's JSON, else that JSON."""
    extra: dict[str, Any] = {"tool_name": part.tool_name}
    if not (isinstance(part.content, str) and part.content == said):
        with contextlib.suppress(ValueError):  # not JSON: the request's record keeps it
            content = _PART.dump_python(part, mode="json")["content"]
            if _json(said) == content:
                extra["json"] = True
            else:
                extra["content"] = content
    return {REPLAY: extra}


def _json(said: str) -> Any:
    """``said`` read as JSON (``None`` when it is not)."""
    try:
        return json.loads(said)
    except ValueError:
        return None


def _call_block(part: ToolCallPart) -> dict[str, Any]:
    """A tool call's ``tool-call`` block, its arguments the model's JSON text."""
    block: dict[str, Any] = {"type": "tool-call", "id": part.tool_call_id}
    block["name"] = part.tool_name
    block["arguments"] = part.args_as_json_str()
    return block


def _usage(response: ModelResponse) -> dict[str, int]:
    """A response's usage in the reference's keys."""
    usage = response.usage
    out = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    if usage.cache_read_tokens:
        out["cacheReadTokens"] = usage.cache_read_tokens
    if usage.cache_write_tokens:
        out["cacheWriteTokens"] = usage.cache_write_tokens
    if usage.output_reasoning_tokens:
        out["reasoningTokens"] = usage.output_reasoning_tokens
    return out


def _with_ids(metadata: dict[str, Any] | None, entered: list[Message]) -> dict[str, Any] | None:
    ids = [m["id"] for m in entered if message_parts(m)]
    if not ids:
        return metadata
    return {**(metadata or {}), "inboxlog": {"messages": ids}}


def _asked(state: Any) -> dict[str, str]:
    """The calls a parked run asked about, by approval id, from its parked state."""
    asked = state.get("approvals") if isinstance(state, dict) else None
    return {str(k): str(v) for k, v in asked.items()} if isinstance(asked, dict) else {}


def _asks(output: Any) -> bool:
    """Whether a run's output is Pydantic AI stopping for approvals."""
    return isinstance(output, DeferredToolRequests) and bool(output.approvals)


def _merged(
    given: DeferredToolResults | None, decided: DeferredToolResults | None
) -> DeferredToolResults | None:
    """The results a resumed run's first node gets: the log's decisions as approvals,
    with the external calls' results the caller passed."""
    if given is None:
        return decided
    approvals = {} if decided is None else dict(decided.approvals)
    merged = replace(given, approvals=approvals)
    return merged if merged.approvals or merged.calls else None


def _ends_with_request(messages: Sequence[ModelMessage]) -> bool:
    return bool(messages) and isinstance(messages[-1], ModelRequest)


__all__ = [
    "HISTORY",
    "MESSAGES",
    "REF",
    "REPLAY",
    "InboxlogCapability",
    "StepRejectedError",
    "TurnEndedError",
    "answer_calls",
    "fold_messages",
    "history_start",
    "message_parts",
]
