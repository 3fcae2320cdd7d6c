"""The OpenAI Agents SDK on an inboxlog session: its memory, its turns, its steering.

    pip install "./python[openai-agents]"

    import inboxlog
    from inboxlog.integrations.openai_agents import InboxlogSession, run

    with InboxlogSession(inboxlog.Store("sessions"), "chat-1") as session:
        result = await run(agent, "What's the weather in Paris?", session=session)

:class:`InboxlogSession` is the SDK's session protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``) over one inboxlog session, in any store. The history is
the session's conversation (SPEC §15), stored once: a run's input as the ``user/message``
events its steps entered, each model response as an ``assistant/message`` whose
``source.replayState`` keeps the SDK's own items, each function tool's output as a
``tool/result`` (see :func:`run`). Items the SDK saves that no conversation event holds
(``add_items`` outside a run, a hosted tool's output) are one ``openai-agents/items``
event ``{"items": [...]}`` per call (durable when the call returns in the store's
``sync`` mode, or after ``flush()``). The log stays append-only: ``pop_item`` appends
``openai-agents/pop {"seq", "index"}`` naming the item it removed, ``clear_session``
appends ``openai-agents/clear {}``, and ``get_items`` returns the fold of those events
(:func:`fold_items`), which also reads the logs of the previous release (every item in
``openai-agents/items``). Nothing is ever rewritten, so ``inboxlog inspect`` shows the
whole history, popped and cleared items included.

:func:`run` wraps ``Runner.run`` so that a run is one inboxlog turn:

- ``turn/start`` when it starts; then its input joins the inbox's ``next-turn`` behind
  whatever was pending there (posts included; so a crash before the model sees it loses
  nothing), and the turn's first step claims the whole of ``next-turn``: input that was
  waiting for this run first, then the run's own, in its first model call.
- One step per model call, taken through the step-boundary protocol from the SDK's
  per-call hook (``RunConfig.call_model_input_filter``): ``propose_step`` claims the
  inbox's input (the run's own input at the first step, everything in ``next-step``
  at each step), the pre-step ``plugins`` decide (:func:`inboxlog.pre_step_async`), and
  ``decide`` records the step and its ``user/message`` events. The messages that
  entered reach the model in that same call and are kept in the SDK history. Input
  appended to ``next-step`` while a run is in progress (by another task, or by
  ``store.post`` from another process) therefore reaches the model at its next model
  call; input for ``next-turn`` waits for the next run.
- ``turn/end``: ``completed`` when the run returns, ``max-tokens`` when the SDK reports a
  length stop (it raises ``ModelBehaviorError`` for a Responses ``incomplete`` response
  with reason ``max_output_tokens``, and for a chat completion cut at ``finish_reason
  "length"`` before any output; a chat completion truncated after some output is not
  reported by the SDK at all), ``blocked`` when a plugin rejects a step
  (:class:`StepRejectedError` is raised), ``error`` on any other exception (re-raised)
  and ``aborted`` when the run's task is cancelled (or interrupted: ``KeyboardInterrupt``,
  ``GeneratorExit``). A process killed mid-run leaves the turn open; the next open of
  the session closes it ``interrupted``, and ``run(agent, session=session)`` with no
  input continues from the stored history.

The turn runs on the turn driver every integration shares
(``inboxlog/integrations/_driver.py``), whose one ending policy this is. The SDK has no
hook after its last model call, so when steering waits then (posted from anywhere
during that call included), :func:`run` starts another ``Runner.run`` on the same
history, in the same turn; after a length stop too (the turn stays ``max-tokens``).

The conversation is written as it happens (SPEC §15.5), through run hooks chained
before the caller's own ``hooks``: a model response when the model returns, a function
tool's ``tool/call`` before the tool runs (durable in ``sync`` mode), its ``tool/result``
after. A process killed inside a tool leaves the call answered on the next open
(``TOOL_OUTCOME_UNKNOWN``, SPEC §15.4); the next run's history holds that answer as the
SDK's ``function_call_output``, so the model decides and the tool never runs again by
itself. A run that raises answers the calls it leaves without a result the same way.

Tool approvals (SPEC §17.4): when a function tool with ``needs_approval=True`` stops the
SDK's run (``result.interruptions``), :func:`run` writes each call's ``tool/call``, asks
its approval (``approval-<turn>-<step>-<call id>``), parks the turn with the SDK's
``RunState`` as its own JSON (``to_json``) and returns the result; the turn stays open.
Once the approvals are decided from anywhere (``store.decide``, ``inboxlog approve``, the
console), the next :func:`run` on the session, on any worker, resumes that run
(``RunState.from_json``, then ``approve`` for ``allowed-once``, else ``reject`` with the
text of the ``TOOL_NOT_ALLOWED`` result the log wrote), so the tool runs once and only
when allowed; while any is pending it raises :class:`inboxlog.ApprovalsPendingError` and
writes nothing.

So :func:`inboxlog.fold_consumed_work` answers "did this run do work" for SDK runs as
for any other loop. An inbox message becomes SDK input by :func:`message_items`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Self, cast

try:
    from agents import Agent, ModelBehaviorError, RunConfig, RunHooks, Runner, RunResult, RunState
    from agents.items import ItemHelpers, ModelResponse, ToolApprovalItem, TResponseInputItem
    from agents.memory.session_settings import SessionSettings, resolve_session_limit
    from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData
    from agents.run_context import RunContextWrapper
    from agents.tool import Tool, default_tool_error_function
    from agents.tool_context import ToolContext
except ModuleNotFoundError as error:  # pragma: no cover - exercised in a subprocess
    if error.name != "agents" and not (error.name or "").startswith("agents."):
        raise
    raise ImportError(
        "inboxlog.integrations.openai_agents needs the openai-agents package: "
        'pip install "inboxlog[openai-agents]"'
    ) from error

import inboxlog
from inboxlog.integrations._common import (
    StepRejectedError,
    TurnEndedError,
    call,
    open_or_create,
)
from inboxlog.integrations._driver import Turn, answers, input_id, result_text, text
from inboxlog.types import ApprovalOutcome, Message

ITEMS = "openai-agents/items"
"""The event type of one ``add_items`` call: ``{"items": [...]}``."""
POP = "openai-agents/pop"
"""The event type of one ``pop_item``: ``{"seq": S, "index": I}``, the item it removed."""
CLEAR = "openai-agents/clear"
"""The event type of one ``clear_session``: ``{}``."""
USER, ASSISTANT, RESULT = "user/message", "assistant/message", "tool/result"
"""The conversation's event types (SPEC §15.1) that hold SDK items."""


