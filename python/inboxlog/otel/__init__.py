"""The log as OpenTelemetry traces (SPEC §18), live or afterwards (extra ``otel``).

One trace per turn: an ``invoke_agent`` span for the turn, a ``chat`` span per step
(model, provider, token usage from its ``assistant/message``), an ``execute_tool`` span
per tool call, in the GenAI semantic conventions; and what the log alone knows, as
attributes and span events: how long each claimed message waited in the inbox,
steering that arrived mid-run, approvals and their wait, compactions, turns a dead or
taken-over writer left open. Ids derive from the session id and seqs, times from the
events, so the same stretch exported twice gives the same spans.

    from inboxlog.otel import Sender, export_session, otlp_exporter

    sender = Sender(otlp_exporter("http://localhost:4318/v1/traces"))
    export_session(store, "s1", sender)

Never imported by ``import inboxlog``.
"""

from __future__ import annotations

from .export import ExportError, ExportReport, Sender, builder_for, export_session, otlp_exporter
from .follow import FollowState, follow
from .spans import SpanEvent, SpanRecord, TraceBuilder, span_id, spans_of, trace_id

__all__ = [
    "ExportError",
    "ExportReport",
    "FollowState",
    "Sender",
    "SpanEvent",
    "SpanRecord",
    "TraceBuilder",
    "builder_for",
    "export_session",
    "follow",
    "otlp_exporter",
    "span_id",
    "spans_of",
    "trace_id",
]
