"""``InboxlogMiddleware``: a ``create_agent`` run as one inboxlog turn (see the package doc)."""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain.agents.middleware.types import ModelRequest, ModelResponse, ToolCallRequest
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
)
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime
from langgraph.types import Command

import inboxlog
from inboxlog.integrations._common import call, open_or_create
from inboxlog.integrations._driver import Turn, answers, input_id, result_text, text
from inboxlog.integrations.langgraph import approvals
from inboxlog.integrations.langgraph.saver import InboxlogSaver
from inboxlog.types import Message, StepOutcome

MESSAGES = "langchain/messages"
"""The event type of the messages the agent added that are neither a model's response nor
a tool's result (a middleware's own, say): ``{"messages": [...]}``, each in LangChain's
``message_to_dict`` form. Logs of earlier releases hold every added message this way."""

_T = TypeVar("_T")


class InboxlogMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Makes each ``invoke`` (``ainvoke``, ``stream``, ``astream``) of a ``create_agent``
    agent one turn of the inboxlog session named by the run's ``thread_id``, and each
    model call one step of it.

    ``target`` is an :class:`inboxlog.Store` (the session is opened, or created, for the
    run and closed after it), an :class:`InboxlogSaver` (its session for the thread,
    which it holds: pass the same saver as the agent's ``checkpointer`` so both share one
    session and one writer) or an :class:`inboxlog.Session` (used for every run,
    whatever the thread). ``plugins`` are pre-step listeners asked at every model call,
    sync or ``async`` per the run (:func:`inboxlog.pre_step`).
    """

    def __init__(
        self,
        target: inboxlog.Store | InboxlogSaver | inboxlog.Session,
        *,
        plugins: Iterable[Any] = (),
        keep_inbox_on_cancel: bool = False,
    ) -> None:
        if not isinstance(target, (inboxlog.Store, InboxlogSaver, inboxlog.Session)):
            raise TypeError(
                "InboxlogMiddleware: expected an inboxlog.Store, InboxlogSaver or "
                f"inboxlog.Session, got {type(target).__name__}"
            )
        super().__init__()
        self.target = target
        self.plugins = list(plugins)
        self.keep_inbox_on_cancel = keep_inbox_on_cancel
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()
        if isinstance(target, InboxlogSaver):
            target._asker = self._ask_unasked

    # -- sync hooks -------------------------------------------------------------------

    def before_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Opens the turn; the run's new input joins ``next-turn``."""
        self._start(_thread_id(), state["messages"])
        return None

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Records the messages added since, then claims, decides and enters a step."""
        run = self._run()

        return self._guard(run, run.step, state["messages"])

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Records the model's message; ends the step when the model stopped, and goes on
        with another model call when ``next-step`` input is pending."""
        run = self._run()
        return self._guard(run, run.after_model, state["messages"])

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Closes the turn (if the model's stop did not already) and ends the run."""
        self._finish(self._run(), state["messages"])
        return None

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any]:
        """Calls the model; an exception ends the turn ``error`` (``aborted`` for an
        interrupt) and propagates."""
        run = self._run()
        run.model = request.model
        try:
            return handler(request)
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            self._abort(run, error)
            raise

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Runs the tool between its ``tool/call`` (durable before the tool starts) and its
        ``tool/result``; a call the log answered already is not run again. An exception
        that escapes the tool is its result (marked an error) and ends the turn as in
        :meth:`wrap_model_call`."""
        run = self._run()
        try:
            earlier = run.before_tool(request, _resuming())
            if earlier is not None:
                return earlier
            return run.after_tool(request, handler(request))
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            self._abort(run, error, request)
            raise

    # -- async hooks: the same work, the log's calls in a worker thread ---------------

    async def abefore_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`before_agent`, for ``ainvoke`` and ``astream``."""
        await call(self._start, _thread_id(), state["messages"])
        return None

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`before_model`, with ``async`` plugins allowed."""
        run = await call(self._run)
        try:
            if not self.plugins:
                return await call(run.step, state["messages"])
            await call(run.before_step, state["messages"])
            return await call(run.update, await run.turn.step_async())
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            await self._abort_async(run, error)
            raise

    @hook_config(can_jump_to=["model"])
    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`after_model`."""
        run = await call(self._run)
        return await call(self._guard, run, run.after_model, state["messages"])

    async def aafter_agent(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """:meth:`after_agent`."""
        await call(self._finish, await call(self._run), state["messages"])
        return None

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """:meth:`wrap_model_call`; a cancelled run ends ``aborted``."""
        run = await call(self._run)
        run.model = request.model
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            await self._abort_async(run, error)
            raise

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """:meth:`wrap_tool_call`; a cancelled run ends ``aborted``."""
        run = await call(self._run)
        try:
            earlier = await call(run.before_tool, request, _resuming())
            if earlier is not None:
                return earlier
            return await call(run.after_tool, request, await handler(request))
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            await self._abort_async(run, error, request)
            raise

    # -- runs -------------------------------------------------------------------------

    def _start(self, thread_id: str | None, messages: Sequence[AnyMessage]) -> None:
        log, owned = self._open(thread_id)
        key = log.id
        with self._lock:
            if key in self._runs:
                if owned:
                    log.close()
                raise inboxlog.ProtocolError(
                    f'session "{key}": a run of this agent is already in progress'
                )
            run = _Run(log, owned, self.plugins, self.keep_inbox_on_cancel)
            self._runs[key] = run
        try:
            run.open(messages)
        except BaseException:
            self._forget(run)
            raise
        if isinstance(self.target, InboxlogSaver):
            run.turn.not_allowed |= self.target._not_allowed.pop(key, set())
            self._parks_with(self.target, run)

    def _parks_with(self, saver: InboxlogSaver, run: _Run) -> None:
        """Has ``saver`` park ``run`` if the graph stops for approval: when it lets the
        thread go, or when the next run on the thread starts."""
        with saver._lock:
            saver._parks[run.log.id] = lambda: self._park(saver, run)

    def _park(self, saver: InboxlogSaver, run: _Run) -> None:
        """Maps the ``HumanInTheLoopMiddleware`` interrupts the thread's checkpoint waits
        on onto approvals and parks the turn (approvals.py); other interrupts leave the
        run as it was."""
        if not run.turn.current:
            return
        found = saver._get(run.log.id, "", None)
        if found is None:
            return
        messages = found.checkpoint["channel_values"].get("messages", [])
        interrupts = approvals.pending(found.pending_writes or [], messages)
        if not interrupts:
            return
        run.record(messages)  # the model's response, when its hook came after the interrupt
        approvals.park(run.turn, interrupts, run.dispatched, set(answers(run.log.events())))
        self._forget(run)

    def _ask_unasked(self, thread_id: str) -> None:
        """A run starts on a thread whose graph waits on approvals the log never asked
        (the worker that stopped died first): a turn asks them and parks."""
        assert isinstance(self.target, InboxlogSaver)
        self._start(thread_id, [])
        with self._lock:
            run = self._runs[thread_id]
        try:
            run.turn.step()  # the turn's step goes on from the history
            self._park(self.target, run)
        except BaseException as error:
            self._abort(run, error)
            raise

    def _adopt(self, saver: InboxlogSaver, thread_id: str) -> _Run | None:
        """The run a resume handed on to this process (the saver resumed its parked
        turn as the graph started), taken up as this thread's run."""
        with saver._lock:
            resumed = saver._resumed.pop(thread_id, None)
        if resumed is None:
            return None
        turn, calls = resumed
        turn.plugins = list(self.plugins)
        turn.keep_inbox_on_cancel = self.keep_inbox_on_cancel
        run = _Run(turn.log, False, self.plugins, self.keep_inbox_on_cancel)
        run.turn = turn
        events = turn.log.events()
        run.earlier = answers(events)
        run.logged = {m.id for m in conversation(events) if m.id is not None}
        run.dispatched = set(calls)
        run.parked = set(calls)
        with self._lock:
            self._runs[thread_id] = run
        self._parks_with(saver, run)
        return run

    def _open(self, thread_id: str | None) -> tuple[inboxlog.Session, bool]:
        if isinstance(self.target, inboxlog.Session):
            return self.target, False
        if thread_id is None:
            raise ValueError(
                'InboxlogMiddleware: the run has no thread_id (pass config={"configurable": '
                '{"thread_id": ...}})'
            )
        if isinstance(self.target, InboxlogSaver):
            return self.target.session(thread_id), False
        return open_or_create(self.target, thread_id), True

    def _run(self) -> _Run:
        """The thread's run. A graph resumed after an interrupt (``Command(resume=...)``)
        skips ``before_agent``: in the process that was interrupted its run goes on;
        anywhere else (the interrupted turn was closed when the session was opened) a
        new turn starts that continues from the history."""
        thread_id = _thread_id()
        key = self.target.id if isinstance(self.target, inboxlog.Session) else thread_id
        if isinstance(self.target, InboxlogSaver) and thread_id is not None:
            adopted = self._adopt(self.target, thread_id)
            if adopted is not None:
                return adopted
        with self._lock:
            run = self._runs.get(key or "")
        if run is None:
            self._start(thread_id, [])
            with self._lock:
                run = self._runs[key or ""]
        return run

    def _guard(self, run: _Run, fn: Callable[..., _T], *args: Any) -> _T:
        """Runs a hook's work; an exception ends the turn (unless the step boundary
        already ended it) and the run, and propagates."""
        try:
            return fn(*args)
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            self._abort(run, error)
            raise

    def _finish(self, run: _Run, messages: Sequence[AnyMessage]) -> None:
        try:
            run.finish(messages)
        finally:
            self._forget(run)

    def _abort(self, run: _Run, error: BaseException, tool: ToolCallRequest | None = None) -> None:
        """Ends the turn for ``error``; raised by ``tool``, it is first the call's result."""
        try:
            if tool is not None:
                run.tool_failed(tool, error)
            run.turn.end(error)
        finally:
            self._forget(run)

    async def _abort_async(
        self, run: _Run, error: BaseException, tool: ToolCallRequest | None = None
    ) -> None:
        """:meth:`_abort` from a coroutine (for ``GeneratorExit``, which closes it, in
        this thread: a closed coroutine must not wait)."""
        if isinstance(error, GeneratorExit):
            self._abort(run, error, tool)
        else:
            await call(self._abort, run, error, tool)

    def _forget(self, run: _Run) -> None:
        with self._lock:
            if self._runs.get(run.log.id) is run:
                del self._runs[run.log.id]
        if isinstance(self.target, InboxlogSaver):
            with self.target._lock:
                self.target._parks.pop(run.log.id, None)
        if run.owned and not run.log.closed:
            run.log.close()


class _Run:
    """One run: its turn on the log (:class:`~inboxlog.integrations._driver.Turn`) and
    which messages of the agent's state the log holds."""

    def __init__(
        self,
        log: inboxlog.Session,
        owned: bool,
        plugins: Sequence[Any],
        keep_inbox_on_cancel: bool,
    ) -> None:
        self.log = log
        self.owned = owned
        self.turn = Turn(log, plugins, keep_inbox_on_cancel=keep_inbox_on_cancel)
        self.logged: set[str] = set()
        self.state: list[AnyMessage] = []  # the state's messages at the last step
        self.earlier: dict[str, dict[str, Any]] = {}  # the log's tool results at the start
        self.dispatched: set[str] = set()  # the calls whose tool/call this run wrote
        self.parked: set[str] = set()  # the calls a resumed run was parked on
        self.asked: set[str] = set()  # the calls the log decided an approval of
        self.model: Any = None  # the chat model of the last model call

    def open(self, messages: Sequence[AnyMessage]) -> None:
        """Opens the turn; the run's new input (the state's messages the log does not
        hold) joins ``next-turn``."""
        events = self.log.events()
        self.earlier = answers(events)
        self.asked = set(approvals.decided_calls(events))
        self.logged = {m.id for m in conversation(events) if m.id is not None}
        new = [inbox_message(m) for m in messages if m.id is None or m.id not in self.logged]
        self.turn.start(new)
        self.logged.update(m["id"] for m in new)

    def step(self, messages: Sequence[AnyMessage]) -> dict[str, Any] | None:
        """The step boundary, blocking: :meth:`before_step`, the driver's step, then
        :meth:`update`."""
        self.before_step(messages)
        return self.update(self.turn.step())

    def before_step(self, messages: Sequence[AnyMessage]) -> None:
        """Records what the agent added since the last step (tool results)."""
        self.record(messages)
        self.state = list(messages)

    def update(self, entered: list[Message]) -> dict[str, Any] | None:
        """The state update that gives the model the step's input (at the first step, the
        whole conversation rebuilt from the log)."""
        if self.turn.steps == 1:
            history = conversation(self.log.events())
            self.logged.update(m.id for m in history if m.id is not None)
            if history == self.state:
                return None  # the state holds the log's conversation already
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *history]}
        added = [m for m in map(langchain_message, entered) if m is not None]
        self.logged.update(m.id for m in added if m.id is not None)
        return {"messages": added} if added else None

    def after_model(self, messages: Sequence[AnyMessage]) -> dict[str, Any] | None:
        """Records the model's message; when it called no tool, the model stopped: one
        more model call when steering waits, else the turn is over."""
        self.record(messages)
        # The model's response (a human-in-the-loop decision may follow it with results).
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last is not None and last.tool_calls:
            return None  # the tools run; the step goes on to the next model call
        outcome: StepOutcome = "max-tokens" if _is_length_stop(last) else "completed"
        if self.turn.model_stopped(outcome):
            return {"jump_to": "model"}  # steering arrived: one more model call
        return None

    def finish(self, messages: Sequence[AnyMessage]) -> None:
        """Ends a turn the agent left open (it ended after a tool, without asking the
        model again)."""
        if self.turn.current:
            self.record(messages)
            self.turn.finish()

    # -- the conversation (SPEC §15.5) -------------------------------------------------

    def record(self, messages: Sequence[AnyMessage]) -> None:
        """Appends the state's messages the log does not hold yet, in order: a model's
        response as ``assistant/message``, a tool's result as ``tool/result``, any other
        as a ``langchain/messages`` event."""
        others: list[AnyMessage] = []
        for message in messages:
            if message.id is not None and message.id in self.logged:
                continue
            if isinstance(message, (AIMessage, ToolMessage)):
                self._others(others)
                if isinstance(message, AIMessage):
                    self.said(message)
                else:
                    self.answered(message)
            else:
                others.append(message)
        self._others(others)

    def _others(self, messages: list[AnyMessage]) -> None:
        if messages:
            self.log.append(MESSAGES, {"messages": [message_to_dict(m) for m in messages]})
            self.logged.update(m.id for m in messages if m.id is not None)
            messages.clear()

    def said(self, message: AIMessage) -> None:
        """Appends a model's response as one ``assistant/message``, the message itself in
        ``source.replayState``."""
        if message.id is None:
            message.id = str(uuid.uuid4())
        provider, model = _source(message, self.model)
        calls = [
            {
                "type": "tool-call",
                "id": c["id"],
                "name": c["name"],
                "arguments": _arguments(message, c),
            }
            for c in message.tool_calls
            if c.get("id")
        ]
        self.turn.said(
            message.id,
            [*_blocks(message.content), *calls],
            provider=provider,
            model=model,
            usage=_usage(message),
            replay_state=message_to_dict(message),
        )
        self.logged.add(message.id)

    def answered(self, message: ToolMessage) -> None:
        """Appends a tool's result as ``tool/result`` (``isError`` for an error status),
        the message itself under the key ``langchain``."""
        if message.id is None:
            message.id = str(uuid.uuid4())
        self.turn.answered(
            message.tool_call_id,
            _blocks(message.content),
            is_error=message.status == "error",
            langchain=message_to_dict(message),
        )
        self.logged.add(message.id)

    def before_tool(self, request: ToolCallRequest, resuming: bool) -> ToolMessage | None:
        """Appends ``tool/call`` before the tool runs. A call the log answered before this
        run made a model call (LangGraph resuming, from its checkpoint, the tools a crash
        cut off) is not run again: its answer, repair's included, is the result. Unless
        the graph resumes the tool from an ``interrupt()``: a person asked for that."""
        call = request.tool_call
        id = call.get("id")
        if not id:
            return None
        if self.turn.steps == 0 and id in self.earlier and (not resuming or id in self.asked):
            return tool_message(self.earlier[id])  # (an approval's resume runs it once)
        if id in self.parked:  # its tool/call came before its approval was asked
            self.parked.discard(id)
            return None
        if id in self.turn.not_allowed:  # answered by the log: the tool does not run
            return None
        self.turn.calling(id, call["name"], _arguments(_caller(request, id), call))
        self.dispatched.add(id)
        return None

    def after_tool(
        self, request: ToolCallRequest, result: ToolMessage | Command[Any]
    ) -> ToolMessage | Command[Any]:
        """Appends the tool's ``tool/result``; a ``Command``'s messages are recorded when
        they reach the state."""
        if isinstance(result, ToolMessage) and request.tool_call.get("id"):
            if result.id is None:
                result = result.model_copy(update={"id": str(uuid.uuid4())})
            self.answered(result)
        return result

    def tool_failed(self, request: ToolCallRequest, error: BaseException) -> None:
        """Appends the result of a dispatched call whose tool raised ``error`` (best
        effort: the turn's end follows, and a log that refused it refuses that too)."""
        id = request.tool_call.get("id")
        if id not in self.dispatched:
            return
        said = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        content = [text(said)]
        with contextlib.suppress(inboxlog.InboxlogError):
            self.turn.answered(id, content, is_error=True)


