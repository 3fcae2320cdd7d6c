"""What tracing a session costs (SPEC §18): the export of a 100,000-event session, and
the lag of a follower from a turn's end to its spans leaving.

    .venv/bin/python python/bench/bench_otel.py [--events 100000] [--turns 300] [--rate 20]
        [--breakdown]

The endpoint is the tests' OTLP/HTTP receiver (``python/tests/otlp_receiver.py``) in a
process of its own, which decodes every request with opentelemetry-proto; the spans it
counted are checked against those sent.

- Export: two sessions of ``--events`` events each on a JSONL store, written first
  (durability ``none``). ``chatty``: turns of a tool call and an answer, each model
  response streamed as 20 ``assistant/chunk`` host events (53 events a turn); ``dense``:
  the same turns without chunks (13 events a turn, four times the spans per event).
  ``inboxlog.otel.export_session`` reads each from seq 0 and sends its spans in batches
  of 512; timed from the call to its return, best of three runs; events/s is the
  session's events over that time.
- Breakdown (``--breakdown``): the stages of the dense export timed apart, with no
  endpoint: reading the events (a follower, ``next_batch``), the mapping
  (``TraceBuilder``), the SDK's ``ReadableSpan`` objects, and the SDK's OTLP protobuf
  encoding (``encode_spans(...).SerializeToString()``, what the exporter posts).
- Follow lag: ``inboxlog.otel.follow`` on one session in a thread while another thread
  writes ``--turns`` dense turns at ``--rate`` turns/s; the lag of each turn is from
  ``close_turn`` returning (its ``turn/end`` committed) to the export of its spans
  returning (the endpoint answered), both ``time.monotonic``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import inboxlog
from inboxlog.otel import Sender, SpanRecord, export_session, follow, otlp_exporter

RECEIVER = Path(__file__).resolve().parents[1] / "tests" / "otlp_receiver.py"
SOURCE = {"kind": "model", "provider": "scripted", "model": "m1"}


def turn(session: inboxlog.Session, n: int, chunks: int) -> None:
    """One turn: a prompt, a step calling a tool, a step answering; ``chunks`` streamed
    deltas before each model response."""
    session.inbox.append("next-turn", {"id": f"q{n}", "role": "user", "content": "weather?"})
    t = session.open_turn()
    session.decide({"kind": "enter", "messages": session.propose_step()["messages"]})
    for i in range(chunks):
        session.append("assistant/chunk", {"turn": t, "step": 1, "chunk": {"text": str(i)}})
    call = {"type": "tool-call", "id": f"k{n}", "name": "weather", "arguments": "{}"}
    usage = {"inputTokens": 100, "outputTokens": 20}
    message = {"id": f"a{n}", "role": "assistant", "content": [call], "source": SOURCE}
    session.append("assistant/message", {"turn": t, "step": 1, "message": message, "usage": usage})
    session.append(
        "tool/call", {"turn": t, "step": 1, "callId": f"k{n}", "name": "weather", "arguments": "{}"}
    )
    block = {
        "type": "tool-result",
        "toolCallId": f"k{n}",
        "content": [{"type": "text", "text": "sunny"}],
    }
    result = {
        "id": f"r{n}",
        "role": "user",
        "content": [block],
        "source": {"kind": "tool", "callId": f"k{n}"},
    }
    session.append("tool/result", {"turn": t, "step": 1, "message": result})
    session.end_step("continue")
    session.decide({"kind": "enter", "messages": session.propose_step()["messages"]})
    for i in range(chunks):
        session.append("assistant/chunk", {"turn": t, "step": 2, "chunk": {"text": str(i)}})
    answer = {
        "id": f"b{n}",
        "role": "assistant",
        "content": [{"type": "text", "text": "Sunny."}],
        "source": SOURCE,
    }
    session.append("assistant/message", {"turn": t, "step": 2, "message": answer, "usage": usage})
    session.end_step("completed")
    session.close_turn()


def count(url: str) -> int:
    with urllib.request.urlopen(url.replace("/v1/traces", "/count")) as reply:
        return int(reply.read())


def export_bench(store: inboxlog.Store, url: str, events: int, name: str, chunks: int) -> None:
    with store.create(name) as session:
        n = 0
        while (session.last_seq or 0) + 1 < events:
            n += 1
            turn(session, n, chunks)
        total = session.last_seq + 1  # type: ignore[operator]
    best = float("inf")
    for _ in range(3):
        before = count(url)
        sender = Sender(otlp_exporter(url))
        start = time.perf_counter()
        report = export_session(store, name, sender)
        took = time.perf_counter() - start
        sender.close()
        assert report.events == total and count(url) - before == report.spans
        best = min(best, took)
    print(
        f"export {name:7} {total:>7,} events, {n:,} turns, {report.spans:,} spans: "
        f"{best:.2f} s, {total / best:,.0f} events/s, {report.spans / best:,.0f} spans/s"
    )


def breakdown(store: inboxlog.Store) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from inboxlog.otel import TraceBuilder

    class Discard(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    start = time.perf_counter()
    events = []
    with store.follow("dense") as follower:
        while chunk := follower.next_batch(0):
            events.extend(chunk)
    read = time.perf_counter() - start
    start = time.perf_counter()
    builder = TraceBuilder("dense")
    records = [span for event in events for span in builder.feed(event)]
    mapped = time.perf_counter() - start
    start = time.perf_counter()
    sender = Sender(Discard())
    readable = [sender.readable(r) for r in records]
    built = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(0, len(readable), 512):
        encode_spans(readable[i : i + 512]).SerializeToString()
    encoded = time.perf_counter() - start
    n, k = len(events), len(records)
    for name, took, per, unit in (
        ("read", read, n, "event"),
        ("map", mapped, n, "event"),
        ("ReadableSpan", built, k, "span"),
        ("SDK encode", encoded, k, "span"),
    ):
        print(f"  {name:13} {took:6.2f} s  {took / per * 1e6:6.1f} µs/{unit}")


def lag_bench(store: inboxlog.Store, url: str, turns: int, rate: float) -> None:
    ended: dict[int, float] = {}
    lags: list[float] = []
    stop = threading.Event()
    session = store.create("followed")

    def sent(_: str, spans: list[SpanRecord]) -> None:
        at = time.monotonic()
        lags.append(at - ended[int(spans[0].attributes["inboxlog.turn"])])  # type: ignore[arg-type]
        if len(lags) == turns:
            stop.set()

    sender = Sender(otlp_exporter(url))
    follower = threading.Thread(
        target=follow, args=(store, sender, ["followed"]), kwargs={"stop": stop, "on_trace": sent}
    )
    follower.start()
    start = time.monotonic()
    for n in range(1, turns + 1):
        time.sleep(max(0.0, start + n / rate - time.monotonic()))
        turn(session, n, 0)
        ended[n] = time.monotonic()
    follower.join()
    sender.close()
    session.close()
    lags.sort()
    ms = [x * 1000 for x in lags]
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    print(
        f"follow lag over {len(ms)} turns at {rate:g}/s: p50 {statistics.median(ms):.1f} ms, "
        f"p99 {p99:.1f} ms, max {ms[-1]:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--breakdown", action="store_true", help="time the stages apart")
    args = parser.parse_args()
    print(f"inboxlog from {Path(inboxlog.__file__).parent}")
    receiver = subprocess.Popen(
        [sys.executable, "-P", str(RECEIVER)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert receiver.stdout is not None
        url = receiver.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as root:
            store = inboxlog.Store(root, durability="none")
            export_bench(store, url, args.events, "chatty", 20)
            export_bench(store, url, args.events, "dense", 0)
            if args.breakdown:
                breakdown(store)
            lag_bench(store, url, args.turns, args.rate)
    finally:
        receiver.kill()
        receiver.wait()


if __name__ == "__main__":
    main()
