"""A real OTLP/HTTP traces endpoint for the tests and the benchmark: an HTTP server on a
thread that takes ``POST /v1/traces`` (protobuf), decodes each body with
opentelemetry-proto's ``ExportTraceServiceRequest`` and keeps the spans, flattened to
plain values. ``refuse`` makes it answer 400 (a client error the exporter does not
retry). ``GET /count`` answers how many spans came; run as a script, it serves until
killed, its traces URL on the first line of stdout."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def value(v: AnyValue) -> Any:
    """An OTLP attribute value as a plain one."""
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [value(x) for x in v.array_value.values]
    return None if kind is None else getattr(v, kind)


@dataclass
class Span:
    """One received span, ids as hex as trace viewers show them."""

    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_id: str
    start: int
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, int, dict[str, Any]]]
    status: int
    message: str
    resource: dict[str, Any]
    scope: str
    arrived: float = field(default=0.0)


class Receiver:
    """The endpoint; ``url`` is its traces URL, ``spans`` what came, ``posts`` how many
    requests did."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.posts = 0
        self.refuse = False
        self.lock = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces" or receiver.refuse:
                    self.send_response(404 if self.path != "/v1/traces" else 400)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                assert self.headers.get("Content-Type") == "application/x-protobuf"
                request = ExportTraceServiceRequest.FromString(body)
                receiver.take(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def do_GET(self) -> None:
                # How many spans came, for a receiver in another process (the benchmark).
                body = str(len(receiver.spans)).encode()
                self.send_response(200 if self.path == "/count" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"

    def take(self, request: ExportTraceServiceRequest) -> None:
        now = time.monotonic()
        got = []
        for rs in request.resource_spans:
            resource = {a.key: value(a.value) for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        Span(
                            s.name,
                            s.kind,
                            s.trace_id.hex(),
                            s.span_id.hex(),
                            s.parent_span_id.hex(),
                            s.start_time_unix_nano,
                            s.end_time_unix_nano,
                            {a.key: value(a.value) for a in s.attributes},
                            [
                                (
                                    e.name,
                                    e.time_unix_nano,
                                    {a.key: value(a.value) for a in e.attributes},
                                )
                                for e in s.events
                            ],
                            s.status.code,
                            s.status.message,
                            resource,
                            ss.scope.name,
                            now,
                        )
                    )
        with self.lock:
            self.posts += 1
            self.spans.extend(got)
            self.lock.notify_all()

    def wait_for(self, count: int, timeout: float = 30.0) -> list[Span]:
        """The spans once at least ``count`` came (fails after ``timeout`` seconds: a
        bound on a hang, not a measurement)."""
        with self.lock:
            assert self.lock.wait_for(lambda: len(self.spans) >= count, timeout), (
                f"{len(self.spans)} span(s) came, {count} expected"
            )
            return list(self.spans)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    serving = Receiver()
    print(serving.url, flush=True)
    threading.Event().wait()