def conversation(events: Iterable[Mapping[str, Any]]) -> list[BaseMessage]:
    """The LangChain messages a log holds, in order: each ``user/message`` (an inbox
    message, see :func:`langchain_message`), ``assistant/message``, ``tool/result`` and
    ``langchain/messages`` message. A message whose id came before replaces it in place,
    as LangGraph's ``add_messages`` does, so input entered twice (after a crash) appears
    once; so does a later result of a call answered before (a tool resumed after
    repair answered its call)."""
    out: list[BaseMessage] = []
    at: dict[str, int] = {}  # by message id
    answer_at: dict[str, int] = {}  # by the id of the call a tool message answers

    def add(message: BaseMessage | None) -> None:
        if message is None:
            return
        where = at.get(message.id) if message.id is not None else None
        if where is None and isinstance(message, ToolMessage):
            where = answer_at.get(message.tool_call_id)
        if where is None:
            where = len(out)
            out.append(message)
        else:
            out[where] = message
        if message.id is not None:
            at[message.id] = where
        if isinstance(message, ToolMessage):
            answer_at[message.tool_call_id] = where
        elif isinstance(message, AIMessage):
            for call in message.tool_calls:  # a call id used again is a new call
                answer_at.pop(call.get("id") or "", None)

    for event in events:
        kind, data = event["type"], event["data"]
        if kind == "user/message":
            add(langchain_message(data))
        elif kind == "assistant/message":
            add(ai_message(data))
        elif kind == "tool/result":
            add(tool_message(data))
        elif kind == MESSAGES:
            for message in messages_from_dict(data["messages"]):
                add(message)
    return _in_call_order(out)