class InboxlogSession:
    """The SDK's session protocol on an inboxlog session (any store), append-only.

    ``InboxlogSession(store, session_id)`` reads the session without owning it until
    its first write (``add_items``, ``pop_item``, ``clear_session``, :attr:`session`,
    :func:`run`), which opens it as its writer, creating it when it does not exist; it
    closes it on :meth:`close` (or at the end of a ``with`` block). Until then
    ``get_items(limit)`` reads only the log's last events of this module's types
    (``store.tail``), so a worker that picks a conversation up pays for the items it
    asks for, not for the whole history, and takes no lock another worker holds.
    ``InboxlogSession(session)`` adopts a session already open and leaves closing it to
    its owner. The protocol's calls run the log's blocking work in a worker thread, never
    on the event loop (the constructor only checks the id).
    """

    session_id: str
    """The inboxlog session id."""
    session_settings: SessionSettings | None
    """The SDK's settings for this session (``limit``: how many items ``get_items``
    returns when called without one)."""

    def __init__(
        self,
        target: inboxlog.Store | inboxlog.Session,
        session_id: str | None = None,
        *,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self._store: inboxlog.Store | None = None
        self._log: inboxlog.Session | None = None
        if isinstance(target, inboxlog.Session):
            if session_id is not None and session_id != target.id:
                raise ValueError(
                    f'InboxlogSession: session_id "{session_id}" differs from the given '
                    f'session\'s id "{target.id}"'
                )
            self._log, self._owned = target, False
            self.session_id = target.id
        elif isinstance(target, inboxlog.Store):
            if session_id is None:
                raise TypeError("InboxlogSession(store, session_id): session_id is missing")
            # The id checked now, as an open would; nothing read, nothing owned.
            with contextlib.suppress(inboxlog.NotFoundError):
                target.tail(session_id, 0)
            self._store, self._owned = target, True
            self.session_id = session_id
        else:
            raise TypeError(
                "InboxlogSession: expected an inboxlog.Store or inboxlog.Session, "
                f"got {type(target).__name__}"
            )
        self.session_settings = SessionSettings() if session_settings is None else session_settings
        self._fold = _ItemFold()
        self._folded = 0  # events before this seq are in self._fold
        # Items a run's conversation events hold that the SDK has yet to save: its
        # add_items skips them rather than store them twice.
        self._held: list[TResponseInputItem] = []
        self._lock = threading.Lock()
        self._opening = threading.Lock()

    @property
    def session(self) -> inboxlog.Session:
        """The inboxlog session: its inbox (``session.inbox.append("next-step", m)``
        steers a run in progress), protocol and events. Opens it as its writer (creating
        it when missing) if this object did not yet."""
        return self._writer()

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The history, oldest first: the latest ``limit`` items (default: the session
        settings' ``limit``; ``None`` or a negative limit: all of them, ``0``: none)."""
        n = resolve_session_limit(limit, self.session_settings)
        items = await asyncio.to_thread(self._items, n)
        if n is None or n < 0:
            return items
        return items[max(len(items) - n, 0) :] if n > 0 else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Appends ``items`` as one ``openai-agents/items`` event: all of them or none.
        Those a run's conversation events already hold (:func:`run` writes the model's
        responses and the tools' results as they happen) are not written again."""
        if items:
            await call(self._add, list(items))

    async def pop_item(self) -> TResponseInputItem | None:
        """Removes and returns the latest item (``None`` when there is none) by appending
        an ``openai-agents/pop`` event naming it."""
        return await call(self._pop)

    async def clear_session(self) -> None:
        """Empties the history by appending an ``openai-agents/clear`` event. The items
        stay in the log, for an operator; ``store.delete(id)`` forgets them for good."""
        await call(self._append, CLEAR, {})

    def close(self) -> None:
        """Closes the inboxlog session if this object opened it."""
        if self._owned and self._log is not None:
            self._log.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _writer(self) -> inboxlog.Session:
        """The session, opened as its writer on the first call that needs it."""
        with self._opening:
            if self._log is None:
                assert self._store is not None
                self._log = open_or_create(self._store, self.session_id)
            return self._log

    def _append(self, type: str, data: Any) -> None:
        with self._lock:
            self._writer().append(type, data)

    def _add(self, items: list[TResponseInputItem]) -> None:
        with self._lock:
            fresh = [item for item in items if not self._release(item)]
            if fresh:
                self._writer().append(ITEMS, {"items": fresh})

    def _hold(self, items: Iterable[TResponseInputItem]) -> None:
        """Notes items a conversation event now holds, for the SDK's save to skip."""
        with self._lock:
            self._held.extend(items)

    def _release(self, item: TResponseInputItem) -> bool:
        """Whether ``item`` is one the conversation holds (then no longer awaited)."""
        for index, held in enumerate(self._held):
            if _same_item(held, item):
                del self._held[index]
                return True
        return False

    def _let_go(self) -> None:
        """Forgets the held items at the end of a run."""
        with self._lock:
            self._held.clear()

    def _items(self, n: int | None) -> list[TResponseInputItem]:
        with self._lock:
            if self._log is None and self._store is not None:
                return _stored_items(self._store, self.session_id, n)
            self._catch_up()
            return self._fold.items()

    def _pop(self) -> TResponseInputItem | None:
        with self._lock:
            log = self._writer()
            self._catch_up()
            last = self._fold.last()
            if last is None:
                return None
            seq, index, item, _ = last
            log.append(POP, {"seq": seq, "index": index})
            return item

    def _catch_up(self) -> None:
        """Folds the events appended since the last read (this object is the log's only
        writer, so the fold only ever grows at the end)."""
        for event in self._writer().events(self._folded):
            self._fold.apply(event)
            self._folded = event["seq"] + 1


_KINDS = (ITEMS, POP, CLEAR, USER, ASSISTANT, RESULT)
"""The event types the history is folded from."""


def event_items(event: Mapping[str, Any]) -> list[TResponseInputItem]:
    """The SDK items one event of the history holds, in order: an ``openai-agents/items``
    event's items; a ``user/message``'s (:func:`message_items`, none for a message they
    cannot be made of); an ``assistant/message``'s, kept in its ``source.replayState``
    (``{"items": [...]}``); a ``tool/result``'s ``function_call_output``, its ``item``
    when the event keeps one, else made of its call id and text (a result repair wrote
    after a crash, SPEC §15.4). Other events hold none."""
    kind, data = event["type"], event["data"]
    if kind == ITEMS:
        return list(data["items"])
    if not isinstance(data, dict):
        return []
    if kind == USER:
        with contextlib.suppress(ValueError):
            return message_items(data)
        return []
    if kind == ASSISTANT:
        state = data.get("message", {}).get("source", {}).get("replayState")
        items = state.get("items") if isinstance(state, dict) else None
        return list(items) if isinstance(items, list) else []
    if kind == RESULT:
        if isinstance(data.get("item"), dict):
            return [data["item"]]
        call_id = data.get("message", {}).get("source", {}).get("callId")
        return [] if not isinstance(call_id, str) else [_output_item(call_id, result_text(data))]
    return []


def _output_item(call_id: str, output: str) -> TResponseInputItem:
    """The SDK's ``function_call_output`` item for a call answered with ``output``."""
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def _replaced(event: Mapping[str, Any]) -> list[str]:
    """The ids of the ``user/message`` events whose items an ``openai-agents/items`` event
    of the previous release holds again (its ``messages``): those events count once."""
    if event["type"] != ITEMS:
        return []
    return [str(id) for id in event["data"].get("messages", [])]


def _stored_items(store: inboxlog.Store, id: str, n: int | None) -> list[TResponseInputItem]:
    """The history of session ``id`` read without owning it (none when it does not
    exist): its last ``n`` items from the log's last events of :data:`_KINDS`, all of it
    when ``n`` is ``None`` or negative.

    Reads the last event first (an ``add_items`` of a whole imported history holds all
    the items asked for in one event), then as many more as the items per event read so
    far say are needed, with a margin, at least four times as many each time: a resume
    costs the events that hold the items it returns, not the history."""
    try:
        if n is None or n < 0:
            return fold_items(store.read(id))
        if n == 0:
            return []
        k = 1
        while True:
            events = store.tail(id, k, _KINDS)
            items = _latest_items(events, n, whole=len(events) < k)
            if items is not None:
                return items
            held = sum(_count(event) for event in events)
            k = max(4 * k, -(-5 * n * len(events) // (4 * max(held, 1))) + 4)
    except inboxlog.NotFoundError:
        return []


def _count(event: Mapping[str, Any]) -> int:
    """About how many items ``event`` holds (a pop: minus one), without building them."""
    kind, data = event["type"], event["data"]
    if kind == ITEMS:
        return len(data["items"])
    if kind == ASSISTANT and isinstance(data, dict):
        state = data.get("message", {}).get("source", {}).get("replayState")
        items = state.get("items") if isinstance(state, dict) else None
        return len(items) if isinstance(items, list) else 0
    if kind == POP:
        return -1
    return 1 if kind in (USER, RESULT) else 0


def _latest_items(
    events: Sequence[Mapping[str, Any]], n: int, *, whole: bool
) -> list[TResponseInputItem] | None:
    """The last ``n`` items of the history whose last events of :data:`_KINDS` are
    ``events`` (every one of them when ``whole``), oldest first, or ``None`` when more
    events are needed. Walks back from the end: a pop cancels the latest item before it,
    which it must name (:func:`fold_items`'s rule), and a clear ends the history."""
    found: list[TResponseInputItem] = []
    pops: list[tuple[int, int, int]] = []  # (pop's seq, seq, index) it names; last: earliest
    replaced: set[str] = set()
    for event in reversed(events):
        kind, seq, data = event["type"], event["seq"], event["data"]
        if kind == CLEAR:
            whole = True
            break
        if kind == POP:
            pops.append((seq, data["seq"], data["index"]))
            continue
        if kind == USER and isinstance(data, dict) and data.get("id") in replaced:
            replaced.discard(data["id"])
            continue
        replaced.update(_replaced(event))
        items = event_items(event)
        for index in reversed(range(len(items))):
            if pops:
                at, named_seq, named_index = pops.pop()
                if (named_seq, named_index) != (seq, index):
                    raise ValueError(
                        f"{POP} at seq {at} removes item {named_index} of seq {named_seq}, "
                        f"but the latest is item {index} of seq {seq}"
                    )
                continue
            found.append(items[index])
            if len(found) == n:
                return found[::-1]
    if not whole:
        return None
    if pops:
        at, named_seq, named_index = pops[-1]
        raise ValueError(
            f"{POP} at seq {at} removes item {named_index} of seq {named_seq}, "
            "but the latest is no item"
        )
    return found[::-1]


def fold_items(events: Iterable[Mapping[str, Any]]) -> list[TResponseInputItem]:
    """The SDK history a log's events hold: the items of every event of the history in
    order (:func:`event_items`), less those an ``openai-agents/pop`` removed and all
    before an ``openai-agents/clear``.

    Reads any log, e.g. ``store.inspect(id)[1]``, this release's and the previous one's
    (whose ``openai-agents/items`` held the input a ``user/message`` holds: counted once).
    Raises ``ValueError`` when a pop names an item that is not the latest one (the log
    was not written by this module).
    """
    fold = _ItemFold()
    for event in events:
        fold.apply(event)
    return fold.items()


class _ItemFold:
    """The history as ``(seq, index, item, message id)``: the event holding each item,
    its place there, and the ``user/message`` id it came from (``None`` otherwise)."""

    def __init__(self) -> None:
        self._entries: list[tuple[int, int, TResponseInputItem, str | None]] = []

    def apply(self, event: Mapping[str, Any]) -> None:
        kind, seq, data = event["type"], event["seq"], event["data"]
        if kind == POP:
            last = self.last()
            named = (data["seq"], data["index"])
            if last is None or last[:2] != named:
                latest = "no item" if last is None else f"item {last[1]} of seq {last[0]}"
                raise ValueError(
                    f"{POP} at seq {seq} removes item {named[1]} of seq {named[0]}, "
                    f"but the latest is {latest}"
                )
            self._entries.pop()
        elif kind == CLEAR:
            self._entries.clear()
        else:
            replaced = set(_replaced(event))
            while self._entries and self._entries[-1][3] in replaced:
                self._entries.pop()
            owner = data.get("id") if kind == USER and isinstance(data, dict) else None
            items = event_items(event)
            self._entries.extend((seq, i, item, owner) for i, item in enumerate(items))

    def last(self) -> tuple[int, int, TResponseInputItem, str | None] | None:
        return self._entries[-1] if self._entries else None

    def items(self) -> list[TResponseInputItem]:
        return [entry[2] for entry in self._entries]


def _same_item(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two SDK items are the same one: equal, of one type with one call id (a call
    and its output) or one id (a message, a reasoning item), or equal but for an id the
    SDK dropped when it saved (its reasoning item id policy)."""
    if a == b:
        return True
    key = _identity(a)
    if key is not None and key == _identity(b):
        return True
    return {k: v for k, v in a.items() if k != "id"} == {k: v for k, v in b.items() if k != "id"}


def _identity(item: Mapping[str, Any]) -> tuple[str, str] | None:
    ident = item.get("call_id") or item.get("id")
    return (str(item.get("type", "message")), str(ident)) if ident else None


def message_items(message: Message) -> list[TResponseInputItem]:
    """The SDK input items an inbox message stands for.

    ``{"id", "items": [...]}`` stands for those items, verbatim; ``{"id", "role"?,
    "content"}`` for one message item ``{"role", "content"}`` (role ``"user"`` unless
    given, content a str or a list of content parts); a message with neither (e.g. the
    marker a run without input enters with) for none. Other keys stay in the log only.
    """
    if "items" in message:
        items = message["items"]
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ValueError(f'message "{message.get("id")}": "items" must be a list of objects')
        return list(items)
    if message.get("content") is None:
        return []
    item: Any = {"role": message.get("role", "user"), "content": message["content"]}
    return [item]


async def run(
    agent: Agent[Any],
    input: str | list[TResponseInputItem] | None = None,
    *,
    session: InboxlogSession,
    run_config: RunConfig | None = None,
    plugins: Iterable[inboxlog.AsyncListener] = (),
    keep_inbox_on_cancel: bool = False,
    **runner_kwargs: Any,
) -> RunResult:
    """Runs ``agent`` as one turn of ``session``'s log; returns the SDK's result.

    ``input`` (a str, or a list of SDK input items) enters the turn through the inbox,
    behind the ``next-turn`` input that was pending (which the first step claims with
    it); ``None`` runs on what the inbox holds, or, when it is empty, continues from the
    stored history (e.g. after a crash). ``plugins`` are pre-step listeners
    (ARCHITECTURE.md#pre-step-composer, plain or ``async``) asked at every model call.
    ``run_config`` is the SDK's (its own ``call_model_input_filter`` runs after the
    step's input was added); ``runner_kwargs`` go to ``Runner.run`` (``context``,
    ``max_turns``, …), and ``hooks`` are called after this module's own, which write the
    conversation (SPEC §15.5).

    A run the SDK stops for tool approvals parks its turn and returns the result with its
    ``interruptions``; called on a session whose turn is parked, ``run`` resumes that run
    once every approval is decided (``input`` then reaches its next model call; pass the
    run's ``context`` again), and raises :class:`inboxlog.ApprovalsPendingError`, writing
    nothing, while any is pending.

    Input that reaches ``next-step`` after the last model call is not left behind: the
    turn goes on with another ``Runner.run`` on the same history, and the result of the
    last one is returned. Raises :class:`StepRejectedError` when a plugin rejects a step
    (turn ended ``blocked``), :class:`TurnEndedError` when no input entered the first
    step, and re-raises the SDK's exceptions (turn ended ``error``, or ``max-tokens`` for
    a length stop) and a cancellation (turn ended ``aborted``; the inbox is cleared unless
    ``keep_inbox_on_cancel``), after answering each tool call the run leaves without a
    result (``TOOL_OUTCOME_UNKNOWN`` when its tool started, else ``TOOL_NOT_STARTED``).
    """
    log = session.session
    config = RunConfig() if run_config is None else run_config
    # A parked run is handed on first: while approvals are pending this raises
    # ApprovalsPendingError and nothing is written.
    keep = keep_inbox_on_cancel
    resumed = await call(lambda: Turn.resume(log, list(plugins), keep_inbox_on_cancel=keep))
    if resumed is None:
        turn = Turn(log, list(plugins), keep_inbox_on_cancel=keep_inbox_on_cancel)
    else:
        turn = resumed[0]
    conversation = _Conversation(turn, session, config, runner_kwargs.pop("hooks", None))
    stopped: ModelBehaviorError | None = None
    try:
        first: list[TResponseInputItem] | RunState[Any] = []
        added: list[tuple[int, list[TResponseInputItem]]] = []
        if resumed is None:
            own = [] if input is None else [_input_message(input)]
            await call(turn.start, own)  # refused while another run holds the session
        else:
            if input is not None:  # for the resumed run's next model call, as steering
                await call(log.inbox.append, "next-step", _input_message(input))
            first, added = await _resumed(agent, conversation, resumed[1], resumed[2])
        while True:
            stopped, outcome = None, "completed"
            step_filter = _model_input_filter(turn, config.call_model_input_filter, added)
            step_config = dataclasses.replace(config, call_model_input_filter=step_filter)
            try:
                result = await Runner.run(
                    agent,
                    first,
                    session=session,
                    run_config=step_config,
                    hooks=conversation,
                    **runner_kwargs,
                )
            except ModelBehaviorError as error:
                if not (turn.step_open and _is_length_stop(error)):
                    raise
                stopped, outcome = error, "max-tokens"
            if stopped is None and result.interruptions:
                await call(conversation.park, result, added)
                return result  # the turn parked: a later run resumes it
            if not await call(turn.model_stopped, outcome):
                break
            # Steering arrived during the last model call: the SDK's run is over, so
            # another Runner.run on the same history takes it, in the same turn.
            first, added = [], []
    except BaseException as error:
        if isinstance(error, GeneratorExit):  # being closed: no waiting
            conversation.answer_the_rest(error)
        else:
            await call(conversation.answer_the_rest, error)
        await turn.end_async(error)
        raise
    finally:
        session._let_go()
    if stopped is not None:
        raise stopped
    return result


def _model_input_filter(
    turn: Turn,
    then: CallModelInputFilter | None,
    added: list[tuple[int, list[TResponseInputItem]]],
) -> CallModelInputFilter:
    """The ``call_model_input_filter`` for one ``Runner.run``: enters a step, then gives
    the model the SDK's input with every batch this run entered at its place.

    The SDK rebuilds its input at each call from the history it read at the start (a
    resumed ``RunState``'s own) and the items it generated since, so the batches
    ``added`` earlier in the run (before it parked included) are put back where they
    were (the history read by a later run holds them already).
    """

    async def enter_step(data: CallModelData[Any]) -> ModelInputData:
        given = data.model_data.input
        added.append((len(given), await _enter_step(turn)))
        merged = list(given)
        shift = 0
        for at, items in added:
            place = min(at, len(given)) + shift
            merged[place:place] = items
            shift += len(items)
        result = ModelInputData(input=merged, instructions=data.model_data.instructions)
        if then is None:
            return result
        chained = then(CallModelData(model_data=result, agent=data.agent, context=data.context))
        return await chained if inspect.isawaitable(chained) else chained

    return enter_step


async def _resumed(
    agent: Agent[Any],
    conversation: _Conversation,
    parked: Any,
    decisions: Mapping[str, ApprovalOutcome],
) -> tuple[RunState[Any], list[tuple[int, list[TResponseInputItem]]]]:
    """The SDK's ``RunState`` a parked run stored (``RunState.from_json``) with each
    decision applied: ``allowed-once`` approves the call (the SDK runs it once), any
    other outcome rejects it with the text of the ``TOOL_NOT_ALLOWED`` result the log
    wrote, which the session then does not store a second time. Returns it and the
    input batches the run had entered."""
    turn, session = conversation.turn, conversation.session
    state = await RunState.from_json(agent, parked["runState"])
    said = await call(lambda: answers(turn.log.events(int(parked["since"]))))
    ids = {str(a["callId"]): a for a in parked["approvals"] if a.get("callId") is not None}
    for index, item in enumerate(state.get_interruptions()):
        asked = ids.get(str(item.call_id)) or parked["approvals"][index]
        outcome = decisions.get(asked["id"], "unavailable")
        ours = asked["callId"] if asked.get("ours") else None
        if ours is not None:
            conversation.called.add(ours)
        if outcome == "allowed-once":
            state.approve(item)
            if ours is not None:
                conversation.unanswered[ours] = False
            continue
        why = result_text(said[ours]) if ours in said else None
        state.reject(item, rejection_message=why or f"The call was not allowed ({outcome}).")
        if ours is not None:  # the log answered it: the SDK's own output is that answer
            session._hold([_output_item(ours, why or "")])
    added = [(int(at), list(items)) for at, items in parked.get("added", [])]
    return state, added


def _arguments(item: ToolApprovalItem) -> Any:
    """An approval item's arguments for ``approval/asked``: parsed when they are JSON."""
    raw = item.arguments
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


async def _enter_step(turn: Turn) -> list[TResponseInputItem]:
    """The step boundary at a model call; returns the SDK items of the messages that
    entered (their ``user/message`` events hold them in the history)."""
    messages = await turn.step_async()
    return [item for message in messages for item in message_items(message)]


_TOOL_ERROR = default_tool_error_function(cast("Any", None), Exception())
"""What the SDK gives the model for a tool that raised (its default failure function)."""


class _Conversation(RunHooks[Any]):
    """The SDK's run hooks that write its conversation through the turn as it happens
    (SPEC §15.5), then call the caller's own ``hooks``: each model response as one
    ``assistant/message`` whose ``source.replayState`` keeps the SDK's items, each
    function tool's call as ``tool/call`` (durable before the tool runs) and its output
    as ``tool/result`` (with the SDK's item as ``item`` when its text alone does not
    make it). The session then skips those items when the SDK saves them."""

    def __init__(
        self,
        turn: Turn,
        session: InboxlogSession,
        config: RunConfig,
        then: RunHooks[Any] | None,
    ) -> None:
        self.turn, self.session, self.config, self.then = turn, session, config, then
        self.unanswered: dict[str, bool] = {}
        """The calls of the model's responses without a result: whether each started."""
        self.called: set[str] = set()
        """The calls whose ``tool/call`` is written (before their approval was asked)."""

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        if self.then is not None:
            await self.then.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        await call(self._said, agent, response)
        if self.then is not None:
            await self.then.on_llm_end(context, agent, response)

    async def on_agent_start(self, context: Any, agent: Agent[Any]) -> None:
        if self.then is not None:
            await self.then.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Agent[Any], output: Any) -> None:
        if self.then is not None:
            await self.then.on_agent_end(context, agent, output)

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        if self.then is not None:
            await self.then.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool
    ) -> None:
        if isinstance(context, ToolContext):
            await call(self._calling, context)
        if self.then is not None:
            await self.then.on_tool_start(context, agent, tool)

    async def on_tool_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], tool: Tool, result: object
    ) -> None:
        if isinstance(context, ToolContext):
            await call(self._answered, context, result)
        if self.then is not None:
            await self.then.on_tool_end(context, agent, tool, result)

    def _said(self, agent: Agent[Any], response: ModelResponse) -> None:
        items = response.to_input_items()
        content = [block for output in response.output for block in _blocks(output)]
        self.turn.said(
            response.response_id or f"response-{uuid.uuid4().hex}",
            content,
            provider="openai",
            model=_model_name(agent.model or self.config.model),
            usage=_usage(response),
            replay_state={"items": items},
        )
        self.session._hold(items)
        self.unanswered.update((b["id"], False) for b in content if b["type"] == "tool-call")

    def _calling(self, context: ToolContext[Any]) -> None:
        if context.tool_call_id not in self.called:  # an approved call's is written
            self.turn.calling(context.tool_call_id, context.tool_name, context.tool_arguments)
        self.unanswered[context.tool_call_id] = True

    def park(self, result: RunResult, added: list[tuple[int, list[TResponseInputItem]]]) -> None:
        """The SDK stopped the run for its tool approvals (``result.interruptions``): each
        call the model made is dispatched (``tool/call``), each approval asked, and the
        turn parked with the SDK's ``RunState`` as its own JSON (``to_json``), the input
        the run entered, and which approval is which call. A state the SDK cannot
        serialize raises before anything is written."""
        state = result.to_state().to_json()
        approvals = []
        for index, item in enumerate(result.interruptions):
            call_id = item.call_id
            ours = call_id if call_id in self.unanswered else None  # a call of this run's
            name = item.name or "tool"
            if ours is not None and ours not in self.called:
                self.turn.calling(ours, name, item.arguments or "")
                self.called.add(ours)
            id = f"approval-{self.turn.number}-{self.turn.steps}-{call_id or index}"
            self.turn.ask(id, name, ours, _arguments(item))
            approvals.append({"id": id, "callId": call_id, "ours": ours is not None})
        since = (self.turn.log.last_seq or 0) + 1  # the decisions' answers come after
        batches = [[at, items] for at, items in added]
        self.turn.park(
            {"runState": state, "added": batches, "approvals": approvals, "since": since}
        )

    def _answered(self, context: ToolContext[Any], result: object) -> None:
        call_id = context.tool_call_id
        item: TResponseInputItem
        if context.tool_call is not None:
            item = cast("Any", ItemHelpers.tool_call_output_item(context.tool_call, result))
        else:
            item = _output_item(call_id, str(result))
        output = cast("Any", item).get("output")
        said = output if isinstance(output, str) else json.dumps(output)
        extra: dict[str, Any] = {} if item == _output_item(call_id, said) else {"item": item}
        self.turn.answered(call_id, [text(said)], is_error=result == _TOOL_ERROR, **extra)
        self.session._hold([item])
        self.unanswered.pop(call_id, None)

    def answer_the_rest(self, error: BaseException) -> None:
        """Answers each call the run leaves without a result as it ends with ``error``
        (a step must not end with a call pending, SPEC §15.4), as repair would."""
        if not self.turn.current:
            return
        why = type(error).__name__
        for call_id, started in self.unanswered.items():
            if started:
                said = (
                    f"The run ended ({why}) while this tool ran: its outcome is unknown. "
                    "Retry only what is read-only or idempotent; verify first otherwise."
                )
                code = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
            else:
                said = f"The run ended ({why}) before this tool started; retry it if needed."
                code = {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
            self.turn.answered(call_id, [text(said)], is_error=True, error=code)
        self.unanswered.clear()


def _blocks(output: Any) -> list[dict[str, Any]]:
    """The conversation's blocks for one output item of a model response: a message's
    text (and refusal), a reasoning item's summary, a function call as ``tool-call``."""
    kind = getattr(output, "type", None)
    if kind == "message":
        parts = [getattr(p, "text", None) or getattr(p, "refusal", "") for p in output.content]
        return [text(part) for part in parts if part]
    if kind == "reasoning":
        return [{"type": "reasoning", "text": part.text} for part in output.summary]
    if kind == "function_call":
        block = {"type": "tool-call", "id": output.call_id, "name": output.name}
        return [{**block, "arguments": output.arguments}]
    return []


def _model_name(model: Any) -> str:
    """The name of the model an agent runs on (a model object's ``model``, or its class)."""
    if isinstance(model, str):
        return model
    name = getattr(model, "model", None)
    if isinstance(name, str):
        return name
    return "default" if model is None else type(model).__name__


def _usage(response: ModelResponse) -> dict[str, int]:
    """A response's usage in the reference's keys."""
    usage = response.usage
    found = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens}
    cached = getattr(usage.input_tokens_details, "cached_tokens", 0) or 0
    reasoning = getattr(usage.output_tokens_details, "reasoning_tokens", 0) or 0
    if cached:
        found["cacheReadTokens"] = cached
    if reasoning:
        found["reasoningTokens"] = reasoning
    return found


def _input_message(input: str | Sequence[TResponseInputItem]) -> Message:
    """The inbox message a run's own input travels as."""
    id = input_id()
    if isinstance(input, str):
        return {"id": id, "role": "user", "content": input}
    return {"id": id, "items": list(input)}


def _is_length_stop(error: ModelBehaviorError) -> bool:
    """Whether the SDK raised ``error`` for a response cut at its output token limit."""
    text = str(error)
    return "max_output_tokens" in text or "finish_reason='length'" in text


__all__ = [
    "ASSISTANT",
    "CLEAR",
    "ITEMS",
    "POP",
    "RESULT",
    "USER",
    "InboxlogSession",
    "StepRejectedError",
    "TurnEndedError",
    "event_items",
    "fold_items",
    "message_items",
    "run",
]

if TYPE_CHECKING:
    from agents.memory.session import Session as _SdkSession

    def _implements_the_sdk_protocol(session: InboxlogSession) -> _SdkSession:
        """Has a type checker prove that the structural protocol holds."""
        return session
