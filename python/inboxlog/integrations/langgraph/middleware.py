"""``InboxlogMiddleware``: a ``create_agent`` run as one inboxlog turn (see the package doc)."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    message_to_dict,
    messages_from_dict,
)
from langgraph.config import get_config
from langgraph.errors import GraphBubbleUp
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

import inboxlog
from inboxlog.integrations._common import call, open_or_create
from inboxlog.integrations._driver import Turn, input_id
from inboxlog.integrations.langgraph.saver import InboxlogSaver
from inboxlog.types import Message, StepOutcome

MESSAGES = "langchain/messages"
"""The event type of the messages the agent added (model output, tool results):
``{"messages": [...]}``, each in LangChain's ``message_to_dict`` form."""

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
        try:
            return handler(request)
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            self._abort(run, error)
            raise

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        """Runs the tool; an exception that escapes it ends the turn as in
        :meth:`wrap_model_call`."""
        run = self._run()
        try:
            return handler(request)
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            self._abort(run, error)
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
            await call(self._abort, run, error)
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
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            await call(self._abort, run, error)
            raise

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        """:meth:`wrap_tool_call`; a cancelled run ends ``aborted``."""
        run = await call(self._run)
        try:
            return await handler(request)
        except GraphBubbleUp:
            raise  # an interrupt or a jump: the run goes on when the graph resumes
        except BaseException as error:
            await call(self._abort, run, error)
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

    def _abort(self, run: _Run, error: BaseException) -> None:
        try:
            run.turn.end(error)
        finally:
            self._forget(run)

    def _forget(self, run: _Run) -> None:
        with self._lock:
            if self._runs.get(run.log.id) is run:
                del self._runs[run.log.id]
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

    def open(self, messages: Sequence[AnyMessage]) -> None:
        """Opens the turn; the run's new input (the state's messages the log does not
        hold) joins ``next-turn``."""
        history = conversation(self.log.events())
        self.logged = {m.id for m in history if m.id is not None}
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
        last = messages[-1] if messages else None
        if isinstance(last, AIMessage) and last.tool_calls:
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

    def record(self, messages: Sequence[AnyMessage]) -> None:
        """Appends the state's messages the log does not hold yet as one event."""
        new = [m for m in messages if m.id is None or m.id not in self.logged]
        if not new:
            return
        self.log.append(MESSAGES, {"messages": [message_to_dict(m) for m in new]})
        self.logged.update(m.id for m in new if m.id is not None)


def conversation(events: Iterable[Mapping[str, Any]]) -> list[BaseMessage]:
    """The LangChain messages a log holds, in order: each ``user/message`` (an inbox
    message, see :func:`langchain_message`) and each ``langchain/messages`` message. A
    message whose id came before replaces it in place, as LangGraph's ``add_messages``
    does, so input entered twice (after a crash) appears once."""
    out: list[BaseMessage] = []
    at: dict[str, int] = {}

    def add(message: BaseMessage | None) -> None:
        if message is None:
            return
        if message.id is not None and message.id in at:
            out[at[message.id]] = message
            return
        if message.id is not None:
            at[message.id] = len(out)
        out.append(message)

    for event in events:
        if event["type"] == "user/message":
            add(langchain_message(event["data"]))
        elif event["type"] == MESSAGES:
            for message in messages_from_dict(event["data"]["messages"]):
                add(message)
    return out


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


def _thread_id() -> str | None:
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        return None
    thread_id = configurable.get("thread_id")
    return None if thread_id is None else str(thread_id)