def _in_call_order(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with each run of tool results in the order of the calls that asked
    for them: tools run in parallel reach the log as they finish, LangGraph's state holds
    their results in the order of the calls."""
    order: dict[str, int] = {}  # the position of each call of the last model response
    start = 0
    for end, message in enumerate([*messages, None]):
        if isinstance(message, ToolMessage):
            continue
        results = cast("list[ToolMessage]", messages[start:end])  # a copy
        results.sort(key=lambda m: order.get(m.tool_call_id, len(order)))
        messages[start:end] = results
        start = end + 1
        calls = message.tool_calls if isinstance(message, AIMessage) else []
        order = {call.get("id") or "": n for n, call in enumerate(calls)}
    return messages


def ai_message(data: Mapping[str, Any]) -> AIMessage:
    """The ``AIMessage`` an ``assistant/message`` holds: its ``source.replayState`` when
    this middleware wrote it, else (another writer's) one built from its blocks."""
    message = data["message"]
    replay = message.get("source", {}).get("replayState")
    with contextlib.suppress(ValueError, KeyError, TypeError):
        (restored,) = messages_from_dict([replay])
        if isinstance(restored, AIMessage):
            return restored.model_copy(update={"id": message["id"]})
    blocks = [b for b in message.get("content", []) if isinstance(b, dict)]
    calls = [
        {"name": b["name"], "args": _parsed(b.get("arguments")), "id": b["id"]}
        for b in blocks
        if b.get("type") == "tool-call"
    ]
    content = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    return AIMessage(content=content, tool_calls=calls, id=message["id"])


def tool_message(data: Mapping[str, Any]) -> ToolMessage:
    """The ``ToolMessage`` a ``tool/result`` holds: its ``langchain`` key (the message as
    LangGraph's state holds it) when this middleware wrote it, else one built from its
    ``tool-result`` block (an error status for ``isError``): so a call that repair
    answered after a crash reaches the model answered."""
    message = data["message"]
    if isinstance(data.get("langchain"), dict):
        (restored,) = messages_from_dict([data["langchain"]])
        return restored  # type: ignore[return-value]
    [block] = [
        b for b in message["content"] if isinstance(b, dict) and b.get("type") == "tool-result"
    ]
    return ToolMessage(
        content=result_text(dict(data)),
        tool_call_id=block["toolCallId"],
        id=message["id"],
        status="error" if block.get("isError") else "success",
    )


def inbox_message(message: BaseMessage) -> Message:
    """The inbox message a LangChain input message travels as: ``{"id", "role": "user",
    "content"}`` for a human message (``"system"`` for a system one), else ``{"id",
    "langchain": message_to_dict(m)}``. The id is the message's (a new one when it has
    none)."""
    id = message.id or input_id()
    if isinstance(message, HumanMessage) and message.type == "human":
        return {"id": id, "role": "user", "content": message.content}
    if isinstance(message, SystemMessage) and message.type == "system":
        return {"id": id, "role": "system", "content": message.content}
    data = message_to_dict(message.model_copy(update={"id": id}))
    return {"id": id, "langchain": data}


def langchain_message(message: Mapping[str, Any]) -> BaseMessage | None:
    """The LangChain message an inbox message stands for, with the inbox id as its id:
    ``{"langchain": ...}`` verbatim; ``{"role"?, "content"}`` a human message (a system
    message for role ``"system"``, an AI one for ``"assistant"``); ``None`` for one
    without content (e.g. the marker a run without input enters with)."""
    id = message["id"]
    if "langchain" in message:
        (restored,) = messages_from_dict([message["langchain"]])
        return restored.model_copy(update={"id": id})
    content = message.get("content")
    if content is None:
        return None
    role = message.get("role", "user")
    if role == "system":
        return SystemMessage(content=content, id=id)
    if role == "assistant":
        return AIMessage(content=content, id=id)
    return HumanMessage(content=content, id=id)


def _is_length_stop(message: Any) -> bool:
    """Whether the model reported that it stopped at its output token limit."""
    if not isinstance(message, AIMessage):
        return False
    metadata = message.response_metadata or {}
    reason = metadata.get("finish_reason") or metadata.get("stop_reason")
    return reason in ("length", "max_tokens", "MAX_TOKENS")


def _blocks(content: str | list[Any]) -> list[dict[str, Any]]:
    """A LangChain message's content as SPEC §15.1's blocks: text, reasoning (LangChain's
    ``reasoning`` and Anthropic's ``thinking``), any other typed block as it is; tool
    calls travel as the message's ``tool_calls``."""
    out: list[dict[str, Any]] = []
    for part in [content] if isinstance(content, str) else content:
        if isinstance(part, str):
            out.append(text(part))
        elif not isinstance(part, dict) or not isinstance(part.get("type"), str):
            continue  # not a block; the replay state keeps it
        elif part["type"] == "text":
            out.append(text(str(part.get("text", ""))))
        elif part["type"] in ("reasoning", "thinking"):
            said = part.get("reasoning", part.get("thinking", part.get("text", "")))
            out.append({"type": "reasoning", "text": str(said)})
        elif part["type"] not in ("tool_call", "tool_use", "function_call"):
            out.append(part)
    return [b for b in out if b.get("type") != "text" or b["text"]]


def _arguments(message: AIMessage | None, call: Mapping[str, Any]) -> str:
    """A tool call's arguments as the model's raw JSON text: the provider's own when the
    message kept it (OpenAI's ``additional_kwargs``), else the parsed arguments as JSON."""
    for raw in (message.additional_kwargs.get("tool_calls") or []) if message else []:
        function = raw.get("function") if isinstance(raw, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if raw.get("id") == call.get("id") and isinstance(arguments, str):
            return arguments
    return json.dumps(call.get("args", {}), ensure_ascii=False)


def _parsed(arguments: Any) -> dict[str, Any]:
    """A tool-call block's raw arguments as LangChain's ``args`` (``{}`` when not an
    object)."""
    try:
        args = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError:
        return {}
    return args if isinstance(args, dict) else {}


def _caller(request: ToolCallRequest, id: str) -> AIMessage | None:
    """The model's message that made call ``id``, from the tool's view of the state."""
    state = request.state
    messages = state.get("messages", []) if isinstance(state, dict) else []
    for message in reversed(messages):
        if isinstance(message, AIMessage) and any(c.get("id") == id for c in message.tool_calls):
            return message
    return None


def _source(message: AIMessage, chat_model: Any) -> tuple[str, str]:
    """Who answered: the provider and model the message names, else the chat model's."""
    metadata = message.response_metadata or {}
    provider = metadata.get("model_provider") or getattr(chat_model, "_llm_type", None)
    model = metadata.get("model_name") or metadata.get("model")
    for name in ("model_name", "model"):
        model = model or getattr(chat_model, name, None)
    return (
        provider if isinstance(provider, str) else "",
        model if isinstance(model, str) else "",
    )


def _usage(message: AIMessage) -> dict[str, int] | None:
    """LangChain's ``usage_metadata`` in the reference's keys."""
    usage = message.usage_metadata
    if usage is None:
        return None
    out = {"inputTokens": usage["input_tokens"], "outputTokens": usage["output_tokens"]}
    read = (usage.get("input_token_details") or {}).get("cache_read")
    written = (usage.get("input_token_details") or {}).get("cache_creation")
    reasoning = (usage.get("output_token_details") or {}).get("reasoning")
    for key, count in (
        ("cacheReadTokens", read),
        ("cacheWriteTokens", written),
        ("reasoningTokens", reasoning),
    ):
        if count is not None:
            out[key] = count
    return out


def _resuming() -> bool:
    """Whether the running task was resumed from an ``interrupt()``
    (``Command(resume=...)``)."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return False
    scratchpad = configurable.get("__pregel_scratchpad")
    if scratchpad is None:
        return False
    return bool(scratchpad.resume) or scratchpad.get_null_resume(False) is not None


def _thread_id() -> str | None:
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return None
    thread_id = configurable.get("thread_id")
    return None if thread_id is None else str(thread_id)
