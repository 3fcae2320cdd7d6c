"""The log as OpenTelemetry traces (SPEC §18): ``inboxlog.otel`` exporting sessions to
a real OTLP/HTTP endpoint started here (``otlp_receiver.Receiver``, which decodes what
arrives with opentelemetry-proto), over every store and over sessions written by the
library's calls, by each framework integration, by the C library and by the importer.
Following and ``inboxlog trace`` are in ``test_otel_follow.py``."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import m, said, tool_call, tool_result
from otlp_receiver import Receiver, Span

import inboxlog
from inboxlog.otel import Sender, TraceBuilder, export_session, otlp_exporter, span_id, trace_id

HERE = Path(__file__).resolve().parent
CLIENT, INTERNAL = 3, 1  # OTLP's SpanKind numbers
ERROR = 2  # OTLP's StatusCode.STATUS_CODE_ERROR
MS = 1_000_000


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def export(store: inboxlog.Store, id: str, receiver: Receiver, **kw: Any) -> list[Span]:
    """Exports session ``id`` to the receiver; the spans it got from this export."""
    before = len(receiver.spans)
    sender = Sender(otlp_exporter(receiver.url), **kw)
    try:
        report = export_session(store, id, sender)
    finally:
        sender.close()
    assert report.spans == len(receiver.spans) - before
    return receiver.spans[before:]


def hx(n: int, size: int) -> str:
    return n.to_bytes(size, "big").hex()


def by_name(spans: list[Span], prefix: str) -> list[Span]:
    return [s for s in spans if s.name.startswith(prefix)]


def first(events: list[dict[str, Any]], type: str, **data: Any) -> dict[str, Any]:
    return next(
        e
        for e in events
        if e["type"] == type and all(e["data"].get(k) == v for k, v in data.items())
    )


T = 1_700_000_000_000  # the reference log's times: T + the offsets below


def everything() -> list[tuple[int, str, Any, dict[str, Any]]]:
    """A session with each thing §18 names, as (time offset, type, data, envelope): a
    tool call asked for approval (decided 5 s later), a failing result, steering taken
    mid-run, a compaction in the turn, a turn blocked without a step, a manual
    compaction that failed, a parked turn resumed a minute later, a failed turn."""
    call = {"type": "tool-call", "id": "k1", "name": "weather", "arguments": "{}"}
    usage = {"inputTokens": 10, "outputTokens": 4, "cacheReadTokens": 2}
    error = {"name": "WeatherDown", "code": "DOWN"}
    append = {"surfaceOp": "append"}

    def put(target: str, id: str) -> dict[str, Any]:
        message = m(id, role="user", content=id)
        return {"target": target, "start": 0, "inserted": [message]}

    def take(target: str) -> dict[str, Any]:
        return {"target": target, "start": 0, "removedCount": 1, "inserted": []}

    summary = {
        "id": "summary-c1",
        "role": "user",
        "content": [{"type": "text", "text": "asked the weather"}],
        "source": {"kind": "plugin", "plugin": "compact", "compactionId": "c1"},
    }
    return [
        (0, "agent/inbox/spliced", put("next-turn", "m1"), {}),
        (10, "turn/start", {"turn": 1}, {}),
        (10, "agent/inbox/spliced", take("next-turn"), {}),
        (11, "step/start", {"turn": 1, "step": 1}, {}),
        (11, "user/message", m("m1", role="user", content="m1"), append),
        (100, "assistant/message", said(1, 1, "a1", "Looking.", call, usage=usage), append),
        (101, "tool/call", tool_call(1, 1, "k1", "weather", "{}"), {}),
        (102, "approval/asked", {"id": "ap1", "toolName": "weather", "callId": "k1"}, {}),
        (5102, "approval/decided", {"id": "ap1", "outcome": "allowed-once"}, {}),
        (5200, "agent/inbox/spliced", put("next-step", "m2"), {}),
        (5300, "tool/result", tool_result(1, 1, "k1", "down", error=error), append),
        (5301, "step/end", {"turn": 1, "step": 1}, {}),
        (5302, "agent/inbox/spliced", take("next-step"), {}),
        (5302, "step/start", {"turn": 1, "step": 2}, {}),
        (5302, "user/message", m("m2", role="user", content="m2"), append),
        (6000, "assistant/message", said(1, 2, "a2", "Sunny.", usage={"inputTokens": 20}), append),
        (6001, "step/end", {"turn": 1, "step": 2}, {}),
        (6002, "compaction/start", {"compactionId": "c1", "turn": 1}, {}),
        (
            6500,
            "compaction/summary",
            {
                "compactionId": "c1",
                "summary": summary["content"],
                "shadowedRange": {"start": 14, "end": 15},
                "shadowedSeqs": [14, 15],
                "shadowedTokenCount": 40,
                "provider": "scripted",
                "model": "m1",
            },
            {},
        ),
        (
            6500,
            "user/message",
            summary,
            {
                "surfaceOp": {"op": "replace", "start": 14, "end": 15},
                "sourceEventSeqs": [17, 18, 14, 15],
            },
        ),
        (6600, "compaction/end", {"compactionId": "c1", "turn": 1}, {}),
        (6601, "turn/end", {"turn": 1, "reason": {"kind": "completed"}}, {}),
        (7000, "agent/inbox/spliced", put("next-turn", "m3"), {}),
        (8000, "turn/start", {"turn": 2}, {}),
        (8000, "agent/inbox/spliced", take("next-turn"), {}),
        (8001, "turn/end", {"turn": 2, "reason": {"kind": "blocked"}}, {}),
        (9000, "compaction/start", {"compactionId": "c2", "turn": None}, {}),
        (9100, "compaction/end", {"compactionId": "c2", "turn": None, "error": "conflict"}, {}),
        (10000, "agent/inbox/spliced", put("next-turn", "m4"), {}),
        (10001, "turn/start", {"turn": 3}, {}),
        (10001, "agent/inbox/spliced", take("next-turn"), {}),
        (10002, "step/start", {"turn": 3, "step": 1}, {}),
        (10002, "user/message", m("m4", role="user", content="m4"), append),
        (10003, "approval/asked", {"id": "ap2", "toolName": "delete"}, {}),
        (10004, "turn/parked", {"turn": 3, "approvals": ["ap2"]}, {}),
        (70004, "approval/decided", {"id": "ap2", "outcome": "rejected"}, {}),
        (70005, "turn/resumed", {"turn": 3}, {}),
        (70006, "step/end", {"turn": 3, "step": 1}, {}),
        (
            70006,
            "turn/end",
            {
                "turn": 3,
                "reason": {
                    "kind": "error",
                    "error": {"message": "the model went away", "code": "MODEL_DOWN"},
                },
            },
            {},
        ),
    ]


def import_everything(store: inboxlog.Store, id: str, tmp: Path, **header: Any) -> None:
    """``everything()`` as a reference harness log (§7.6), imported into ``store``: the
    library writes approvals, parked turns and compactions only through its own calls
    (§16, §17), and an imported log holds them as the reference wrote them."""
    lines = [{"type": "session", "version": 0, "id": id, "createdAt": T, **header}]
    for seq, (offset, type, data, envelope) in enumerate(everything()):
        lines.append({"type": type, "seq": seq, "time": T + offset, "data": data, **envelope})
    path = tmp / f"{id}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    inboxlog.import_reference(path, store, id=id).close()


def test_a_session_becomes_one_trace_per_turn_in_the_genai_conventions(
    store: inboxlog.Store, receiver: Receiver, tmp_path: Path
) -> None:
    import_everything(store, "s1", tmp_path, agentPreset="weatherbot")
    events = store.inspect("s1")[1]
    spans = export(store, "s1", receiver, service_name="otel-test")
    assert len({s.trace_id for s in spans}) == 4  # three turns, one manual compaction
    assert all(s.resource["service.name"] == "otel-test" for s in spans)
    assert all(s.scope == "inboxlog.otel" for s in spans)

    # Turn 1: invoke_agent ⊃ chat (step 1) ⊃ execute_tool, chat (step 2), compaction.
    start1 = first(events, "turn/start", turn=1)
    turn1 = [s for s in spans if s.trace_id == hx(trace_id("s1", start1["seq"]), 16)]
    [agent] = by_name(turn1, "invoke_agent")
    assert agent.name == "invoke_agent weatherbot" and agent.kind == INTERNAL
    assert agent.parent_id == "" and agent.span_id == hx(span_id("s1", start1["seq"]), 8)
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "weatherbot"
    assert agent.attributes["gen_ai.conversation.id"] == "s1"
    assert agent.attributes["inboxlog.turn.end_reason"] == "completed"
    assert agent.attributes["inboxlog.turn.steps"] == 2
    assert agent.attributes["inboxlog.turn.steering"] == 1
    assert agent.start == start1["time"] * MS
    assert agent.end == first(events, "turn/end", turn=1)["time"] * MS
    chats = sorted(by_name(turn1, "chat"), key=lambda s: s.start)
    assert [c.attributes["inboxlog.step"] for c in chats] == [1, 2]
    for chat, step in zip(chats, (1, 2), strict=True):
        assert chat.name == "chat m1" and chat.kind == CLIENT
        assert chat.parent_id == agent.span_id and chat.trace_id == agent.trace_id
        assert chat.attributes["gen_ai.request.model"] == "m1"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.start == first(events, "step/start", turn=1, step=step)["time"] * MS
        assert chat.end == first(events, "step/end", turn=1, step=step)["time"] * MS
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 10
    assert chats[0].attributes["gen_ai.usage.output_tokens"] == 4
    assert chats[0].attributes["gen_ai.usage.cache_read.input_tokens"] == 2
    assert chats[1].attributes["gen_ai.usage.input_tokens"] == 20
    assert chats[0].attributes["gen_ai.response.id"] == "a1"

    # Each claimed message, on the chat span of the step it entered, with its wait.
    def claimed(span: Span) -> list[dict[str, Any]]:
        return [a for name, _, a in span.events if name == "inboxlog.inbox.claimed"]

    def waited(id: str, target: str) -> int:
        inserted = next(
            e
            for e in events
            if e["type"] == "agent/inbox/spliced"
            and any(x["id"] == id for x in e["data"]["inserted"])
        )
        taken = next(
            e
            for e in events
            if e["type"] == "agent/inbox/spliced"
            and e["seq"] > inserted["seq"]
            and e["data"]["target"] == target
            and "outcome" not in e["data"]
            and e["data"].get("removedCount")
        )
        return int(taken["time"] - inserted["time"])

    assert (waited("m1", "next-turn"), waited("m2", "next-step")) == (10, 102)
    assert claimed(chats[0]) == [
        {
            "inboxlog.message.id": "m1",
            "inboxlog.inbox.target": "next-turn",
            "inboxlog.inbox.wait_ms": waited("m1", "next-turn"),
        }
    ]
    # Steering: inserted while step 1 ran, claimed by step 2 from next-step.
    assert (
        "inboxlog.inbox.inserted",
        {"inboxlog.message.id": "m2", "inboxlog.inbox.target": "next-step"},
    ) in [(n, a) for n, _, a in chats[0].events]
    assert claimed(chats[1]) == [
        {
            "inboxlog.message.id": "m2",
            "inboxlog.inbox.target": "next-step",
            "inboxlog.inbox.wait_ms": waited("m2", "next-step"),
        }
    ]

    # The tool: its span from tool/call to tool/result, an error, the approval's wait.
    [tool] = by_name(turn1, "execute_tool")
    call = first(events, "tool/call", callId="k1")
    asked = first(events, "approval/asked", id="ap1")
    decided = first(events, "approval/decided", id="ap1")
    assert tool.name == "execute_tool weather" and tool.parent_id == chats[0].span_id
    assert tool.span_id == hx(span_id("s1", call["seq"]), 8)
    assert tool.attributes["gen_ai.tool.name"] == "weather"
    assert tool.attributes["gen_ai.tool.call.id"] == "k1"
    assert tool.attributes["error.type"] == "WeatherDown"
    assert tool.status == ERROR and tool.message == "DOWN"
    assert tool.start == call["time"] * MS
    assert tool.end == first(events, "tool/result")["time"] * MS
    wait = decided["time"] - asked["time"]
    assert wait == 5000
    assert tool.attributes["inboxlog.approval.outcome"] == "allowed-once"
    assert tool.attributes["inboxlog.approval.wait_ms"] == wait
    assert [(n, t) for n, t, _ in tool.events] == [
        ("inboxlog.approval.asked", asked["time"] * MS),
        ("inboxlog.approval.decided", decided["time"] * MS),
    ]
    [compaction] = by_name(turn1, "inboxlog.compaction")
    assert compaction.parent_id == agent.span_id
    assert compaction.attributes["inboxlog.compaction.id"] == "c1"
    assert compaction.attributes["inboxlog.compaction.shadowed_tokens"] == 40
    assert compaction.attributes["inboxlog.compaction.shadowed_events"] == 2
    assert compaction.status != ERROR

    # Turn 2: rejected before any step; the claim is on the turn's span.
    start2 = first(events, "turn/start", turn=2)
    [agent2] = [s for s in spans if s.trace_id == hx(trace_id("s1", start2["seq"]), 16)]
    assert agent2.attributes["inboxlog.turn.end_reason"] == "blocked"
    assert claimed(agent2)[0]["inboxlog.message.id"] == "m3"

    # The manual compaction: a trace of its own, failed.
    c2 = first(events, "compaction/start", compactionId="c2")
    [manual] = [s for s in spans if s.trace_id == hx(trace_id("s1", c2["seq"]), 16)]
    assert manual.parent_id == "" and manual.status == ERROR and manual.message == "conflict"

    # Turn 3: parked, resumed, failed.
    start3 = first(events, "turn/start", turn=3)
    turn3 = [s for s in spans if s.trace_id == hx(trace_id("s1", start3["seq"]), 16)]
    [agent3] = by_name(turn3, "invoke_agent")
    assert agent3.status == ERROR and agent3.message == "the model went away"
    assert agent3.attributes["error.type"] == "MODEL_DOWN"
    names = [n for n, _, _ in agent3.events]
    assert names.index("inboxlog.turn.parked") < names.index("inboxlog.turn.resumed")
    resumed = next(a for n, _, a in agent3.events if n == "inboxlog.turn.resumed")
    parked_at = first(events, "turn/parked")["time"]
    assert resumed["inboxlog.turn.parked_ms"] == 60001
    assert resumed["inboxlog.turn.parked_ms"] == first(events, "turn/resumed")["time"] - parked_at
    [chat3] = by_name(turn3, "chat")
    assert (
        "inboxlog.approval.decided",
        {
            "inboxlog.approval.id": "ap2",
            "inboxlog.approval.outcome": "rejected",
            "inboxlog.approval.wait_ms": first(events, "approval/decided", id="ap2")["time"]
            - first(events, "approval/asked", id="ap2")["time"],
        },
    ) in [(n, a) for n, _, a in chat3.events]


def test_the_same_export_twice_gives_the_same_ids(
    jsonl: inboxlog.Store, receiver: Receiver, tmp_path: Path
) -> None:
    import_everything(jsonl, "s1", tmp_path)
    once = export(jsonl, "s1", receiver)
    again = export(jsonl, "s1", receiver)

    def key(spans: list[Span]) -> list[tuple[str, str, str, int, int, str]]:
        return sorted((s.trace_id, s.span_id, s.parent_id, s.start, s.end, s.name) for s in spans)

    assert key(once) == key(again)
    assert len({s.span_id for s in once}) == len(once)


def test_a_turn_left_open_is_traced_once_it_ends(jsonl: inboxlog.Store, receiver: Receiver) -> None:
    """A turn still open is not exported; once the next writer's open repairs it (a
    writer killed or taken over mid-turn) it is, marked interrupted, its tool call
    answered as of unknown outcome."""
    session = jsonl.create("s1")
    session.inbox.append("next-turn", m("m1", role="user", content="go"))
    session.open_turn()
    session.decide({"kind": "enter", "messages": session.propose_step()["messages"]})
    call = {"type": "tool-call", "id": "k1", "name": "deploy", "arguments": "{}"}
    session.append("assistant/message", said(1, 1, "a1", call))
    session.append("tool/call", tool_call(1, 1, "k1", "deploy", "{}"))
    session.close()
    assert export(jsonl, "s1", receiver) == []
    jsonl.open("s1").close()
    spans = export(jsonl, "s1", receiver)
    [agent] = by_name(spans, "invoke_agent")
    assert agent.status == ERROR and agent.attributes["inboxlog.turn.end_reason"] == "interrupted"
    assert "inboxlog.turn.interrupted" in [n for n, _, _ in agent.events]
    [tool] = by_name(spans, "execute_tool")
    assert tool.status == ERROR and tool.attributes["error.type"] == "ToolOutcomeUnknownError"


def test_a_fork_traces_only_its_own_turns(jsonl: inboxlog.Store, receiver: Receiver) -> None:
    with jsonl.create("parent") as session:
        session.inbox.append("next-turn", m("m1"))
        session.open_turn()
        session.decide({"kind": "enter", "messages": session.propose_step()["messages"]})
        session.end_step("completed")
        session.close_turn()
    with jsonl.fork("parent", "child") as child:
        child.inbox.append("next-turn", m("m2"))
        child.open_turn()
        child.decide({"kind": "enter", "messages": child.propose_step()["messages"]})
        child.end_step("completed")
        child.close_turn()
    spans = export(jsonl, "child", receiver)
    [agent] = by_name(spans, "invoke_agent")
    assert agent.attributes["inboxlog.turn"] == 2
    [chat] = by_name(spans, "chat")
    [(_, _, claim)] = chat.events
    assert claim["inboxlog.message.id"] == "m2"


def test_an_imported_reference_log_is_traced(jsonl: inboxlog.Store, receiver: Receiver) -> None:
    fixture = HERE.parents[1] / "core" / "tests" / "fixtures" / "reference" / "text.jsonl"
    with inboxlog.import_reference(fixture, jsonl, id="ref") as session:
        events = session.events()
    spans = export(jsonl, "ref", receiver)
    starts = [e for e in events if e["type"] == "turn/start"]
    agents = by_name(spans, "invoke_agent")
    assert sorted(a.start for a in agents) == [e["time"] * MS for e in starts]
    chats = by_name(spans, "chat")
    assert chats and all(c.parent_id in {a.span_id for a in agents} for c in chats)
    assert claimed_ids(chats) == ["m1"]  # m2 still waits in the inbox


def claimed_ids(spans: list[Span]) -> list[str]:
    return [
        a["inboxlog.message.id"]
        for s in sorted(spans, key=lambda s: s.start)
        for n, _, a in s.events
        if n == "inboxlog.inbox.claimed"
    ]


@pytest.mark.parametrize("integration", ["adk", "langgraph", "openai_agents", "pydantic_ai"])
def test_a_session_an_integration_wrote_is_traced(
    jsonl: inboxlog.Store, receiver: Receiver, integration: str
) -> None:
    """Each framework integration (its real package, a scripted model calling the
    weather tool once, then answering) writes a turn the trace shows as it ran: one
    invoke_agent, a chat span per model call with the model and provider, the tool's
    span under the chat span that asked for it."""
    sys.path.insert(0, str(HERE / "integrations"))
    from adapters import ADAPTERS, Script, say, tool

    script = Script(tool("Paris"), say("Sunny in Paris."))
    asyncio.run(ADAPTERS[integration].run(jsonl, "run", "Weather in Paris?", script))
    events = jsonl.inspect("run")[1]
    spans = export(jsonl, "run", receiver)
    [agent] = by_name(spans, "invoke_agent")
    chats = sorted(by_name(spans, "chat"), key=lambda s: s.start)
    assert len(chats) == 2 and all(c.parent_id == agent.span_id for c in chats)
    messages = [e["data"]["message"] for e in events if e["type"] == "assistant/message"]
    source = messages[0]["source"]
    assert chats[0].attributes["gen_ai.request.model"] == source["model"]
    assert chats[0].attributes["gen_ai.provider.name"] == source["provider"]
    [tool_span] = by_name(spans, "execute_tool")
    assert tool_span.name == "execute_tool weather"
    assert tool_span.parent_id == chats[0].span_id and tool_span.status != ERROR
    call = first(events, "tool/call")
    assert tool_span.attributes["gen_ai.tool.call.id"] == call["data"]["callId"]
    assert claimed_ids(spans) != []
    assert agent.attributes["inboxlog.turn.end_reason"] == "completed"


def test_a_session_a_c_host_wrote_is_traced(tmp_path: Path, receiver: Receiver) -> None:
    """A C host (the C library through ctypes, as tests/e2e calls it; `make test` names
    it in INBOXLOG_LIB) writes a turn with a tool call: the trace shows it."""
    if not os.environ.get("INBOXLOG_LIB") and os.environ.get("CI") != "true":
        pytest.skip("INBOXLOG_LIB names no C library (make test builds one)")
    import ctypes
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "e2e_c", HERE.parents[1] / "tests" / "e2e" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    e2e = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(e2e)
    c = e2e.C()
    source = '"source":{"kind":"model","provider":"c","model":"host"}'
    calling = (
        '{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":['
        '{"type":"tool-call","id":"k1","name":"lookup","arguments":"{}"}],' + source + "},"
        '"usage":{"inputTokens":7,"outputTokens":3}}'
    )
    result = (
        '{"turn":1,"step":1,"message":{"id":"r1","role":"user","content":[{"type":"tool-result",'
        '"toolCallId":"k1","content":[{"type":"text","text":"high tide at 6"}]}],'
        '"source":{"kind":"tool","callId":"k1"}}}'
    )
    answer = (
        '{"turn":1,"step":2,"message":{"id":"a2","role":"assistant","content":['
        '{"type":"text","text":"At six."}],' + source + "}}"
    )
    prompt = b'{"id":"q","role":"user","content":"When is high tide?"}'
    root = tmp_path / "c-sessions"
    root.mkdir()
    cstore = c.handle("inboxlog_store_open_jsonl", str(root).encode(), b"none")
    try:
        cs = c.handle("inboxlog_session_create", cstore, b"by-c", None)
        assert c.call("inboxlog_inbox_append", cs, b"next-turn", prompt)[0] == e2e.OK
        turn = ctypes.c_uint64()
        assert c.call("inboxlog_session_open_turn", cs, None, ctypes.byref(turn))[0] == e2e.OK
        c.string("inboxlog_session_propose_step", cs)
        c.string(
            "inboxlog_session_decide", cs, b'{"kind":"enter","messages":[' + prompt + b"]}", None
        )
        c.string("inboxlog_session_append", cs, b"assistant/message", calling.encode(), None)
        call = b'{"turn":1,"step":1,"callId":"k1","name":"lookup","arguments":"{}"}'
        c.string("inboxlog_session_append", cs, b"tool/call", call, None)
        c.string("inboxlog_session_append", cs, b"tool/result", result.encode(), None)
        again = ctypes.c_bool()
        assert (
            c.call("inboxlog_session_end_step", cs, b"continue", None, ctypes.byref(again))[0] == 0
        )
        c.string("inboxlog_session_propose_step", cs)
        c.string("inboxlog_session_decide", cs, b'{"kind":"enter","messages":[]}', None)
        c.string("inboxlog_session_append", cs, b"assistant/message", answer.encode(), None)
        assert (
            c.call("inboxlog_session_end_step", cs, b"completed", None, ctypes.byref(again))[0] == 0
        )
        c.string("inboxlog_session_close_turn", cs, None)
        assert c.call("inboxlog_session_close", cs)[0] == e2e.OK
        c.lib.inboxlog_session_free(cs)
    finally:
        c.lib.inboxlog_store_free(cstore)
    spans = export(inboxlog.Store(root), "by-c", receiver)
    [agent] = by_name(spans, "invoke_agent")
    chats = sorted(by_name(spans, "chat host"), key=lambda s: s.start)
    assert len(chats) == 2 and all(c.parent_id == agent.span_id for c in chats)
    assert chats[0].attributes["gen_ai.provider.name"] == "c"
    assert chats[0].attributes["gen_ai.usage.input_tokens"] == 7
    [tool_span] = by_name(spans, "execute_tool lookup")
    assert tool_span.parent_id == chats[0].span_id
    assert claimed_ids(spans) == ["q"]


def test_a_turn_holds_its_spans_not_its_events() -> None:
    """Memory while a turn runs is its spans: a step of 10,000 host events (streamed
    chunks) keeps two spans and no event."""
    builder = TraceBuilder("s")
    seq = iter(range(1_000_000))

    def feed(type: str, data: dict[str, Any]) -> list[Any]:
        return builder.feed({"type": type, "seq": next(seq), "time": 1, "data": data})

    feed("turn/start", {"turn": 1})
    feed("step/start", {"turn": 1, "step": 1})
    for i in range(10_000):
        feed("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"text": str(i)}})
    turn = builder._turn
    assert turn is not None and len(turn.spans) == 2
    assert all(not s.events for s in turn.spans)
    feed("step/end", {"turn": 1, "step": 1})
    spans = feed("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert len(spans) == 2 and builder._turn is None


def test_import_inboxlog_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, inboxlog; "
        "bad = [m for m in sys.modules if m.startswith(('opentelemetry', 'inboxlog.otel'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-P", "-c", code], check=True)


def test_an_endpoint_that_refuses_raises_export_error(
    jsonl: inboxlog.Store, receiver: Receiver, tmp_path: Path
) -> None:
    from inboxlog.otel import ExportError

    import_everything(jsonl, "s1", tmp_path)
    receiver.refuse = True
    sender = Sender(otlp_exporter(receiver.url))
    with pytest.raises(ExportError, match="refused"):
        export_session(jsonl, "s1", sender)
    assert receiver.spans == [] and receiver.posts == 0
