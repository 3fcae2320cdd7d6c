"""The pure mapping from a session's events to span records (SPEC §18), with no
OpenTelemetry import: :class:`TraceBuilder` takes the events in log order and hands back
the spans of each turn as that turn ends.

Ids are derived, never random: a turn's trace id hashes the session id and the seq of
its ``turn/start``, a span id the session id and the seq of the event that opens it, so
exporting the same stretch twice gives the same ids. Times are the events' ``time``.
The builder keeps only what the open turn needs (its spans, not its events) and the
ids of the messages pending in the inbox with the time each was inserted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from hashlib import blake2b
from typing import Any, Literal

from ..types import Event

AttributeValue = str | bool | int | float | list[str]
Attributes = dict[str, AttributeValue]
SpanKind = Literal["internal", "client"]


@dataclass(slots=True)
class SpanEvent:
    """A point in a span's life: a name, a time (Unix ms) and attributes."""

    name: str
    time_ms: int
    attributes: Attributes


@dataclass(slots=True)
class SpanRecord:
    """One span, ready for an exporter: ids as integers (128-bit trace, 64-bit span),
    times in Unix ms, ``error`` the status description when the span failed."""

    name: str
    kind: SpanKind
    trace_id: int
    span_id: int
    parent_id: int | None
    start_ms: int
    end_ms: int
    attributes: Attributes
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None


def trace_id(session: str, seq: int) -> int:
    """The trace id of the turn (or the manual compaction) that starts at ``seq``."""
    return _hash(session, "trace", seq, "", 16)


def span_id(session: str, seq: int, key: str = "") -> int:
    """The span id of the span opened by the event at ``seq`` (``key`` tells apart
    spans one event opens, e.g. each tool call of one ``assistant/message``)."""
    return _hash(session, "span", seq, key, 8)


def _hash(session: str, what: str, seq: int, key: str, size: int) -> int:
    digest = blake2b(f"{session}\0{what}\0{seq}\0{key}".encode(), digest_size=size).digest()
    # All-zero ids are invalid in OpenTelemetry; one in 2^64 hashes needs a nudge.
    return int.from_bytes(digest, "big") or 1


class _Turn:
    """The spans of the open turn while it runs."""

    __slots__ = (
        "approvals",
        "claims",
        "parked_at",
        "root",
        "seq",
        "spans",
        "steering",
        "step",
        "steps",
        "tools",
    )

    def __init__(self, root: SpanRecord, seq: int) -> None:
        self.root = root
        self.seq = seq
        self.steps = 0
        self.spans: list[SpanRecord] = [root]
        self.step: SpanRecord | None = None
        # Claims wait for the step they enter (or the turn's end, when no step opens).
        self.claims: list[SpanEvent] = []
        # Open execute_tool spans by call id; approvals by id: (asked ms, its span).
        self.tools: dict[str, SpanRecord] = {}
        self.approvals: dict[str, tuple[int, SpanRecord]] = {}
        self.parked_at: int | None = None
        self.steering = 0

    @property
    def current(self) -> SpanRecord:
        return self.root if self.step is None else self.step


