"""Span records (:mod:`inboxlog.otel.spans`) handed to the OpenTelemetry SDK's exporters.

The SDK's tracer draws ids at random; a trace read from a log must get the same ids
every time it is read, so the records become the SDK's own ``ReadableSpan`` objects
with the contexts the mapping chose, and go to any ``SpanExporter`` (the OTLP/HTTP one
for ``inboxlog trace``) as a tracer's batch processor would hand them on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event as OtelEvent
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from .. import Store, __version__
from .spans import SpanRecord, TraceBuilder

_KINDS = {"internal": SpanKind.INTERNAL, "client": SpanKind.CLIENT}
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_MS = 1_000_000
_SCOPE = InstrumentationScope("inboxlog.otel", __version__)


class ExportError(Exception):
    """The exporter did not take a batch of spans (after its own retries)."""


def otlp_exporter(
    endpoint: str, *, timeout: float = 10.0, headers: dict[str, str] | None = None
) -> OTLPSpanExporter:
    """The SDK's OTLP/HTTP (protobuf) exporter for ``endpoint``, the full traces URL
    (e.g. ``http://localhost:4318/v1/traces``)."""
    return OTLPSpanExporter(endpoint=endpoint, timeout=timeout, headers=headers)


class Sender:
    """Sends span records through a ``SpanExporter`` as the SDK's ``ReadableSpan``s,
    under one resource (``service.name``, default ``inboxlog``)."""

    def __init__(self, exporter: SpanExporter, *, service_name: str = "inboxlog") -> None:
        self.exporter = exporter
        self.resource = Resource.create({"service.name": service_name})
        self.spans = 0

    def readable(self, record: SpanRecord) -> ReadableSpan:
        """One record as the SDK's span, ids and times as the record has them."""
        parent = (
            None
            if record.parent_id is None
            else SpanContext(record.trace_id, record.parent_id, False, _SAMPLED)
        )
        status = (
            Status(StatusCode.UNSET)
            if record.error is None
            else Status(StatusCode.ERROR, record.error)
        )
        return ReadableSpan(
            name=record.name,
            context=SpanContext(record.trace_id, record.span_id, False, _SAMPLED),
            parent=parent,
            resource=self.resource,
            attributes=record.attributes,
            events=[OtelEvent(e.name, e.attributes, e.time_ms * _MS) for e in record.events],
            kind=_KINDS[record.kind],
            status=status,
            start_time=record.start_ms * _MS,
            end_time=record.end_ms * _MS,
            instrumentation_scope=_SCOPE,
        )

    def send(self, records: Sequence[SpanRecord]) -> None:
        """Exports ``records`` now; raises :class:`ExportError` when the exporter fails."""
        if not records:
            return
        result = self.exporter.export([self.readable(r) for r in records])
        if result is not SpanExportResult.SUCCESS:
            raise ExportError(f"the exporter refused {len(records)} span(s): {result.name}")
        self.spans += len(records)

    def close(self) -> None:
        """Shuts the exporter down."""
        self.exporter.shutdown()


@dataclass(slots=True)
class ExportReport:
    """What :func:`export_session` read and sent."""

    session: str
    events: int
    traces: int
    spans: int
    resume_seq: int


def builder_for(store: Store, session: str, *, since: int = 0) -> TraceBuilder:
    """A :class:`TraceBuilder` for a stored session, from its header: turns before the
    seed's end (the parent's) and before ``since`` are not returned."""
    header = store.peek(session)["header"]
    return TraceBuilder(
        session,
        emit_from=since,
        seed_length=header.get("seedLength", 0),
        agent_name=header.get("agentPreset"),
    )


def export_session(
    store: Store, session: str, sender: Sender, *, since: int = 0, batch: int = 512
) -> ExportReport:
    """Exports the spans of every turn of ``session`` that has ended, from its turns
    starting at seq ``since`` on (the log is read from seq 0 all the same, for the
    inbox's state: how long each claimed message waited). A turn still open is left for
    a later export, or for :func:`inboxlog.otel.follow`. Reads with a follower, so the
    session may be written meanwhile; spans go out in batches of about ``batch``."""
    builder = builder_for(store, session, since=since)
    pending: list[SpanRecord] = []
    events = traces = spans = 0
    with store.follow(session, since=0) as follower:
        while chunk := follower.next_batch(0):
            events += len(chunk)
            for event in chunk:
                done = builder.feed(event)
                if done:
                    traces += 1
                    pending.extend(done)
            if len(pending) >= batch:
                sender.send(pending)
                spans += len(pending)
                pending = []
    sender.send(pending)
    spans += len(pending)
    return ExportReport(session, events, traces, spans, builder.resume_seq)