class TraceBuilder:
    """Events of one session in → span records out, one turn at a time.

    Feed every event from seq 0 (or from where the inbox was empty) with :meth:`feed`;
    it returns the spans of a turn (or of a manual compaction) when its last event
    comes, and nothing otherwise. Turns that start before ``emit_from`` (and the
    events of a seed, below ``seed_length``: the parent's turns, traced as the
    parent's) are followed for the inbox's state but not returned.
    """

    def __init__(
        self,
        session: str,
        *,
        emit_from: int = 0,
        seed_length: int = 0,
        agent_name: str | None = None,
    ) -> None:
        self.session = session
        self.emit_from = max(emit_from, seed_length)
        self.seed_length = seed_length
        self.agent_name = agent_name
        self.next_seq = 0
        # The inbox as ids, list by list, and when each pending message was inserted.
        self._lists: dict[str, list[str]] = {"next-turn": [], "next-step": []}
        self._inserted: dict[str, int] = {}
        self._moving: dict[str, int] = {}
        self._turn: _Turn | None = None
        self._compaction: SpanRecord | None = None
        # The seq of a manual compaction's start (its own trace), None inside a turn.
        self._compaction_seq: int | None = None
        self._handlers = {
            "agent/inbox/spliced": self._spliced,
            "agent/inbox/rejected": self._rejected,
            "turn/start": self._turn_start,
            "turn/end": self._turn_end,
            "step/start": self._step_start,
            "step/end": self._step_end,
            "assistant/message": self._assistant,
            "tool/call": self._tool_call,
            "tool/result": self._tool_result,
            "approval/asked": self._approval_asked,
            "approval/decided": self._approval_decided,
            "turn/parked": self._parked,
            "turn/resumed": self._resumed,
            "compaction/start": self._compaction_start,
            "compaction/summary": self._compaction_summary,
            "compaction/end": self._compaction_end,
            "compaction/prune": self._prune,
        }

    @property
    def turn_open(self) -> bool:
        """Whether a turn has started and not yet ended."""
        return self._turn is not None

    @property
    def resume_seq(self) -> int:
        """Where an export that stops now resumes: the start of what is still open (a
        turn, a manual compaction), else the next seq."""
        open_at = [self.next_seq]
        if self._turn is not None:
            open_at.append(self._turn.seq)
        if self._compaction_seq is not None and self._compaction is not None:
            open_at.append(self._compaction_seq)
        return min(open_at)

    def feed(self, event: Event) -> list[SpanRecord]:
        """Takes the next event; returns the spans it completes (empty mostly)."""
        seq = event["seq"]
        self.next_seq = seq + 1
        if seq == self.seed_length and seq:
            # The inbox replays from the seed's end (§3.5): it starts empty there.
            for ids in self._lists.values():
                ids.clear()
            self._inserted.clear()
        handler = self._handlers.get(event["type"])
        if handler is None:
            return []
        return handler(event)

    # -- the inbox -------------------------------------------------------------------

    def _spliced(self, event: Event) -> list[SpanRecord]:
        data = event["data"]
        target = data.get("target")
        ids = self._lists.get(target) if isinstance(target, str) else None
        if ids is None:
            return []
        time = event["time"]
        start = data.get("start", 0)
        removed_count = data.get("removedCount", 0)
        inserted = [str(m.get("id")) for m in data.get("inserted", ()) if isinstance(m, dict)]
        removed = ids[start : start + removed_count] if removed_count else []
        ids[start : start + removed_count] = inserted
        outcome = data.get("outcome")
        turn = self._turn
        waited: dict[str, int | None] = {}
        for mid in removed:
            at = self._inserted.pop(mid, None)
            if outcome == "moved" and at is not None:
                self._moving[mid] = at
            waited[mid] = at
        for mid in inserted:
            self._inserted[mid] = self._moving.pop(mid, time)
        if outcome == "moved":
            return []
        if turn is None:
            return []
        if removed and outcome is None:
            # A claim (§5.1): the messages enter the next step, or end a no-step turn.
            for mid in removed:
                attributes: Attributes = {
                    "inboxlog.message.id": mid,
                    "inboxlog.inbox.target": target,
                }
                at = waited[mid]
                if at is not None:
                    attributes["inboxlog.inbox.wait_ms"] = time - at
                turn.claims.append(SpanEvent("inboxlog.inbox.claimed", time, attributes))
                if target == "next-step":
                    turn.steering += 1
            return []
        span = turn.current
        if removed and outcome == "canceled":
            for mid in removed:
                span.events.append(
                    SpanEvent(
                        "inboxlog.inbox.canceled",
                        time,
                        {"inboxlog.message.id": mid, "inboxlog.inbox.target": target},
                    )
                )
        for mid in inserted:
            # Input that arrives while the turn runs: steering (next-step) or next turns'.
            span.events.append(
                SpanEvent(
                    "inboxlog.inbox.inserted",
                    time,
                    {"inboxlog.message.id": mid, "inboxlog.inbox.target": target},
                )
            )
        return []

    def _rejected(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is None:
            return []
        data = event["data"]
        reason = data.get("reason") if isinstance(data, dict) else None
        attributes: Attributes = {}
        if isinstance(reason, dict) and isinstance(reason.get("kind"), str):
            attributes["error.type"] = reason["kind"]
        for what in ("message", "edit", "move", "decision"):
            if isinstance(data, dict) and what in data:
                attributes["inboxlog.rejected"] = what
        turn.current.events.append(SpanEvent("inboxlog.inbox.rejected", event["time"], attributes))
        return []

    # -- turns and steps -------------------------------------------------------------

    def _turn_start(self, event: Event) -> list[SpanRecord]:
        seq, data = event["seq"], event["data"]
        name = "invoke_agent" if self.agent_name is None else f"invoke_agent {self.agent_name}"
        attributes: Attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": self.session,
            "inboxlog.turn": data.get("turn", 0),
            "inboxlog.seq": seq,
        }
        if self.agent_name is not None:
            attributes["gen_ai.agent.name"] = self.agent_name
        root = SpanRecord(
            name,
            "internal",
            trace_id(self.session, seq),
            span_id(self.session, seq),
            None,
            event["time"],
            event["time"],
            attributes,
        )
        self._turn = _Turn(root, seq)
        return []

    def _step_start(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is None:
            return []
        seq, data = event["seq"], event["data"]
        step = SpanRecord(
            "chat",
            "client",
            turn.root.trace_id,
            span_id(self.session, seq),
            turn.root.span_id,
            event["time"],
            event["time"],
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.conversation.id": self.session,
                "inboxlog.step": data.get("step", 0),
                "inboxlog.seq": seq,
            },
            turn.claims,
        )
        turn.claims = []
        turn.step = step
        turn.steps += 1
        turn.spans.append(step)
        return []

    def _step_end(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is not None and turn.step is not None:
            turn.step.end_ms = event["time"]
            turn.step = None
        return []

    def _turn_end(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is None:
            return []
        self._turn = None
        time = event["time"]
        root = turn.root
        root.end_ms = time
        root.events.extend(turn.claims)
        if turn.step is not None:
            turn.step.end_ms = time
        for tool in turn.tools.values():
            # A call the turn left without a result (repair answers them first, §15.4).
            tool.end_ms = time
            tool.error = "no result before the turn ended"
        reason = event["data"].get("reason")
        kind = reason.get("kind") if isinstance(reason, dict) else None
        if isinstance(kind, str):
            root.attributes["inboxlog.turn.end_reason"] = kind
        if kind == "error":
            error = reason.get("error") if isinstance(reason, dict) else None
            error = error if isinstance(error, dict) else {}
            root.error = str(error.get("message", "error"))
            root.attributes["error.type"] = str(error.get("code", "error"))
        elif kind == "interrupted":
            # The writer died or was taken over mid-turn; the next owner's open closed it.
            root.error = "interrupted: closed by the next writer's repair"
            root.attributes["error.type"] = "interrupted"
            root.events.append(SpanEvent("inboxlog.turn.interrupted", time, {}))
        elif kind == "aborted":
            cause = reason.get("reason") if isinstance(reason, dict) else None
            if isinstance(cause, dict) and isinstance(cause.get("kind"), str):
                root.attributes["inboxlog.turn.abort_cause"] = cause["kind"]
        root.attributes["inboxlog.turn.steps"] = turn.steps
        root.attributes["inboxlog.turn.steering"] = turn.steering
        return [] if turn.seq < self.emit_from else turn.spans

    # -- the conversation ------------------------------------------------------------

    def _assistant(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is None:
            return []
        data = event["data"]
        message = data.get("message")
        if not isinstance(message, dict):
            return []
        span = turn.step if turn.step is not None else turn.root
        source = message.get("source")
        if isinstance(source, dict) and span is turn.step:
            model, provider = source.get("model"), source.get("provider")
            if isinstance(model, str):
                span.attributes["gen_ai.request.model"] = model
                span.attributes["gen_ai.response.model"] = model
                span.name = f"chat {model}"
            if isinstance(provider, str):
                span.attributes["gen_ai.provider.name"] = provider
        if isinstance(message.get("id"), str) and span is turn.step:
            span.attributes["gen_ai.response.id"] = message["id"]
        usage = data.get("usage")
        if isinstance(usage, dict) and span is turn.step:
            _add_usage(span.attributes, usage)
        if data.get("interrupted") is True:
            span.attributes["inboxlog.interrupted"] = True
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool-call":
                    call = block.get("id")
                    if isinstance(call, str) and call not in turn.tools:
                        # Opened here; a tool/call for it moves the start to its dispatch.
                        self._open_tool(turn, event, call, block.get("name"), key=call)
        return []

    def _open_tool(
        self, turn: _Turn, event: Event, call: str, name: object, key: str = ""
    ) -> SpanRecord:
        parent = turn.current
        tool = str(name) if isinstance(name, str) else ""
        span = SpanRecord(
            f"execute_tool {tool}" if tool else "execute_tool",
            "internal",
            turn.root.trace_id,
            span_id(self.session, event["seq"], key),
            parent.span_id,
            event["time"],
            event["time"],
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.conversation.id": self.session,
                "gen_ai.tool.call.id": call,
                "gen_ai.tool.type": "function",
                "inboxlog.seq": event["seq"],
            },
        )
        if tool:
            span.attributes["gen_ai.tool.name"] = tool
        turn.tools[call] = span
        turn.spans.append(span)
        return span

    def _tool_call(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is None:
            return []
        data = event["data"]
        call = data.get("callId")
        if not isinstance(call, str):
            return []
        opened = turn.tools.get(call)
        if opened is not None:
            # The model asked for it in an assistant/message; it was dispatched now.
            turn.spans.remove(opened)
        self._open_tool(turn, event, call, data.get("name"))
        return []

    def _tool_result(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is None:
            return []
        data = event["data"]
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict) or block.get("type") != "tool-result":
                continue
            call = block.get("toolCallId")
            if not isinstance(call, str):
                continue
            span = turn.tools.pop(call, None)
            if span is None:
                span = self._open_tool(turn, event, call, None, key=call)
                turn.tools.pop(call)
            span.end_ms = event["time"]
            error = data.get("error")
            if block.get("isError") is True or isinstance(error, dict):
                name = error.get("name") if isinstance(error, dict) else None
                code = error.get("code") if isinstance(error, dict) else None
                span.attributes["error.type"] = str(name) if name else "tool_error"
                span.error = str(code) if code else "the tool reported an error"
        return []

    # -- approvals -------------------------------------------------------------------

    def _approval_asked(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        data = event["data"]
        if turn is None or not isinstance(data.get("id"), str):
            return []
        call = data.get("callId")
        span = turn.tools.get(call) if isinstance(call, str) else None
        span = span if span is not None else turn.current
        attributes: Attributes = {"inboxlog.approval.id": data["id"]}
        if isinstance(data.get("toolName"), str):
            attributes["gen_ai.tool.name"] = data["toolName"]
        span.events.append(SpanEvent("inboxlog.approval.asked", event["time"], attributes))
        turn.approvals[data["id"]] = (event["time"], span)
        return []

    def _approval_decided(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        data = event["data"]
        if turn is None or not isinstance(data.get("id"), str):
            return []
        asked = turn.approvals.pop(data["id"], None)
        span = turn.current if asked is None else asked[1]
        attributes: Attributes = {"inboxlog.approval.id": data["id"]}
        if isinstance(data.get("outcome"), str):
            attributes["inboxlog.approval.outcome"] = data["outcome"]
            span.attributes["inboxlog.approval.outcome"] = data["outcome"]
        if asked is not None:
            attributes["inboxlog.approval.wait_ms"] = event["time"] - asked[0]
            span.attributes["inboxlog.approval.wait_ms"] = event["time"] - asked[0]
        span.events.append(SpanEvent("inboxlog.approval.decided", event["time"], attributes))
        return []

    def _parked(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is None:
            return []
        approvals = event["data"].get("approvals")
        ids = [str(a) for a in approvals] if isinstance(approvals, list) else []
        turn.parked_at = event["time"]
        turn.root.events.append(
            SpanEvent("inboxlog.turn.parked", event["time"], {"inboxlog.approval.ids": ids})
        )
        return []

    def _resumed(self, event: Event) -> list[SpanRecord]:
        turn = self._turn
        if turn is None:
            return []
        attributes: Attributes = {}
        if turn.parked_at is not None:
            attributes["inboxlog.turn.parked_ms"] = event["time"] - turn.parked_at
        turn.root.events.append(SpanEvent("inboxlog.turn.resumed", event["time"], attributes))
        return []

    # -- compaction ------------------------------------------------------------------

    def _compaction_start(self, event: Event) -> list[SpanRecord]:
        data, seq, turn = event["data"], event["seq"], self._turn
        cid = data.get("compactionId")
        attributes: Attributes = {
            "gen_ai.conversation.id": self.session,
            "inboxlog.seq": seq,
        }
        if isinstance(cid, str):
            attributes["inboxlog.compaction.id"] = cid
        standalone = turn is None
        span = SpanRecord(
            "inboxlog.compaction",
            "internal",
            trace_id(self.session, seq) if turn is None else turn.root.trace_id,
            span_id(self.session, seq),
            None if turn is None else turn.current.span_id,
            event["time"],
            event["time"],
            attributes,
        )
        if turn is not None:
            turn.spans.append(span)
        self._compaction = span
        self._compaction_seq = seq if standalone else None
        return []

    def _compaction_summary(self, event: Event) -> list[SpanRecord]:
        span, data = self._compaction, event["data"]
        if span is None:
            return []
        for key, name in (
            ("shadowedTokenCount", "inboxlog.compaction.shadowed_tokens"),
            ("provider", "gen_ai.provider.name"),
            ("model", "gen_ai.request.model"),
        ):
            value = data.get(key)
            if isinstance(value, str | int) and not isinstance(value, bool):
                span.attributes[name] = value
        seqs = data.get("shadowedSeqs")
        if isinstance(seqs, list):
            span.attributes["inboxlog.compaction.shadowed_events"] = len(seqs)
        usage = data.get("usage")
        if isinstance(usage, dict):
            _add_usage(span.attributes, usage)
        return []

    def _compaction_end(self, event: Event) -> list[SpanRecord]:
        span = self._compaction
        if span is None:
            return []
        self._compaction = None
        span.end_ms = event["time"]
        error = event["data"].get("error")
        if isinstance(error, str):
            span.error = error
            span.attributes["error.type"] = error
        at = self._compaction_seq
        return [span] if at is not None and at >= self.emit_from else []

    def _prune(self, event: Event) -> list[SpanRecord]:
        turn, data = self._turn, event["data"]
        if turn is None:
            return []
        attributes: Attributes = {}
        tokens = data.get("shadowedTokenCount")
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            attributes["inboxlog.compaction.shadowed_tokens"] = tokens
        turn.current.events.append(
            SpanEvent("inboxlog.compaction.prune", event["time"], attributes)
        )
        return []


_USAGE = (
    ("inputTokens", "gen_ai.usage.input_tokens"),
    ("outputTokens", "gen_ai.usage.output_tokens"),
    ("cacheReadTokens", "gen_ai.usage.cache_read.input_tokens"),
    ("cacheWriteTokens", "gen_ai.usage.cache_creation.input_tokens"),
    ("reasoningTokens", "gen_ai.usage.reasoning.output_tokens"),
)


def _add_usage(attributes: Attributes, usage: dict[str, Any]) -> None:
    """Adds a message's token counts to a span's (a step may answer more than once)."""
    for key, name in _USAGE:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            before = attributes.get(name, 0)
            attributes[name] = (before if isinstance(before, int) else 0) + value


def spans_of(
    session: str,
    events: list[Event],
    *,
    emit_from: int = 0,
    seed_length: int = 0,
    agent_name: str | None = None,
) -> list[SpanRecord]:
    """Every span of the turns (and manual compactions) that end in ``events``: the
    events of one session from seq 0, in order."""
    builder = TraceBuilder(
        session, emit_from=emit_from, seed_length=seed_length, agent_name=agent_name
    )
    spans: list[SpanRecord] = []
    for event in events:
        spans.extend(builder.feed(event))
    return spans
